package kmsconfig

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/kms/vault"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want []string
	}{
		{Config{}, []string{"kms.type: is empty"}},
		{Config{Type: "hsm"}, []string{`kms.type: unknown KMS "hsm"`}},
		{Config{Type: "vault"}, []string{"kms.path: is empty"}},
		{Config{Type: "vault", Path: "/x", Timeout: -1, Cache: Cache{TTL: -1}}, []string{"kms.timeout", "kms.cache"}},
	} {
		err := tc.c.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %v, want %q", tc.c, err, w)
			}
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
	a, err := o.Open(Config{Type: "vault", Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := o.Open(Config{Type: "vault", Path: dir})
	c, _ := o.Open(Config{Type: "vault", Path: dir, Cache: Cache{Disabled: true}})
	if a != b {
		t.Error("two equal kms blocks opened two KMSs")
	}
	if a == c {
		t.Error("a block without a cache got the cached KMS")
	}
	if _, err := o.Open(Config{Type: "vault", Path: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "kms.path") {
		t.Errorf("missing vault: %v", err)
	}
}
