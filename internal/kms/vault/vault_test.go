package vault

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

var ctx = context.Background()

var testTime = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// clock is a settable clock for a Vault's reload checks.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// openAt opens the vault at path on a clock the test moves.
func openAt(t testing.TB, path string) (*Vault, *clock) {
	t.Helper()
	v, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	v.now = c.now
	v.checked.Store(c.ns.Load())
	return v, c
}

func mustCreate(t testing.TB, path, name string) KeyInfo {
	t.Helper()
	ki, err := CreateKey(path, name)
	if err != nil {
		t.Fatal(err)
	}
	return ki
}

func mustRotate(t testing.TB, path, name string) KeyInfo {
	t.Helper()
	ki, err := RotateKey(path, name)
	if err != nil {
		t.Fatal(err)
	}
	return ki
}

func vaultDir(t testing.TB) string { return filepath.Join(t.TempDir(), "vault") }

func dek(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

func wrappedVersion(t *testing.T, wrapped []byte) int {
	t.Helper()
	v, _, err := parseWrapped(wrapped)
	if err != nil {
		t.Fatalf("parsing a wrapped key the vault made: %v", err)
	}
	return v
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeyWrapRFC3394 checks the key wrap against the test vectors of RFC 3394 section 4.
func TestKeyWrapRFC3394(t *testing.T) {
	const kek = "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"
	const data = "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F"
	tests := []struct {
		section           string
		kekBytes, dataLen int
		want              string
	}{
		{"4.1", 16, 16, "1FA68B0A8112B447 AEF34BD8FB5A7B82 9D3E862371D2CFE5"},
		{"4.2", 24, 16, "96778B25AE6CA435 F92B5B97C050AED2 468AB8A17AD84E5D"},
		{"4.3", 32, 16, "64E8C3F9CE0F5BA2 63E9777905818A2A 93C8191E7D6E8AE7"},
		{"4.4", 24, 24, "031D33264E15D332 68F24EC260743EDC E1C6C7DDEE725A93 6BA814915C6762D2"},
		{"4.5", 32, 24, "A8F9BC1612C68B3F F6E6F4FBE30E71E4 769C8B80A32CB895 8CD5D17D6B254DA1"},
		{"4.6", 32, 32, "28C9F404C4B810F4 CBCCB35CFB87F826 3F5786E2D80ED326 CBC7F0E71A99F43B FB988B9B7A02DD21"},
	}
	for _, tt := range tests {
		t.Run(tt.section, func(t *testing.T) {
			block, err := aes.NewCipher(unhex(t, kek)[:tt.kekBytes])
			if err != nil {
				t.Fatal(err)
			}
			plain, want := unhex(t, data)[:tt.dataLen], unhex(t, tt.want)
			prefix := []byte{0xEE}
			if got := kwWrap(bytes.Clone(prefix), block, plain); !bytes.Equal(got, append(prefix, want...)) {
				t.Errorf("wrap = %X, want %X", got[1:], want)
			}
			got, ok := kwUnwrap(bytes.Clone(prefix), block, want)
			if !ok || !bytes.Equal(got, append(prefix, plain...)) {
				t.Errorf("unwrap = %X, %v, want %X, true", got[1:], ok, plain)
			}
			for i := range want {
				bad := bytes.Clone(want)
				bad[i] ^= 0x01
				if got, ok := kwUnwrap(nil, block, bad); ok || len(got) != 0 {
					t.Errorf("unwrap with byte %d flipped = %X, %v: want the integrity check to fail", i, got, ok)
				}
			}
		})
	}
}

func TestWrapUnwrapRoundTrip(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	v, _ := openAt(t, dir)
	for _, n := range []int{16, 24, 32} {
		d := dek(n, byte(n))
		w, err := v.Wrap(ctx, "orders", d)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) != 1+n+8 {
			t.Errorf("a %d-byte DEK wrapped to %d bytes, want %d (1 version byte + %d + 8)", n, len(w), 1+n+8, n)
		}
		if bytes.Contains(w, d) {
			t.Errorf("the wrapped key contains the DEK in clear")
		}
		got, err := v.Unwrap(ctx, "orders", w)
		if err != nil {
			t.Fatalf("unwrapping a %d-byte DEK: %v", n, err)
		}
		if !bytes.Equal(got, d) {
			t.Errorf("unwrap = %X, want %X", got, d)
		}
	}
	for _, n := range []int{0, 8, 15, 33, 64} {
		if _, err := v.Wrap(ctx, "orders", make([]byte, n)); err == nil || !strings.Contains(err.Error(), "16, 24 or 32") {
			t.Errorf("wrapping a %d-byte DEK: err = %v, want one naming the sizes allowed", n, err)
		}
	}
	if got := v.Name(); got != "vault "+dir {
		t.Errorf("Name() = %q, want %q", got, "vault "+dir)
	}
}

func TestRotation(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	v, clk := openAt(t, dir)
	d1 := dek(32, 1)
	w1, err := v.Wrap(ctx, "orders", d1)
	if err != nil {
		t.Fatal(err)
	}
	if got := wrappedVersion(t, w1); got != 1 {
		t.Fatalf("first wrap used version %d, want 1", got)
	}
	ki := mustRotate(t, dir, "orders")
	if len(ki.Versions) != 2 || ki.Versions[1].Version != 2 {
		t.Fatalf("RotateKey returned %+v, want versions 1 and 2", ki)
	}
	clk.advance(DefaultReloadInterval)
	d2 := dek(32, 2)
	w2, err := v.Wrap(ctx, "orders", d2)
	if err != nil {
		t.Fatal(err)
	}
	if got := wrappedVersion(t, w2); got != 2 {
		t.Fatalf("a wrap a reload interval after the rotation used version %d, want 2", got)
	}
	for _, c := range []struct {
		w, want []byte
	}{{w1, d1}, {w2, d2}} {
		got, err := v.Unwrap(ctx, "orders", c.w)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("unwrap version %d = %X, %v; want %X", c.w[0], got, err, c.want)
		}
	}
}

