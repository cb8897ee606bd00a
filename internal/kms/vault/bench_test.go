package vault

import (
	"testing"

	"github.com/straitgw/strait/internal/kms"
)

// go test ./internal/kms/vault -run '^$' -bench . -benchmem

func benchVault(b *testing.B) *Vault {
	dir := vaultDir(b)
	mustCreate(b, dir, "orders")
	v, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func BenchmarkWrap(b *testing.B) {
	v := benchVault(b)
	d := dek(32, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Wrap(ctx, "orders", d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnwrap is the vault itself: every call unwraps.
func BenchmarkUnwrap(b *testing.B) {
	v := benchVault(b)
	w, err := v.Wrap(ctx, "orders", dek(32, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Unwrap(ctx, "orders", w); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnwrapCached is the vault behind kms.NewCache, as a filter uses it: the same wrapped key each time.
func BenchmarkUnwrapCached(b *testing.B) {
	v := benchVault(b)
	c := kms.NewCache(v, kms.CacheOptions{})
	w, err := v.Wrap(ctx, "orders", dek(32, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Unwrap(ctx, "orders", w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeriveKey(b *testing.B) {
	v := benchVault(b)
	label := []byte("topic:orders")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := v.DeriveKey(ctx, "orders", 0, label); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeriveKeyCached(b *testing.B) {
	c := kms.NewCache(benchVault(b), kms.CacheOptions{})
	label := []byte("topic:orders")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.DeriveKey(ctx, "orders", 0, label); err != nil {
			b.Fatal(err)
		}
	}
}
