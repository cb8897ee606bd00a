package sasl_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/auth/sasl"
)

// The store satisfies the mechanisms' interface without either package importing the other.
var _ sasl.Credentials = (*credstore.Store)(nil)

// newStore makes a credential store with users (name, password, ...) at the minimum iteration count, to keep
// tests fast.
func newStore(t testing.TB, users ...string) *credstore.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.store")
	for i := 0; i+1 < len(users); i += 2 {
		if _, err := credstore.AddUser(path, users[i], users[i+1], credstore.MinIterations); err != nil {
			t.Fatal(err)
		}
	}
	s, err := credstore.Open(path, credstore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func plainMsg(authzid, authcid, passwd string) []byte {
	return []byte(authzid + "\x00" + authcid + "\x00" + passwd)
}

func TestPlain(t *testing.T) {
	store := newStore(t, "alice", "alice-pw", "a,b=c", "comma-pw")
	mech := sasl.NewPlain(store)
	if mech.Name() != "PLAIN" {
		t.Errorf("Name() = %q", mech.Name())
	}
	tests := []struct {
		name      string
		msg       []byte
		want      error // nil: authenticated as principal
		principal string
	}{
		{"right password", plainMsg("", "alice", "alice-pw"), nil, "alice"},
		{"authzid is the user", plainMsg("alice", "alice", "alice-pw"), nil, "alice"},
		{"name with , and =", plainMsg("", "a,b=c", "comma-pw"), nil, "a,b=c"},
		{"wrong password", plainMsg("", "alice", "bob-pw"), sasl.ErrAuthFailed, ""},
		{"unknown user", plainMsg("", "mallory", "alice-pw"), sasl.ErrAuthFailed, ""},
		{"name differs in case", plainMsg("", "Alice", "alice-pw"), sasl.ErrAuthFailed, ""},
		{"authzid is someone else", plainMsg("bob", "alice", "alice-pw"), sasl.ErrAuthFailed, ""},
		{"no separators", []byte("alice"), sasl.ErrMalformed, ""},
		{"one separator", []byte("alice\x00alice-pw"), sasl.ErrMalformed, ""},
		{"three separators", []byte("\x00alice\x00alice-pw\x00"), sasl.ErrMalformed, ""},
		{"empty message", nil, sasl.ErrMalformed, ""},
		{"empty user", plainMsg("", "", "alice-pw"), sasl.ErrMalformed, ""},
		{"empty password", plainMsg("", "alice", ""), sasl.ErrMalformed, ""},
		{"long user", plainMsg("", strings.Repeat("a", 256), "pw"), sasl.ErrMalformed, ""},
		{"long authzid", plainMsg(strings.Repeat("a", 256), "alice", "alice-pw"), sasl.ErrMalformed, ""},
		{"long password", plainMsg("", "alice", strings.Repeat("p", 1025)), sasl.ErrMalformed, ""},
		{"long message", []byte(strings.Repeat("x", 4000)), sasl.ErrMalformed, ""},
		{"not UTF-8", plainMsg("", "alice", "pw\xff"), sasl.ErrMalformed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := mech.Start(context.Background(), "127.0.0.1:1")
			answer, done, err := ex.Next(tt.msg)
			if !done {
				t.Fatal("PLAIN did not end after one message")
			}
			if tt.want == nil {
				if err != nil || answer == nil || len(answer) != 0 || ex.Result().Principal != tt.principal {
					t.Fatalf("Next = %q, %v; principal %q; want an empty answer and %q", answer, err, ex.Result().Principal, tt.principal)
				}
			} else {
				if !errors.Is(err, tt.want) || answer != nil {
					t.Fatalf("Next = %q, %v; want %v and no answer", answer, err, tt.want)
				}
				if ex.Result().Principal != "" {
					t.Errorf("a failed exchange has principal %q", ex.Result().Principal)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Errorf("the error quotes the password: %v", err)
				}
			}
			if _, done, err := ex.Next(plainMsg("", "alice", "alice-pw")); !done || !errors.Is(err, sasl.ErrMalformed) {
				t.Errorf("a message after the end: done %v, %v; want ErrMalformed", done, err)
			}
		})
	}
}

// TestPlainFailuresAlike: a wrong password and an unknown user fail with the very same error.
func TestPlainFailuresAlike(t *testing.T) {
	mech := sasl.NewPlain(newStore(t, "alice", "alice-pw"))
	_, _, wrong := mech.Start(context.Background(), "").Next(plainMsg("", "alice", "nope"))
	_, _, unknown := mech.Start(context.Background(), "").Next(plainMsg("", "mallory", "nope"))
	if wrong != sasl.ErrAuthFailed || unknown != sasl.ErrAuthFailed {
		t.Errorf("wrong password: %v; unknown user: %v; want both to be ErrAuthFailed itself", wrong, unknown)
	}
}
