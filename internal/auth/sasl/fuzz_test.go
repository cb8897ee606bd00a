package sasl_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/straitgw/strait/internal/auth/sasl"
)

// plainUsers is Credentials for FuzzPlainMessage: a map, so that the fuzzer spends its time in the parser
// rather than in PBKDF2.
type plainUsers map[string]string

func (u plainUsers) Lookup(string, string) (sasl.SCRAMCredentials, bool) {
	return sasl.SCRAMCredentials{}, false
}

func (u plainUsers) VerifyPlain(user, password string) bool {
	pw, ok := u[user]
	return ok && pw == password
}

// FuzzPlainMessage: whatever the message, PLAIN ends after it without panicking; it authenticates only
// alice with her password (as herself), refuses a second message, and fails with one of the package's
// errors.
func FuzzPlainMessage(f *testing.F) {
	for _, seed := range []string{
		"\x00alice\x00alice-pw",
		"alice\x00alice\x00alice-pw",
		"bob\x00alice\x00alice-pw",
		"\x00alice\x00",
		"\x00\x00",
		"",
		"alice",
		"\x00alice\x00alice-pw\x00",
		"\x00al\xffice\x00pw",
	} {
		f.Add([]byte(seed))
	}
	mech := sasl.NewPlain(plainUsers{"alice": "alice-pw"})
	f.Fuzz(func(t *testing.T, msg []byte) {
		ex := mech.Start(context.Background(), "")
		_, done, err := ex.Next(msg)
		if !done {
			t.Fatal("PLAIN did not end after one message")
		}
		if err == nil {
			authzid, rest, _ := bytes.Cut(msg, []byte{0})
			if string(rest) != "alice\x00alice-pw" || (len(authzid) > 0 && string(authzid) != "alice") {
				t.Fatalf("authenticated %q with %q", ex.Result().Principal, msg)
			}
			if ex.Result().Principal != "alice" {
				t.Fatalf("principal %q, want alice", ex.Result().Principal)
			}
		} else if !errors.Is(err, sasl.ErrAuthFailed) && !errors.Is(err, sasl.ErrMalformed) {
			t.Fatalf("error %v is neither ErrAuthFailed nor ErrMalformed", err)
		}
		if !utf8.ValidString(errText(err)) {
			t.Fatalf("the error is not UTF-8: %q", errText(err))
		}
		if _, done, err := ex.Next(msg); !done || err == nil {
			t.Fatal("a second message was taken")
		}
	})
}

// FuzzScramClientMessages: whatever the two client messages, SCRAM never panics, never authenticates (the
// server's nonce is random, so no input can carry a valid proof), ends by the second message, fails with
// one of the package's errors, and refuses a message after the end.
func FuzzScramClientMessages(f *testing.F) {
	for _, seed := range [][2]string{
		{"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL", "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="},
		{"n,,n=mallory,r=abc", "c=biws,r=abc,p=AAAA"},
		{"n,a=alice,n=alice,r=abc", "c=bixhPWFsaWNlLA==,r=abc,p=AAAA"},
		{"y,,n=alice,r=abc", "c=eSws,r=abc,p=AAAA"},
		{"p=tls-unique,,n=alice,r=abc", "c=biws,r=abc,p=AAAA"},
		{"n,,n=a=2Cb=3Dc,r=abc", "c=biws,r=abc,x=y,p=AAAA"},
		{"n,,n=a=2Xb,r=abc", ""},
		{"n,,m=ext,n=alice,r=abc", ""},
		{"n,,n=alice,r=abc,tokenauth=true", ""},
		{"n,,n=alice,r=", "c=,r=,p="},
		{",,,", ",,,"},
		{"", ""},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	store := newStore(f, "alice", "alice-pw")
	mechs := []sasl.Mechanism{sasl.NewSCRAMSHA256(store), sasl.NewSCRAMSHA512(store)}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, mech := range mechs {
			ex := mech.Start(context.Background(), "")
			msgs := [][]byte{first, final}
			for i, msg := range msgs {
				answer, done, err := ex.Next(msg)
				if err == nil && done {
					t.Fatalf("%s authenticated %q with %q", mech.Name(), ex.Result().Principal, msgs)
				}
				if err != nil {
					if !done {
						t.Fatalf("%s: error %v without the end", mech.Name(), err)
					}
					if !errors.Is(err, sasl.ErrAuthFailed) && !errors.Is(err, sasl.ErrMalformed) {
						t.Fatalf("%s: error %v is neither ErrAuthFailed nor ErrMalformed", mech.Name(), err)
					}
					if !utf8.ValidString(err.Error()) {
						t.Fatalf("%s: the error is not UTF-8: %q", mech.Name(), err)
					}
					break
				}
				if i == 1 {
					t.Fatalf("%s: no end after client-final", mech.Name())
				}
				if len(answer) == 0 || len(answer) > 4096 {
					t.Fatalf("%s: server-first of %d bytes", mech.Name(), len(answer))
				}
			}
			if _, done, err := ex.Next(first); !done || err == nil {
				t.Fatalf("%s: a message after the end was taken", mech.Name())
			}
		}
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