// TestReloadAfterRotateElsewhere: a vault in use sees a rotation made by another process (here: another Vault
// and the functions `strait keys` uses) at its next periodic look, and at once when asked for a version it
// does not have yet.
func TestReloadAfterRotateElsewhere(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	a, clk := openAt(t, dir)
	mustRotate(t, dir, "orders")

	// Within the reload interval, a keeps using what it read.
	clk.advance(DefaultReloadInterval / 2)
	w, err := a.Wrap(ctx, "orders", dek(32, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := wrappedVersion(t, w); got != 1 {
		t.Fatalf("wrap before the next look used version %d, want 1", got)
	}

	// A key wrapped elsewhere under version 2 makes a look at once.
	b, _ := openAt(t, dir)
	wb, err := b.Wrap(ctx, "orders", dek(32, 9))
	if err != nil {
		t.Fatal(err)
	}
	if got := wrappedVersion(t, wb); got != 2 {
		t.Fatalf("a vault opened after the rotation wrapped with version %d, want 2", got)
	}
	got, err := a.Unwrap(ctx, "orders", wb)
	if err != nil || !bytes.Equal(got, dek(32, 9)) {
		t.Fatalf("unwrapping a version-2 key in the vault opened before the rotation: %X, %v", got, err)
	}
	if w, err = a.Wrap(ctx, "orders", dek(32, 0)); err != nil {
		t.Fatal(err)
	}
	if got := wrappedVersion(t, w); got != 2 {
		t.Errorf("wrap after the reload a miss caused used version %d, want 2", got)
	}

	// A new KEK is found on a miss too.
	mustCreate(t, dir, "payments")
	clk.advance(DefaultReloadInterval / missIntervalDivisor)
	if _, err := a.Wrap(ctx, "payments", dek(32, 0)); err != nil {
		t.Errorf("wrap with a KEK created after Open: %v", err)
	}
}

// TestMissThrottled: requests for a KEK the vault does not have look at the files at most every missInterval.
func TestMissThrottled(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	v, clk := openAt(t, dir)
	clk.advance(v.missInterval)
	if _, err := v.Wrap(ctx, "later", dek(32, 0)); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Fatalf("err = %v, want ErrKeyNotFound", err)
	}
	mustCreate(t, dir, "later")
	if _, err := v.Wrap(ctx, "later", dek(32, 0)); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Fatalf("a second miss within missInterval: err = %v, want ErrKeyNotFound (no new look yet)", err)
	}
	clk.advance(v.missInterval)
	if _, err := v.Wrap(ctx, "later", dek(32, 0)); err != nil {
		t.Fatalf("a miss after missInterval: %v, want the new KEK found", err)
	}
}

