package awskms_test

import (
	"context"
	"testing"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/awskms"
	"github.com/straitgw/strait/internal/kms/awskms/localkms"
)

// What one uncached call costs against local-kms on the same host, and
// through kms.NewCache once it is cached.
func BenchmarkCalls(b *testing.B) {
	s := localkms.Start(b)
	s.CreateKEK("alias/bench-kek")
	s.CreateHMACKey("alias/bench-kek-hmac")
	k, err := awskms.New(context.Background(), awskms.Options{Region: localkms.Region, Endpoint: s.Endpoint, Credentials: localkms.Credentials})
	if err != nil {
		b.Fatal(err)
	}
	ctx := kms.WithBinding(context.Background(), kms.Binding{Topic: "orders"})
	dek := make([]byte, 32)
	w, err := k.Wrap(ctx, "alias/bench-kek", dek)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Wrap", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Wrap(ctx, "alias/bench-kek", dek); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unwrap", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Unwrap(ctx, "alias/bench-kek", w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeriveKey", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := k.DeriveKey(ctx, "alias/bench-kek", 0, []byte("label")); err != nil {
				b.Fatal(err)
			}
		}
	})
	c := kms.NewCache(k, kms.CacheOptions{})
	b.Run("Unwrap/cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Unwrap(ctx, "alias/bench-kek", w); err != nil {
				b.Fatal(err)
			}
		}
	})
}
