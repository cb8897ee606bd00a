package kms

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The cache answers Unwrap per binding: a KMS that checks the binding
// would refuse a wrapped key under another topic, so the cache must ask.
func TestCacheKeysUnwrapByBinding(t *testing.T) {
	f := &fake{answer: func(ctx context.Context, op, kek string, arg []byte, _ int) ([]byte, int, error) {
		if BindingFrom(ctx).Topic != "orders" {
			return nil, 0, fmt.Errorf("%w: bound to orders", ErrInvalid)
		}
		return []byte("dek"), 0, nil
	}}
	c := NewCache(f, CacheOptions{})
	orders := WithBinding(ctx, Binding{Topic: "orders"})
	for range 2 {
		if dek, err := c.Unwrap(orders, "k", []byte("w")); err != nil || !bytes.Equal(dek, []byte("dek")) {
			t.Fatalf("Unwrap bound to orders: %q %v", dek, err)
		}
	}
	if _, err := c.Unwrap(WithBinding(ctx, Binding{Topic: "payments"}), "k", []byte("w")); !errors.Is(err, ErrInvalid) {
		t.Errorf("the same wrapped key bound to another topic: %v, want the KMS's refusal", err)
	}
	if _, err := c.Unwrap(ctx, "k", []byte("w")); !errors.Is(err, ErrInvalid) {
		t.Errorf("the same wrapped key unbound: %v, want the KMS's refusal", err)
	}
	if n := f.calls.Load(); n != 3 {
		t.Errorf("%d KMS calls, want 3 (one per binding)", n)
	}
	if WithBinding(ctx, Binding{}) != ctx {
		t.Error("an empty binding made a new context")
	}
}

func TestMeteredCounts(t *testing.T) {
	errs := map[string]error{"a": nil, "b": ErrKeyNotFound, "c": fmt.Errorf("x: %w", ErrUnavailable), "d": ErrInvalid, "e": errors.New("other")}
	f := &fake{answer: func(_ context.Context, _, kek string, _ []byte, _ int) ([]byte, int, error) {
		return nil, 0, errs[kek]
	}}
	m := Metered(f, "test-metered")
	for kek := range errs {
		_, _ = m.Unwrap(ctx, kek, nil)
	}
	_, _ = m.Wrap(ctx, "a", nil)
	_, _, _ = m.DeriveKey(ctx, "b", 0, nil)
	for _, c := range []struct {
		op, outcome string
		want        float64
	}{
		{"unwrap", "ok", 1}, {"unwrap", "not_found", 1}, {"unwrap", "unavailable", 1}, {"unwrap", "invalid", 1},
		{"unwrap", "error", 1}, {"wrap", "ok", 1}, {"derive_key", "not_found", 1}, {"wrap", "unavailable", 0},
	} {
		if got := testutil.ToFloat64(Calls.WithLabelValues("test-metered", c.op, c.outcome)); got != c.want {
			t.Errorf("strait_kms_calls_total{kms=test-metered,op=%s,outcome=%s} = %v, want %v", c.op, c.outcome, got, c.want)
		}
	}
}

// The previous KMS is asked only when the current one says the key is not
// its own; an unavailable current KMS is not asked around, and an
// unavailable previous one makes the answer retriable (and uncached).
func TestWithPrevious(t *testing.T) {
	cur := &fake{answer: func(_ context.Context, op, kek string, _ []byte, _ int) ([]byte, int, error) {
		switch kek {
		case "new":
			return []byte("new-dek"), 1, nil
		case "down":
			return nil, 0, ErrUnavailable
		}
		return nil, 0, fmt.Errorf("%w: %s", ErrKeyNotFound, kek)
	}}
	prevDown := false
	prev := &fake{answer: func(_ context.Context, op, kek string, _ []byte, _ int) ([]byte, int, error) {
		if prevDown {
			return nil, 0, ErrUnavailable
		}
		if kek == "old" {
			return []byte("old-dek"), 3, nil
		}
		return nil, 0, ErrInvalid
	}}
	k := WithPrevious(cur, prev)
	if dek, err := k.Unwrap(ctx, "old", nil); err != nil || string(dek) != "old-dek" {
		t.Errorf("old: %q %v", dek, err)
	}
	if dek, err := k.Unwrap(ctx, "new", nil); err != nil || string(dek) != "new-dek" || prev.calls.Load() != 1 {
		t.Errorf("new: %q %v, previous asked %d times", dek, err, prev.calls.Load())
	}
	if _, err := k.Unwrap(ctx, "down", nil); !errors.Is(err, ErrUnavailable) || prev.calls.Load() != 1 {
		t.Errorf("current down: %v, previous asked %d times", err, prev.calls.Load())
	}
	if _, err := k.Unwrap(ctx, "gone", nil); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("neither has it: %v, want the current KMS's ErrKeyNotFound", err)
	}
	if _, v, err := k.DeriveKey(ctx, "old", 3, nil); err != nil || v != 3 {
		t.Errorf("DeriveKey of an old version: %d %v", v, err)
	}
	if _, _, err := k.DeriveKey(ctx, "old", 0, nil); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("DeriveKey newest: %v, want the current KMS's answer alone", err)
	}
	if _, err := k.Wrap(ctx, "old", nil); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("Wrap: %v, want the current KMS's answer alone", err)
	}
	prevDown = true
	_, err := k.Unwrap(ctx, "old", nil)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrKeyNotFound) {
		t.Errorf("previous down: %v, want ErrUnavailable alone (a cache must not keep it)", err)
	}
}
