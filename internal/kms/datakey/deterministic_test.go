package datakey

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

func testDeterministic(k kms.KMS, label string, c *clock) *Deterministic {
	return NewDeterministic(DeterministicOptions{KMS: k, Timeout: time.Second, Now: c.Now, Label: label})
}

func newest(t *testing.T, d *Deterministic, kek string) *DeterministicCipher {
	t.Helper()
	c, err := d.Newest(context.Background(), kek)
	if err != nil {
		t.Fatalf("Newest(%s): %v", kek, err)
	}
	return c
}

// open reads the version of sealed, gets its cipher and opens it.
func open(t *testing.T, d *Deterministic, kek string, sealed, ad []byte) ([]byte, error) {
	t.Helper()
	v, rest, err := ReadVersion(sealed)
	if err != nil {
		t.Fatalf("ReadVersion: %v", err)
	}
	c, err := d.Version(context.Background(), []byte(kek), v)
	if err != nil {
		t.Fatalf("Version(%s, %d): %v", kek, v, err)
	}
	return c.Open(nil, rest, ad)
}

func TestDeterministicSealsEqualPlaintextsEqually(t *testing.T) {
	k, clk := newTestKMS("users"), newClock()
	d := testDeterministic(k, "test/v1", clk)
	c := newest(t, d, "users")
	alice := c.Seal(nil, []byte("\x01a"), []byte("alice"))
	if again := c.Seal(nil, []byte("\x01a"), []byte("alice")); !bytes.Equal(alice, again) {
		t.Error("equal plaintexts and ad sealed differently")
	}
	if bob := c.Seal(nil, []byte("\x01a"), []byte("bob")); bytes.Equal(alice[:1+NonceLen], bob[:1+NonceLen]) {
		t.Error("two plaintexts share a nonce")
	}
	if other := c.Seal(nil, []byte("\x01b"), []byte("alice")); bytes.Equal(alice, other) {
		t.Error("other ad, same ciphertext")
	}
	if len(alice) != 1+DeterministicOverhead+len("alice") || c.Version() != 1 {
		t.Errorf("%d bytes at version %d, want %d at version 1", len(alice), c.Version(), 1+DeterministicOverhead+len("alice"))
	}
	// Another instance opens it, and only with the same ad.
	e := testDeterministic(k, "test/v1", clk)
	if pt, err := open(t, e, "users", alice, []byte("\x01a")); err != nil || string(pt) != "alice" {
		t.Errorf("opened to %q (%v), want alice", pt, err)
	}
	if _, err := open(t, e, "users", alice, []byte("\x01b")); err == nil {
		t.Error("opened with other ad")
	}
	// Keys derived under another label neither seal alike nor open it.
	f := testDeterministic(k, "test/v2", clk)
	if bytes.Equal(newest(t, f, "users").Seal(nil, []byte("\x01a"), []byte("alice")), alice) {
		t.Error("two labels sealed alike")
	}
	if _, err := open(t, f, "users", alice, []byte("\x01a")); err == nil {
		t.Error("opened under another label")
	}
}

func TestDeterministicFollowsKEKRotation(t *testing.T) {
	k, clk := newTestKMS("users"), newClock()
	d := testDeterministic(k, "test/v1", clk)
	v1 := newest(t, d, "users").Seal(nil, []byte{0}, []byte("alice"))
	k.rotate("users")
	clk.add(newestTTL - time.Second)
	if c := newest(t, d, "users"); c.Version() != 1 {
		t.Errorf("within %v of asking, the newest version is %d, want the cached 1", newestTTL, c.Version())
	}
	clk.add(time.Second)
	if c := newest(t, d, "users"); c.Version() != 2 {
		t.Errorf("%v after asking, the newest version is %d, want 2", newestTTL, c.Version())
	}
	if pt, err := open(t, d, "users", v1, []byte{0}); err != nil || string(pt) != "alice" {
		t.Errorf("version 1 after the rotation: opened to %q (%v)", pt, err)
	}
	// Newest, then Version of what Newest derived: each key derived once.
	if n := k.derives.Load(); n != 2 {
		t.Errorf("%d derivations for two versions, want 2", n)
	}
	if _, err := d.Version(context.Background(), []byte("users"), 3); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("a version that does not exist: err %v", err)
	}
}

