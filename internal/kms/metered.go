package kms

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Calls counts the calls that reach a KMS backend, below the cache: what the KMS bills, logs and throttles. It
// belongs to the process, not to one KMS, because KMSs are opened before the metrics registry exists; a filter
// that uses a KMS exposes it as its own collector (registering it twice is harmless).
var Calls = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "strait_kms_calls_total",
	Help: "Calls that reached a KMS backend (cache misses), by backend (vault, aws), operation (wrap, unwrap, " +
		"derive_key) and outcome (ok, not_found, unavailable, invalid, error).",
}, []string{"kms", "op", "outcome"})

// Metered returns k counting each call into Calls under the label backend.
func Metered(k KMS, backend string) KMS {
	m := &metered{k: k}
	for i, op := range []string{"wrap", "unwrap", "derive_key"} {
		for j, outcome := range outcomes {
			m.c[i][j] = Calls.WithLabelValues(backend, op, outcome)
		}
	}
	return m
}

const (
	opWrap = iota
	opUnwrap
	opDerive
)

var outcomes = [...]string{"ok", "not_found", "unavailable", "invalid", "error"}

type metered struct {
	k KMS
	c [3][len(outcomes)]prometheus.Counter // by op and outcome, looked up once
}

func (m *metered) count(op int, err error) {
	i := 0
	switch {
	case err == nil:
	case errors.Is(err, ErrKeyNotFound):
		i = 1
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		i = 2
	case errors.Is(err, ErrInvalid):
		i = 3
	default:
		i = 4
	}
	m.c[op][i].Inc()
}

func (m *metered) Name() string { return m.k.Name() }

func (m *metered) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	w, err := m.k.Wrap(ctx, kek, dek)
	m.count(opWrap, err)
	return w, err
}

func (m *metered) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	dek, err := m.k.Unwrap(ctx, kek, wrapped)
	m.count(opUnwrap, err)
	return dek, err
}

func (m *metered) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	key, v, err := m.k.DeriveKey(ctx, kek, version, label)
	m.count(opDerive, err)
	return key, v, err
}
