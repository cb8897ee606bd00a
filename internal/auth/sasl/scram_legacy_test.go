package sasl_test

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/auth/sasl"
)

// legacyClient speaks SCRAM as librdkafka before 2.6.1 does: its
// client-final nonce is its own nonce followed by the server's (which
// begins with its own). nonceFor builds that nonce from the client's and
// the server's, so a test can send the form RFC 5802 asks for as well.
func legacyClient(t *testing.T, mech sasl.Mechanism, h func() hash.Hash, user, password, gs2 string, nonceFor func(c, s string) string) (sasl.Exchange, string, error) {
	t.Helper()
	ex := mech.Start(context.Background(), "")
	const cnonce = "rOprNGfwEbeRWgbNEkqO"
	bare := "n=" + user + ",r=" + cnonce
	first, _, err := ex.Next([]byte(gs2 + bare))
	if err != nil {
		t.Fatal(err)
	}
	var snonce, salt string
	iters := 0
	for _, f := range strings.Split(string(first), ",") {
		switch {
		case strings.HasPrefix(f, "r="):
			snonce = f[2:]
		case strings.HasPrefix(f, "s="):
			salt = f[2:]
		case strings.HasPrefix(f, "i="):
			iters, _ = strconv.Atoi(f[2:])
		}
	}
	s, _ := base64.StdEncoding.DecodeString(salt)
	salted, err := pbkdf2.Key(h, password, s, iters, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	hh := h()
	hh.Write(clientKey)
	storedKey := hh.Sum(nil)
	final := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + nonceFor(cnonce, snonce)
	sig := mac(storedKey, bare+","+string(first)+","+final)
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	answer, _, err := ex.Next([]byte(final + ",p=" + base64.StdEncoding.EncodeToString(sig)))
	if err == nil {
		want := "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), bare+","+string(first)+","+final))
		if string(answer) != want {
			t.Errorf("server-final %q, want %q", answer, want)
		}
	}
	return ex, string(answer), err
}

// TestSCRAMLegacyLibrdkafkaNonce: the nonce of librdkafka before 2.6.1 is
// accepted with the right password (and said so in the result), refused
// with a wrong one or for an unknown user exactly as any failure, and
// refused always when the nonce check is strict; a nonce of any other
// wrong form is refused either way.
func TestSCRAMLegacyLibrdkafkaNonce(t *testing.T) {
	legacy := func(c, s string) string { return c + s }
	for _, m := range scramMechs {
		store := newStore(t, "alice", "alice-pw")
		mech := m.new(store)
		ex, _, err := legacyClient(t, mech, m.client, "alice", "alice-pw", "n,,", legacy)
		if err != nil || ex.Result().Principal != "alice" || !ex.Result().LegacySCRAMNonce {
			t.Errorf("%s: librdkafka's nonce with the right password: %v, %+v", m.name, err, ex.Result())
		}
		if _, _, err := legacyClient(t, mech, m.client, "alice", "alice-pw", "n,a=alice,", legacy); err != nil {
			t.Errorf("%s: with an authorization id: %v", m.name, err)
		}
		if _, _, err := legacyClient(t, mech, m.client, "alice", "not-it", "n,,", legacy); !errors.Is(err, sasl.ErrAuthFailed) {
			t.Errorf("%s: a wrong password: %v, want ErrAuthFailed", m.name, err)
		}
		if _, _, err := legacyClient(t, mech, m.client, "mallory", "alice-pw", "n,,", legacy); !errors.Is(err, sasl.ErrAuthFailed) {
			t.Errorf("%s: an unknown user: %v, want ErrAuthFailed", m.name, err)
		}
		ex, _, err = legacyClient(t, mech, m.client, "alice", "alice-pw", "n,,", func(_, s string) string { return s })
		if err != nil || ex.Result().LegacySCRAMNonce {
			t.Errorf("%s: the RFC's nonce: %v, %+v", m.name, err, ex.Result())
		}
		for name, nonce := range map[string]func(c, s string) string{
			"the client's nonce alone": func(c, _ string) string { return c },
			"another prefix":           func(_, s string) string { return "xyz" + s },
			"the server's twice":       func(_, s string) string { return s + s },
		} {
			if _, _, err := legacyClient(t, mech, m.client, "alice", "alice-pw", "n,,", nonce); !errors.Is(err, sasl.ErrAuthFailed) {
				t.Errorf("%s: %s: %v, want ErrAuthFailed", m.name, name, err)
			}
		}
		strict := m.new(store)
		strict.StrictNonce = true
		if _, _, err := legacyClient(t, strict, m.client, "alice", "alice-pw", "n,,", legacy); !errors.Is(err, sasl.ErrAuthFailed) {
			t.Errorf("%s: librdkafka's nonce with strict checking: %v, want ErrAuthFailed", m.name, err)
		}
	}
}