func TestDeterministicBounded(t *testing.T) {
	k, clk := newTestKMS(), newClock()
	d := testDeterministic(k, "test/v1", clk)
	for i := range maxDeterministic + 1 {
		kek := fmt.Sprint("kek-", i)
		k.create(kek)
		newest(t, d, kek)
	}
	if len(d.byVer) > maxDeterministic || len(d.newest) > maxDeterministic {
		t.Errorf("%d ciphers by version and %d newest, want at most %d", len(d.byVer), len(d.newest), maxDeterministic)
	}
}

func TestReadVersion(t *testing.T) {
	body := make([]byte, DeterministicOverhead)
	for _, c := range []struct {
		name string
		in   []byte
		v    int
		err  error
	}{
		{"version 1", append([]byte{1}, body...), 1, nil},
		{"version 2^31", append([]byte{0x80, 0x80, 0x80, 0x80, 0x08}, body...), 1 << 31, nil},
		{"empty", nil, 0, ErrNoVersion},
		{"version 0", append([]byte{0}, body...), 0, ErrNoVersion},
		{"overlong", append([]byte{0x81, 0x00}, body...), 0, ErrNoVersion},
		{"over 2^31", append([]byte{0x81, 0x80, 0x80, 0x80, 0x08}, body...), 0, ErrNoVersion},
		{"unterminated", []byte{0x81}, 0, ErrNoVersion},
		{"overflows", append(bytes.Repeat([]byte{0xff}, 10), 1), 0, ErrNoVersion},
		{"too short", append([]byte{1}, body[1:]...), 0, ErrTooShort},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, rest, err := ReadVersion(c.in)
			if err != c.err || v != c.v || (err == nil && len(rest) != len(body)) {
				t.Errorf("version %d, %d bytes after it, err %v; want %d, %d, %v", v, len(rest), err, c.v, len(body), c.err)
			}
		})
	}
	if ErrNoVersion.Error() != "has no valid KEK version" || ErrTooShort.Error() != "too short" {
		t.Errorf("the errors read %q and %q: they follow the name of what was read", ErrNoVersion, ErrTooShort)
	}
}

func TestOpenShortCiphertext(t *testing.T) {
	c := newest(t, testDeterministic(newTestKMS("users"), "test/v1", newClock()), "users")
	if _, err := c.Open(nil, make([]byte, DeterministicOverhead-1), nil); err != ErrTooShort {
		t.Errorf("%d bytes: err %v, want ErrTooShort", DeterministicOverhead-1, err)
	}
}

func TestDeterministicDoesNotAllocate(t *testing.T) {
	d := testDeterministic(newTestKMS("users"), "test/v1", newClock())
	c := newest(t, d, "users")
	ctx, kek, ad, pt := context.Background(), []byte("users"), []byte{0}, bytes.Repeat([]byte("k"), 36)
	sealed := c.Seal(nil, ad, pt)
	buf := make([]byte, 0, 256)
	for name, f := range map[string]func(){
		"Newest":  func() { d.Newest(ctx, "users") },
		"Version": func() { d.Version(ctx, kek, 1) },
		"Seal":    func() { c.Seal(buf[:0], ad, pt) },
		"Open":    func() { c.Open(buf[:0], sealed[1:], ad) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 && !raceEnabled {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

// TestDeterministicPinned pins what a plaintext seals to under keys derived
// from one secret: the HKDF infos and the nonce's derivation cannot change
// without every stored ciphertext failing to open or to match.
func TestDeterministicPinned(t *testing.T) {
	c := newest(t, testDeterministic(newTestKMS("users"), "test/v1", newClock()), "users")
	const want = "018fae86ffa35c2be67a47e7333efab67be94610c5111e900580b1db384ac4935c67"
	if got := hex.EncodeToString(c.Seal(nil, []byte{0}, []byte("alice"))); got != want {
		t.Errorf("alice sealed to\n%s, want\n%s", got, want)
	}
}
