package oauth

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestJWKSFile(t *testing.T) {
	path := tempPath(t, "jwks.json")
	writeFile(t, path, jwksOf(t, rsaKey(), ecKey()))
	clk := newClock()
	v := newValidator(t, fileConfig(path), clk)
	for _, k := range []testKey{rsaKey(), ecKey()} {
		if p, _, err := v.Validate(ctx, sign(t, k, goodClaims())); err != nil || p != "alice" {
			t.Fatalf("%s: %q, %v; want alice, nil", k.kid, p, err)
		}
	}
	token := sign(t, rsaKey2(), goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
}

// A changed file is read again: within a second by itself, at once for a
// token whose kid is unknown.
func TestJWKSFileReloads(t *testing.T) {
	path := tempPath(t, "jwks.json")
	writeFile(t, path, jwksOf(t, rsaKey()))
	clk := newClock()
	v := newValidator(t, fileConfig(path), clk)
	old := sign(t, rsaKey(), goodClaims())
	if _, _, err := v.Validate(ctx, old); err != nil {
		t.Fatal(err)
	}

	// Rotation: rsa-2 added. Its first token makes the file be looked at.
	replaceFile(t, path, jwksOf(t, rsaKey(), rsaKey2()))
	if _, _, err := v.Validate(ctx, sign(t, rsaKey2(), goodClaims())); err != nil {
		t.Fatalf("a token of the key just added: %v", err)
	}

	// rsa-1 retired: refused once the file has been looked at again.
	replaceFile(t, path, jwksOf(t, rsaKey2()))
	if _, _, err := v.Validate(ctx, old); err != nil {
		t.Fatalf("within a second of the last look, the keys read before are used: %v", err)
	}
	clk.advance(fileCheckInterval)
	_, _, err := v.Validate(ctx, old)
	checkErr(t, err, ErrUnknownKey, old)
}

// replaceFile writes b to path with a modification time of its own, so
// that the change shows even on a filesystem with coarse timestamps.
func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	info, err := os.Stat(path)
	must(t, err)
	writeFile(t, path, b)
	mtime := info.ModTime().Add(time.Second)
	must(t, os.Chtimes(path, mtime, mtime))
}

func TestJWKSFileBroken(t *testing.T) {
	path := tempPath(t, "jwks.json")
	clk := newClock()
	v := newValidator(t, fileConfig(path), clk)
	token := sign(t, rsaKey(), goodClaims())

	_, _, err := v.Validate(ctx, token)
	checkUnavailable(t, err, token, "jwks_file")

	writeFile(t, path, jwksOf(t, rsaKey()))
	clk.advance(fileCheckInterval)
	if _, _, err := v.Validate(ctx, token); err != nil {
		t.Fatalf("once the file is there: %v", err)
	}

	// A file half written, or replaced by one that is not a key set:
	// the keys read before stay.
	replaceFile(t, path, []byte(`{"keys":[{"kty":"RSA"`))
	clk.advance(fileCheckInterval)
	if _, _, err := v.Validate(ctx, token); err != nil {
		t.Fatalf("with a broken file after a good one: %v", err)
	}
	must(t, os.Remove(path))
	clk.advance(fileCheckInterval)
	if _, _, err := v.Validate(ctx, token); err != nil {
		t.Fatalf("with the file removed after a good one: %v", err)
	}
}

func TestJWKSFileTooLarge(t *testing.T) {
	path := tempPath(t, "jwks.json")
	writeFile(t, path, []byte(`{"keys":[`+strings.Repeat(" ", 100)+`]}`))
	cfg := fileConfig(path)
	cfg.MaxJWKSBytes = 64
	v := newValidator(t, cfg, newClock())
	token := sign(t, rsaKey(), goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkUnavailable(t, err, token, "max_jwks_bytes")
}