func TestKeyNotFound(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	v, _ := openAt(t, dir)
	w, err := v.Wrap(ctx, "orders", dek(32, 0))
	if err != nil {
		t.Fatal(err)
	}
	v9 := append(binary.AppendUvarint(nil, 9), w[1:]...)
	checks := []struct {
		name string
		err  func() error
		want string
	}{
		{"wrap, missing KEK", func() error { _, err := v.Wrap(ctx, "nope", dek(32, 0)); return err }, `no key-encryption key "nope"`},
		{"unwrap, missing KEK", func() error { _, err := v.Unwrap(ctx, "nope", w); return err }, `no key-encryption key "nope"`},
		{"unwrap, missing version", func() error { _, err := v.Unwrap(ctx, "orders", v9); return err }, `has no version 9 (it has version 1)`},
		{"derive, missing KEK", func() error { _, _, err := v.DeriveKey(ctx, "nope", 0, nil); return err }, `no key-encryption key "nope"`},
		{"derive, missing version", func() error { _, _, err := v.DeriveKey(ctx, "orders", 2, nil); return err }, `has no version 2`},
		{"derive, negative version", func() error { _, _, err := v.DeriveKey(ctx, "orders", -1, nil); return err }, `versions start at 1`},
	}
	for _, c := range checks {
		err := c.err()
		if !errors.Is(err, kms.ErrKeyNotFound) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrKeyNotFound saying %q", c.name, err, c.want)
		}
	}
}

