package kmsconfig

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
)

func TestValidate(t *testing.T) {
	vaultAt := func(p string) Backend { return Backend{Type: "vault", Path: p} }
	for _, tc := range []struct {
		c    Config
		want []string
	}{
		{Config{}, []string{"kms.type: is empty"}},
		{Config{Backend: Backend{Type: "hsm"}}, []string{`kms.type: unknown KMS "hsm"`, "aws"}},
		{Config{Backend: Backend{Type: "vault"}}, []string{"kms.path: is empty"}},
		{Config{Backend: vaultAt("/x"), Timeout: -1, Cache: Cache{TTL: -1}}, []string{"kms.timeout", "kms.cache"}},
		{Config{Backend: Backend{Type: "vault", Path: "/x", Region: "eu-west-1"}}, []string{"kms.region: is not a setting of type vault"}},
		{Config{Backend: Backend{Type: "aws", Path: "/x"}}, []string{"kms.path: is not a setting of type aws"}},
		{Config{Backend: Backend{Type: "aws", Endpoint: "127.0.0.1:4566"}}, []string{"kms.endpoint: \"127.0.0.1:4566\" is not a URL"}},
		{Config{Backend: Backend{Type: "aws", HMACKey: "alias/one"}}, []string{"kms.hmac_key: \"alias/one\" has no {kek}"}},
		{Config{Backend: Backend{Type: "aws"}, Previous: Backend{Path: "/x"}}, []string{"kms.previous.type: is empty"}},
		{Config{Backend: Backend{Type: "aws"}, Previous: Backend{Type: "vault"}}, []string{"kms.previous.path: is empty"}},
	} {
		err := tc.c.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %v, want %q", tc.c, err, w)
			}
		}
	}
	for _, ok := range []Config{
		{Backend: Backend{Type: "aws"}},
		{Backend: Backend{Type: "aws", Region: "eu-west-1", Endpoint: "https://kms.eu-west-1.amazonaws.com", HMACKey: "{kek}-mac"}, Previous: vaultAt("/x")},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", ok, err)
		}
	}
}

// Equal blocks share one KMS (and its cache); different ones do not.
func TestOpenerSharesEqualBlocks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	if _, err := vault.CreateKey(dir, "k"); err != nil {
		t.Fatal(err)
	}
	var o Opener
	a, err := o.Open(Config{Backend: Backend{Type: "vault", Path: dir}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := o.Open(Config{Backend: Backend{Type: "vault", Path: dir}})
	c, _ := o.Open(Config{Backend: Backend{Type: "vault", Path: dir}, Cache: Cache{Disabled: true}})
	if a != b {
		t.Error("two equal kms blocks opened two KMSs")
	}
	if a == c {
		t.Error("a block without a cache got the cached KMS")
	}
	if _, err := o.Open(Config{Backend: Backend{Type: "vault", Path: filepath.Join(dir, "missing")}}); err == nil || !strings.Contains(err.Error(), "kms.path") {
		t.Errorf("missing vault: %v", err)
	}
}

// A block with a previous KMS reads DEKs wrapped by either, and wraps with
// the current one only.
func TestPrevious(t *testing.T) {
	root := t.TempDir()
	oldDir, newDir := filepath.Join(root, "old"), filepath.Join(root, "new")
	if _, err := vault.CreateKey(oldDir, "old-kek"); err != nil {
		t.Fatal(err)
	}
	if _, err := vault.CreateKey(newDir, "new-kek"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old, err := Open(Config{Backend: Backend{Type: "vault", Path: oldDir}})
	if err != nil {
		t.Fatal(err)
	}
	dek := make([]byte, 32)
	w, err := old.Wrap(ctx, "old-kek", dek)
	if err != nil {
		t.Fatal(err)
	}
	k, err := Open(Config{Backend: Backend{Type: "vault", Path: newDir}, Previous: Backend{Type: "vault", Path: oldDir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Unwrap(ctx, "old-kek", w); err != nil {
		t.Errorf("a DEK of the previous KMS: %v", err)
	}
	if _, err := k.Wrap(ctx, "old-kek", dek); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("Wrap under the previous KMS's KEK: %v, want ErrKeyNotFound (new DEKs go to the current KMS only)", err)
	}
	w2, err := k.Wrap(ctx, "new-kek", dek)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Unwrap(ctx, "new-kek", w2); err != nil {
		t.Errorf("a DEK of the current KMS: %v", err)
	}
	if _, err := k.Unwrap(ctx, "gone-kek", w2); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("a KEK neither has: %v, want ErrKeyNotFound", err)
	}
}
