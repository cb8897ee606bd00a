package datakey

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// testKMS is a KMS in memory that counts its calls and can be made to
// misbehave. Its KEKs are names with a newest version; a wrapped DEK is the
// KEK version, then the DEK XORed with a pad made from the KEK.
type testKMS struct {
	mu     sync.Mutex
	newest map[string]int // absent: the KEK does not exist

	wrapLen     int           // when not 0, Wrap returns this many zero bytes (-1: none)
	unwrapLen   int           // when set, Unwrap returns this many bytes
	usedVersion int           // when set, DeriveKey says it used this version
	hang        bool          // calls wait for their context to end
	gate        chan struct{} // when set, Wrap waits for it to close
	entered     chan struct{} // when set, Wrap sends on it as it starts

	wraps, unwraps, derives atomic.Int64
}

func newTestKMS(keks ...string) *testKMS {
	k := &testKMS{newest: map[string]int{}}
	for _, name := range keks {
		k.newest[name] = 1
	}
	return k
}

// create makes kek, at version 1.
func (k *testKMS) create(kek string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.newest[kek] = 1
}

// rotate makes a new version of kek the newest.
func (k *testKMS) rotate(kek string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.newest[kek]++
}

func (k *testKMS) version(kek string, v int) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, ok := k.newest[kek]
	if v == 0 {
		v = n
	}
	if !ok || v > n {
		return 0, fmt.Errorf("%w: KEK %q version %d", kms.ErrKeyNotFound, kek, v)
	}
	return v, nil
}

func pad(kek string, v int, n int) []byte {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", kek, v))
	return sum[:n]
}

func (k *testKMS) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	k.wraps.Add(1)
	if k.entered != nil {
		k.entered <- struct{}{}
	}
	if k.gate != nil {
		<-k.gate
	}
	if k.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	v, err := k.version(kek, 0)
	if err != nil {
		return nil, err
	}
	if k.wrapLen != 0 {
		return make([]byte, max(k.wrapLen, 0)), nil
	}
	w := []byte{byte(v)}
	for i, b := range pad(kek, v, len(dek)) {
		w = append(w, dek[i]^b)
	}
	return w, nil
}

func (k *testKMS) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	k.unwraps.Add(1)
	if k.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(wrapped) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", kms.ErrInvalid, len(wrapped))
	}
	v, err := k.version(kek, int(wrapped[0]))
	if err != nil {
		return nil, err
	}
	dek := make([]byte, len(wrapped)-1)
	for i, b := range pad(kek, v, len(dek)) {
		dek[i] = wrapped[1+i] ^ b
	}
	if k.unwrapLen > 0 {
		dek = dek[:k.unwrapLen]
	}
	return dek, nil
}

func (k *testKMS) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	k.derives.Add(1)
	if k.hang {
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	v, err := k.version(kek, version)
	if err != nil {
		return nil, 0, err
	}
	h := sha256.New()
	h.Write([]byte(kek))
	h.Write(binary.AppendUvarint(nil, uint64(v)))
	h.Write(label)
	if k.usedVersion != 0 {
		v = k.usedVersion
	}
	return h.Sum(nil), v, nil
}

func (*testKMS) Name() string { return "test" }

// clock is a time the test moves, while nothing else reads it.
type clock struct{ t time.Time }

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { return c.t }

func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

// wantErr fails the test unless err is (errors.Is) is and says says.
func wantErr(t *testing.T, err, is error, says string) {
	t.Helper()
	if !errors.Is(err, is) || !strings.Contains(err.Error(), says) {
		t.Errorf("err %v, want %v saying %q", err, is, says)
	}
}

// TestKMSErrors: what each part returns when the KMS fails or
// misbehaves. The errors wrap the kms errors a filter maps to error codes,
// and name what went wrong.
func TestKMSErrors(t *testing.T) {
	ring := func(maxRecords uint64) func(*testKMS) error {
		return func(k *testKMS) error {
			r := NewRing(RingOptions{KMS: k, MaxRecords: maxRecords, MaxAge: time.Hour, Timeout: 20 * time.Millisecond})
			_, _, _, err := r.Reserve(context.Background(), "orders", 1)
			return err
		}
	}
	unwrap := func(kek string) func(*testKMS) error {
		return func(k *testKMS) error {
			// Made by another instance: the KEK's pad is the same.
			d, _ := sealed(t, newTestKMS("orders"), "orders")
			_, err := NewOpeners(k, 20*time.Millisecond).Get(context.Background(),
				AppendOpenerKey(nil, []byte(kek), d.Wrapped()), []byte(kek), d.Wrapped())
			return err
		}
	}
	derive := func(k *testKMS) error {
		_, err := NewDeterministic(DeterministicOptions{KMS: k, Timeout: 20 * time.Millisecond, Label: "test/v1"}).Newest(context.Background(), "orders")
		return err
	}
	for _, c := range []struct {
		name string
		set  func(*testKMS)
		call func(*testKMS) error
		is   error
		says string
	}{
		{"ring/nothing wrapped", func(k *testKMS) { k.wrapLen = -1 }, ring(10), kms.ErrInvalid, "the KMS wrapped a data key into 0 bytes; the envelope holds 1 to 255"},
		{"ring/wrapped too long", func(k *testKMS) { k.wrapLen = 256 }, ring(10), kms.ErrInvalid, "the KMS wrapped a data key into 256 bytes; the envelope holds 1 to 255"},
		{"ring/timed out", func(k *testKMS) { k.hang = true }, ring(10), kms.ErrUnavailable, "context deadline exceeded"},
		{"ring/no counters", func(*testKMS) {}, ring(0), kms.ErrUnavailable, `could not reserve IVs for KEK "orders"`},
		{"openers/missing KEK", func(*testKMS) {}, unwrap("gone"), kms.ErrKeyNotFound, `KEK "gone"`},
		{"openers/short DEK", func(k *testKMS) { k.unwrapLen = 16 }, unwrap("orders"), kms.ErrInvalid, "the KMS unwrapped a 16-byte data key, want 32"},
		{"openers/timed out", func(k *testKMS) { k.hang = true }, unwrap("orders"), kms.ErrUnavailable, "context deadline exceeded"},
		{"deterministic/no version", func(k *testKMS) { k.usedVersion = -1 }, derive, kms.ErrInvalid, `the KMS derived a key from KEK "orders" version -1`},
		{"deterministic/timed out", func(k *testKMS) { k.hang = true }, derive, kms.ErrUnavailable, "context deadline exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newTestKMS("orders")
			c.set(k)
			wantErr(t, c.call(k), c.is, c.says)
		})
	}
}
