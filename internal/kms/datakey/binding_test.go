package datakey

import (
	"context"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// bindingKMS records the binding each call was made under.
type bindingKMS struct {
	*testKMS
	wrapped, unwrapped []string
}

func (b *bindingKMS) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	b.wrapped = append(b.wrapped, kms.BindingFrom(ctx).Topic)
	return b.testKMS.Wrap(ctx, kek, dek)
}

func (b *bindingKMS) Unwrap(ctx context.Context, kek string, w []byte) ([]byte, error) {
	b.unwrapped = append(b.unwrapped, kms.BindingFrom(ctx).Topic)
	return b.testKMS.Unwrap(ctx, kek, w)
}

// A KEK shared by two topics has a DEK per topic when bound, each wrapped
// under its topic's binding; unbound callers share one DEK as before. The
// opening side unwraps under the binding it is given.
func TestRingBindings(t *testing.T) {
	k := &bindingKMS{testKMS: newTestKMS("shared")}
	r := NewRing(RingOptions{KMS: k, MaxRecords: 100, MaxAge: time.Hour, Timeout: time.Second})
	ctx := context.Background()
	a, _, _, err := r.ReserveBound(ctx, "shared", kms.Binding{Topic: "a"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	a2, _, _, _ := r.ReserveBound(ctx, "shared", kms.Binding{Topic: "a"}, 1)
	b, _, _, _ := r.ReserveBound(ctx, "shared", kms.Binding{Topic: "b"}, 1)
	u, _, _, _ := r.Reserve(ctx, "shared", 1)
	u2, _, _, _ := r.Reserve(ctx, "shared", 1)
	if a != a2 || u != u2 {
		t.Error("one binding got two DEKs")
	}
	if a == b || a == u || b == u {
		t.Error("two bindings share a DEK")
	}
	if got := k.wrapped; len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "" {
		t.Errorf("Wrap bindings %q, want [a b \"\"]", got)
	}
	o := NewOpeners(k, time.Second)
	if _, err := o.GetBound(ctx, AppendOpenerKey(nil, []byte("shared"), b.Wrapped()), []byte("shared"), b.Wrapped(), kms.Binding{Topic: "b"}); err != nil {
		t.Fatal(err)
	}
	if got := k.unwrapped; len(got) != 1 || got[0] != "b" {
		t.Errorf("Unwrap bindings %q, want [b]", got)
	}
}