func TestTamperedWrappedKey(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	mustCreate(t, dir, "other")
	v, _ := openAt(t, dir)
	w, err := v.Wrap(ctx, "orders", dek(32, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(w); i++ { // byte 0 is the version: changing it names another version
		for _, bit := range []byte{0x01, 0x80} {
			bad := bytes.Clone(w)
			bad[i] ^= bit
			if got, err := v.Unwrap(ctx, "orders", bad); !errors.Is(err, kms.ErrInvalid) || got != nil {
				t.Fatalf("byte %d ^ %#x: unwrap = %X, %v; want ErrInvalid", i, bit, got, err)
			}
		}
	}
	malformed := map[string][]byte{
		"empty":               nil,
		"version only":        {1},
		"truncated":           w[:len(w)-1],
		"one byte too many":   append(bytes.Clone(w), 0),
		"version 0":           append([]byte{0}, w[1:]...),
		"overlong version":    append([]byte{0x81, 0x00}, w[1:]...),
		"unterminated varint": {0x80, 0x80, 0x80},
		"huge version":        append(binary.AppendUvarint(nil, 1<<40), w[1:]...),
	}
	for name, b := range malformed {
		if got, err := v.Unwrap(ctx, "orders", b); !errors.Is(err, kms.ErrInvalid) || got != nil {
			t.Errorf("%s: unwrap = %X, %v; want ErrInvalid", name, got, err)
		}
	}
	if _, err := v.Unwrap(ctx, "other", w); !errors.Is(err, kms.ErrInvalid) {
		t.Errorf("unwrap under another KEK: err = %v, want ErrInvalid", err)
	}
}

func TestDeriveKey(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	mustRotate(t, dir, "orders")
	a, _ := openAt(t, dir)
	b, _ := openAt(t, dir)

	ka, va, err := a.DeriveKey(ctx, "orders", 0, []byte("topic:payments"))
	if err != nil {
		t.Fatal(err)
	}
	kb, vb, err := b.DeriveKey(ctx, "orders", 0, []byte("topic:payments"))
	if err != nil {
		t.Fatal(err)
	}
	if va != 2 || vb != 2 || len(ka) != 32 || !bytes.Equal(ka, kb) {
		t.Fatalf("two vaults on one directory derived (%X, v%d) and (%X, v%d): want the same 32 bytes from version 2", ka, va, kb, vb)
	}
	k2, v2, err := a.DeriveKey(ctx, "orders", 2, []byte("topic:payments"))
	if err != nil || v2 != 2 || !bytes.Equal(k2, ka) {
		t.Errorf("version 2 asked for explicitly: %X, v%d, %v; want what version 0 gave", k2, v2, err)
	}
	k1, v1, err := a.DeriveKey(ctx, "orders", 1, []byte("topic:payments"))
	if err != nil || v1 != 1 || bytes.Equal(k1, ka) {
		t.Errorf("version 1: %X, v%d, %v; want a different key, used version 1", k1, v1, err)
	}
	other, _, err := a.DeriveKey(ctx, "orders", 2, []byte("topic:orders"))
	if err != nil || bytes.Equal(other, ka) {
		t.Errorf("another label gave %X, %v: want a different key", other, err)
	}

	// The derivation is part of the stored data's format: pin it to HKDF-SHA256 over the file's material.
	data, err := os.ReadFile(filepath.Join(dir, "orders.json"))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := parseKEKFile(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hkdf.Key(sha256.New, sk.versions[1].material, []byte("strait/kms/vault/derive-key/v1"), "topic:payments", 32)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ka, want) {
		t.Errorf("derived %X, want HKDF-SHA256(material, salt, label) = %X", ka, want)
	}
}

func TestPermissions(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		dir := vaultDir(t)
		mustCreate(t, dir, "orders")
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("CreateKey made the directory with mode %v (%v), want 0700", fi.Mode().Perm(), err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		want := []string{dir, "0750", "chmod 700 " + dir}
		_, err := Open(dir, Options{})
		assertMentions(t, "Open", err, want...)
		_, err = RotateKey(dir, "orders")
		assertMentions(t, "RotateKey", err, want...)
		_, err = ListKeys(dir)
		assertMentions(t, "ListKeys", err, want...)
	})
	t.Run("key file", func(t *testing.T) {
		dir := vaultDir(t)
		mustCreate(t, dir, "orders")
		file := filepath.Join(dir, "orders.json")
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("CreateKey made the file with mode %v (%v), want 0600", fi.Mode().Perm(), err)
		}
		if err := os.Chmod(file, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		assertMentions(t, "Open", err, file, "0644", "chmod 600 "+file)
	})
	t.Run("single file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "keys.json")
		mustCreate(t, file, "orders")
		if err := os.Chmod(file, 0o604); err != nil {
			t.Fatal(err)
		}
		_, err := Open(file, Options{})
		assertMentions(t, "Open", err, file, "0604", "chmod 600 "+file)
	})
	t.Run("changed while in use", func(t *testing.T) {
		dir := vaultDir(t)
		mustCreate(t, dir, "orders")
		v, clk := openAt(t, dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		clk.advance(DefaultReloadInterval)
		_, err := v.Wrap(ctx, "orders", dek(32, 0))
		if !errors.Is(err, kms.ErrUnavailable) {
			t.Fatalf("wrap with the directory opened to others: err = %v, want ErrUnavailable", err)
		}
		assertMentions(t, "Wrap", err, "chmod 700 "+dir)
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		clk.advance(DefaultReloadInterval)
		if _, err := v.Wrap(ctx, "orders", dek(32, 0)); err != nil {
			t.Fatalf("wrap after the mode was fixed: %v", err)
		}
	})
}

func assertMentions(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one mentioning %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

// TestUnavailable: a vault that cannot be read any more answers ErrUnavailable (retriable), and recovers.
func TestUnavailable(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	v, clk := openAt(t, dir)
	moved := dir + ".moved"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	clk.advance(DefaultReloadInterval)
	if _, err := v.Wrap(ctx, "orders", dek(32, 0)); !errors.Is(err, kms.ErrUnavailable) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("wrap with the vault gone: err = %v, want ErrUnavailable saying it does not exist", err)
	}
	if os.Geteuid() != 0 { // root reads a directory whatever its mode
		if err := os.Rename(moved, dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o300); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		clk.advance(DefaultReloadInterval)
		if _, _, err := v.DeriveKey(ctx, "orders", 0, nil); !errors.Is(err, kms.ErrUnavailable) {
			t.Errorf("derive with the directory unreadable: err = %v, want ErrUnavailable", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	clk.advance(DefaultReloadInterval)
	if _, err := v.Wrap(ctx, "orders", dek(32, 0)); err != nil {
		t.Errorf("wrap once the vault is back: %v", err)
	}
}

func TestCreateRotateErrors(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	_, err := CreateKey(dir, "orders")
	assertMentions(t, "CreateKey twice", err, `"orders" already exists`, "strait keys rotate orders")
	_, err = RotateKey(dir, "nope")
	if !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("RotateKey of a missing KEK: err = %v, want ErrKeyNotFound", err)
	}
	assertMentions(t, "RotateKey of a missing KEK", err, "strait keys create nope")
	_, err = RotateKey(filepath.Join(t.TempDir(), "none"), "orders")
	assertMentions(t, "RotateKey in a missing vault", err, "does not exist", "strait keys create")
	for _, name := range []string{"", ".hidden", "-flag", "a/b", "a b", "ü", "x\x00", strings.Repeat("a", maxNameLen+1), "..", "."} {
		if _, err := CreateKey(dir, name); err == nil || !strings.Contains(err.Error(), "invalid key name") {
			t.Errorf("CreateKey(%q): err = %v, want an invalid name error", name, err)
		}
	}
	for _, name := range []string{"a", "A.b_c-9", "_x", "0", strings.Repeat("z", maxNameLen)} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", name, err)
		}
	}
}

func TestListKeys(t *testing.T) {
	for _, path := range []string{vaultDir(t), filepath.Join(t.TempDir(), "keys.json")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			before := time.Now().Add(-time.Second)
			mustCreate(t, path, "payments")
			mustCreate(t, path, "orders")
			mustRotate(t, path, "payments")
			mustRotate(t, path, "payments")
			keys, err := ListKeys(path)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(keys)
			if len(keys) != 2 || keys[0].Name != "orders" || len(keys[0].Versions) != 1 ||
				keys[1].Name != "payments" || len(keys[1].Versions) != 3 || keys[1].Versions[2].Version != 3 {
				t.Fatalf("ListKeys = %s, want orders (1 version) and payments (versions 1-3)", got)
			}
			for _, k := range keys {
				for _, v := range k.Versions {
					if v.Created.Before(before) || v.Created.After(time.Now()) {
						t.Errorf("%s version %d created %v, want about now", k.Name, v.Version, v.Created)
					}
				}
			}
			v, _ := openAt(t, path)
			w, err := v.Wrap(ctx, "payments", dek(32, 5))
			if err != nil || wrappedVersion(t, w) != 3 {
				t.Fatalf("wrap: %v, version %d; want version 3", err, wrappedVersion(t, w))
			}
			if got, err := v.Unwrap(ctx, "payments", w); err != nil || !bytes.Equal(got, dek(32, 5)) {
				t.Errorf("unwrap: %X, %v", got, err)
			}
		})
	}
}

