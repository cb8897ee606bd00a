package datakey

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// sealed returns a DEK made by a ring on k and a value sealed under it at
// counter 0.
func sealed(t *testing.T, k kms.KMS, kek string) (*DEK, []byte) {
	t.Helper()
	d, first, _ := reserve(t, testRing(k, 1000, newClock()), kek, 1)
	nonce := Nonce(first)
	return d, d.AEAD().Seal(nil, nonce[:], []byte("secret"), []byte("ad"))
}

func openWith(t *testing.T, o *Openers, d *DEK, ct []byte) {
	t.Helper()
	kek := []byte(d.KEK())
	a, err := o.Get(context.Background(), AppendOpenerKey(nil, kek, d.Wrapped()), kek, d.Wrapped())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	nonce := Nonce(0)
	if pt, err := a.Open(nil, nonce[:], ct, []byte("ad")); err != nil || string(pt) != "secret" {
		t.Fatalf("the AEAD opened %q (%v), want secret", pt, err)
	}
}

func TestOpenersUnwrapOnce(t *testing.T) {
	k := newTestKMS("orders")
	d, ct := sealed(t, k, "orders")
	// The instance that made d knows it.
	made := NewOpeners(k, time.Second)
	made.Add(d)
	openWith(t, made, d, ct)
	if n := k.unwraps.Load(); n != 0 {
		t.Errorf("%d unwraps of a DEK this instance made, want 0", n)
	}
	// Another instance asks the KMS once.
	other := NewOpeners(k, time.Second)
	openWith(t, other, d, ct)
	openWith(t, other, d, ct)
	if n := k.unwraps.Load(); n != 1 {
		t.Errorf("%d unwraps of one DEK, want 1", n)
	}
}

func TestOpenersBounded(t *testing.T) {
	k := newTestKMS("orders")
	o := NewOpeners(k, time.Second)
	d, _ := sealed(t, k, "orders")
	for i := range maxOpeners + 10 {
		o.put(fmt.Append(nil, i), d.AEAD())
	}
	if n := len(o.m); n != maxOpeners {
		t.Errorf("%d AEADs cached, want at most %d", n, maxOpeners)
	}
}

func TestOpenerKeysAreUnambiguous(t *testing.T) {
	a := AppendOpenerKey(nil, []byte("ab"), []byte("c"))
	b := AppendOpenerKey(nil, []byte("a"), []byte("bc"))
	if bytes.Equal(a, b) {
		t.Errorf("KEK ab with DEK c and KEK a with DEK bc share the key %x", a)
	}
	if got := AppendOpenerKey([]byte("x"), []byte("k"), []byte("w")); string(got) != "x\x01kw" {
		t.Errorf("AppendOpenerKey: %q", got)
	}
}

func TestOpenersGetCachedDoesNotAllocate(t *testing.T) {
	k := newTestKMS("orders")
	d, _ := sealed(t, k, "orders")
	o := NewOpeners(k, time.Second)
	o.Add(d)
	kek := []byte(d.KEK())
	key := AppendOpenerKey(nil, kek, d.Wrapped())
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { o.Get(ctx, key, kek, d.Wrapped()) }); n != 0 {
		t.Errorf("Get of a cached DEK: %v allocations, want 0", n)
	}
}
