package vault

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/secretfile"
)

// The seed corpora are in testdata/fuzz/<FuzzName>; `go test` runs them as regression cases. To fuzz:
//
//	go test ./internal/kms/vault -run '^$' -fuzz FuzzParseKEKFile -fuzztime 60s

// FuzzParseKEKFile: the parser of a directory vault's files never panics, and whatever it accepts is written
// back (encodeKEKFile) to something it reads as the same KEK.
func FuzzParseKEKFile(f *testing.F) {
	f.Add([]byte(`{"format":"strait-kek/1","name":"orders","versions":[{"version":1,"created":"2026-11-30T12:00:00Z","key":"` +
		base64.StdEncoding.EncodeToString(dek(32, 0)) + `"}]}`))
	f.Add([]byte(`{"format":"strait-kek/1","name":"a","versions":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := parseKEKFile(data)
		if err != nil {
			return
		}
		again, err := parseKEKFile(encodeKEKFile(k))
		if err != nil {
			t.Fatalf("a KEK the parser accepted does not parse once written back: %v", err)
		}
		assertSameKEK(t, again, k)
	})
}

// FuzzParseVaultFile is FuzzParseKEKFile for single-file vaults.
func FuzzParseVaultFile(f *testing.F) {
	f.Add([]byte(`{"format":"strait-vault/1","keys":[{"name":"orders","versions":[{"version":2,"created":"2026-11-30T12:00:00+01:00","key":"` +
		base64.StdEncoding.EncodeToString(dek(32, 7)) + `"}]}]}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		keks, err := parseVaultFile(data)
		if err != nil {
			return
		}
		again, err := parseVaultFile(encodeVaultFile(keks))
		if err != nil {
			t.Fatalf("a vault the parser accepted does not parse once written back: %v", err)
		}
		if len(again) != len(keks) {
			t.Fatalf("%d keys written back as %d", len(keks), len(again))
		}
		for i := range keks {
			assertSameKEK(t, again[i], keks[i])
		}
	})
}

func assertSameKEK(t *testing.T, got, want storedKEK) {
	t.Helper()
	if got.name != want.name || len(got.versions) != len(want.versions) {
		t.Fatalf("written back as %q with %d versions, want %q with %d", got.name, len(got.versions), want.name, len(want.versions))
	}
	for i, v := range want.versions {
		g := got.versions[i]
		if g.version != v.version || !g.created.Equal(v.created) || !reflect.DeepEqual(g.material, v.material) {
			t.Fatalf("version %d written back differently", v.version)
		}
	}
}

// FuzzUnwrap: whatever bytes arrive as a wrapped key, Unwrap answers ErrInvalid or ErrKeyNotFound, or a DEK
// that wraps back to exactly those bytes (AES key wrap is deterministic, and the version prefix has one form).
func FuzzUnwrap(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "vault")
	if err := os.Mkdir(dir, 0o700); err != nil {
		f.Fatal(err)
	}
	// Fixed material, so that the seed corpus holds keys that really unwrap.
	kf := storedKEK{name: "orders", versions: []storedVersion{
		{version: 1, created: testTime, material: dek(32, 0x10)},
		{version: 200, created: testTime, material: dek(32, 0x20)},
	}}
	if err := secretfile.WriteAtomic(filepath.Join(dir, "orders.json"), encodeKEKFile(kf)); err != nil {
		f.Fatal(err)
	}
	v, err := Open(dir, Options{})
	if err != nil {
		f.Fatal(err)
	}
	w, err := v.Wrap(ctx, "orders", dek(32, 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(w)
	f.Add(w[:25])
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := v.Unwrap(ctx, "orders", data)
		if err != nil {
			if !errors.Is(err, kms.ErrInvalid) && !errors.Is(err, kms.ErrKeyNotFound) {
				t.Fatalf("unwrap error %v is neither ErrInvalid nor ErrKeyNotFound", err)
			}
			return
		}
		version, body, err := parseWrapped(data)
		if err != nil {
			t.Fatalf("Unwrap accepted what parseWrapped refuses: %v", err)
		}
		if !bytes.Equal(append(binary.AppendUvarint(nil, uint64(version)), body...), data) {
			t.Fatalf("wrapped key %X is not in its one canonical form", data)
		}
		kv, err := v.version("orders", version)
		if err != nil {
			t.Fatal(err)
		}
		if again := kwWrap(binary.AppendUvarint(nil, uint64(version)), kv.block, got); !bytes.Equal(again, data) {
			t.Fatalf("unwrapped %X from %X, which wraps back to %X", got, data, again)
		}
	})
}