// TestDirectoryContents: files that are not KEK files are left alone; a KEK file must hold the KEK it is named
// after; a damaged file fails Open with its path.
func TestDirectoryContents(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	for name, content := range map[string]string{"README": "keys", ".orders.json.tmp-123": "{", "notes.txt": "x", "bad name.json": "{"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	keys, err := ListKeys(dir)
	if err != nil || len(keys) != 1 || keys[0].Name != "orders" {
		t.Fatalf("ListKeys = %v, %v; want orders alone", keys, err)
	}

	data, err := os.ReadFile(filepath.Join(dir, "orders.json"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(dir, "payments.json")
	if err := os.WriteFile(renamed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	assertMentions(t, "Open", err, renamed, `holds key "orders"`)
	if err := os.WriteFile(renamed, []byte(`{"format":"strait-kek/1","name":"payments","versions":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	assertMentions(t, "Open", err, renamed, "no versions")
}

func TestParseErrors(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(dek(32, 0x40))
	ver := func(n int, created, key string) string {
		return fmt.Sprintf(`{"version":%d,"created":%q,"key":%q}`, n, created, key)
	}
	kekDoc := func(versions ...string) string {
		return `{"format":"strait-kek/1","name":"orders","versions":[` + strings.Join(versions, ",") + `]}`
	}
	const ts = "2026-11-30T12:00:00Z"
	tests := []struct {
		name, doc, want string
	}{
		{"valid", kekDoc(ver(1, ts, key), ver(3, ts, key)), ""},
		{"not JSON", "orders=" + key, "malformed JSON at byte"},
		{"truncated", kekDoc(ver(1, ts, key))[:40], "truncated JSON"},
		{"trailing data", kekDoc(ver(1, ts, key)) + " {}", "unexpected data after"},
		{"unknown field", `{"format":"strait-kek/1","name":"orders","versions":[],"extra":1}`, `unknown field "extra"`},
		{"wrong format", strings.Replace(kekDoc(ver(1, ts, key)), "strait-kek/1", "strait-kek/2", 1), `format is "strait-kek/2"`},
		{"no format", `{"name":"orders","versions":[` + ver(1, ts, key) + `]}`, `format is ""`},
		{"bad name", strings.Replace(kekDoc(ver(1, ts, key)), `"orders"`, `"../x"`, 1), "invalid key name"},
		{"no versions", kekDoc(), "no versions"},
		{"version 0", kekDoc(ver(0, ts, key)), "version 0 is not between 1"},
		{"version too big", kekDoc(ver(maxVersion+1, ts, key)), "is not between 1"},
		{"out of order", kekDoc(ver(2, ts, key), ver(1, ts, key)), "does not follow version 2"},
		{"duplicate version", kekDoc(ver(2, ts, key), ver(2, ts, key)), "does not follow version 2"},
		{"no created", kekDoc(`{"version":1,"key":"` + key + `"}`), "no created time"},
		{"bad created", kekDoc(ver(1, "yesterday", key)), "not an RFC 3339 time"},
		{"short key", kekDoc(ver(1, ts, key[:40])), "not 32 bytes of standard base64"},
		{"url base64", kekDoc(ver(1, ts, base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)))), "not 32 bytes of standard base64"},
		{"key as number", kekDoc(`{"version":1,"created":"` + ts + `","key":5}`), `field "versions.key" has the wrong type`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := parseKEKFile([]byte(tt.doc))
			if tt.want == "" {
				if err != nil || k.name != "orders" || len(k.versions) != 2 || !bytes.Equal(k.versions[0].material, dek(32, 0x40)) {
					t.Fatalf("parse = %+v, %v", k, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), key[:16]) {
				t.Errorf("error %q quotes key material", err)
			}
		})
	}
	entry := `{"name":"orders","versions":[` + ver(1, ts, key) + `]}`
	vaultTests := []struct {
		name, doc, want string
	}{
		{"empty file", "  \n", ""},
		{"valid", `{"format":"strait-vault/1","keys":[` + entry + `]}`, ""},
		{"duplicate key", `{"format":"strait-vault/1","keys":[` + entry + `,` + entry + `]}`, "appears twice"},
		{"kek file as vault file", kekDoc(ver(1, ts, key)), "unknown field"},
		{"format inside", `{"format":"strait-vault/1","keys":[` + kekDoc(ver(1, ts, key)) + `]}`, "unexpected format field"},
	}
	for _, tt := range vaultTests {
		t.Run("vault file/"+tt.name, func(t *testing.T) {
			_, err := parseVaultFile([]byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestConcurrentRotations: rotations that run at once (separate lock holders) each add their own version.
func TestConcurrentRotations(t *testing.T) {
	for _, path := range []string{vaultDir(t), filepath.Join(t.TempDir(), "keys.json")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			mustCreate(t, path, "orders")
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					if _, err := RotateKey(path, "orders"); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			keys, err := ListKeys(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || len(keys[0].Versions) != n+1 || keys[0].Versions[n].Version != n+1 {
				t.Fatalf("after %d concurrent rotations: %v, want versions 1-%d", n, keys, n+1)
			}
		})
	}
}

// TestConcurrentUse runs wraps, unwraps and derivations from many goroutines while the vault is rotated and
// reloaded (run it with -race).
func TestConcurrentUse(t *testing.T) {
	dir := vaultDir(t)
	mustCreate(t, dir, "orders")
	v, clk := openAt(t, dir)
	const workers, rounds = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				d := dek(32, byte(w*rounds+i))
				wrapped, err := v.Wrap(ctx, "orders", d)
				if err == nil {
					var got []byte
					got, err = v.Unwrap(ctx, "orders", wrapped)
					if err == nil && !bytes.Equal(got, d) {
						err = fmt.Errorf("unwrap gave %X, want %X", got, d)
					}
				}
				if err == nil {
					_, _, err = v.DeriveKey(ctx, "orders", 0, []byte("x"))
				}
				if err != nil {
					errs <- err
					return
				}
				clk.advance(DefaultReloadInterval / 4)
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			if _, err := RotateKey(dir, "orders"); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	clk.advance(DefaultReloadInterval)
	if _, used, err := v.DeriveKey(ctx, "orders", 0, nil); err != nil || used != 6 {
		t.Errorf("after 5 rotations the newest version is %d (%v), want 6", used, err)
	}
}

// TestSymlinkedReadOnlyFile: a single-file vault reached through a symbolic link and mounted read-only, as a
// Kubernetes Secret volume delivers it, works, and a new file swapped in behind the link is picked up.
func TestSymlinkedReadOnlyFile(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "data-1", "keys.json")
	if err := os.Mkdir(filepath.Dir(first), 0o700); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, first, "orders")
	if err := os.Chmod(first, 0o400); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "keys.json")
	if err := os.Symlink(first, link); err != nil {
		t.Fatal(err)
	}
	v, clk := openAt(t, link)
	w1, err := v.Wrap(ctx, "orders", dek(32, 1))
	if err != nil {
		t.Fatal(err)
	}

	// The next version of the secret: the same key rotated, in a new file, then the link swapped.
	second := filepath.Join(dir, "data-2", "keys.json")
	if err := os.Mkdir(filepath.Dir(second), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mustRotate(t, second, "orders")
	if err := os.Symlink(second, link+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".new", link); err != nil {
		t.Fatal(err)
	}
	clk.advance(DefaultReloadInterval)
	w2, err := v.Wrap(ctx, "orders", dek(32, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got := wrappedVersion(t, w2); got != 2 {
		t.Errorf("wrap after the link was swapped used version %d, want 2", got)
	}
	if got, err := v.Unwrap(ctx, "orders", w1); err != nil || !bytes.Equal(got, dek(32, 1)) {
		t.Errorf("unwrap of a key wrapped before the swap: %X, %v", got, err)
	}
}
