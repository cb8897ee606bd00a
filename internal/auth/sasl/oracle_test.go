package sasl_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/straitgw/strait/internal/auth/sasl"
)

// recording is Credentials that record every call made of them.
type recording struct {
	sasl.Credentials
	mu    sync.Mutex
	calls []string
}

func (r *recording) Lookup(user, mechanism string) (sasl.SCRAMCredentials, bool) {
	r.mu.Lock()
	r.calls = append(r.calls, "Lookup "+mechanism)
	r.mu.Unlock()
	return r.Credentials.Lookup(user, mechanism)
}

func (r *recording) VerifyPlain(user, password string) bool {
	r.mu.Lock()
	r.calls = append(r.calls, "VerifyPlain")
	r.mu.Unlock()
	return r.Credentials.VerifyPlain(user, password)
}

// shape is a SCRAM server-first message with its random parts blanked:
// what a client learns of a user's existence from it.
var randomParts = regexp.MustCompile(`(r|s)=[^,]*`)

func shape(serverFirst []byte) string {
	return randomParts.ReplaceAllStringFunc(string(serverFirst), func(kv string) string {
		return kv[:2] + "<" + strconv.Itoa(len(kv)-2) + " chars>"
	})
}

// TestNoOracle: an unknown user fails exactly as a wrong password does, by
// everything a client can see and everything the mechanism does: the same
// calls into the store, a server-first message of the same shape (a salt
// and nonce of the same length, the same iteration count), the same number
// of rounds, the same error. The time both take is measured by
// BenchmarkFailure (docs/benchmarks.md); the store computes phantom
// credentials on every lookup, found or not, so that it costs the same.
func TestNoOracle(t *testing.T) {
	store := newStore(t, "alice", "alice-pw")
	for _, m := range scramMechs {
		t.Run(m.name, func(t *testing.T) {
			run := func(user, password string) (calls []string, first string, err error) {
				rec := &recording{Credentials: store}
				conv := mustClient(t, m.client, user, password).NewConversation()
				c1, _ := conv.Step("")
				ex := m.new(rec).Start(context.Background(), "127.0.0.1:1")
				s1, done, err := ex.Next([]byte(c1))
				if err != nil || done {
					t.Fatalf("%s: client-first: %v, done %v", user, err, done)
				}
				c2, cerr := conv.Step(string(s1))
				if cerr != nil {
					t.Fatalf("%s: the client refused server-first: %v", user, cerr)
				}
				_, done, err = ex.Next([]byte(c2))
				if !done {
					t.Fatalf("%s: not done after client-final", user)
				}
				return rec.calls, shape(s1), err
			}
			wc, wf, werr := run("alice", "not-alice-pw")
			uc, uf, uerr := run("mallory", "alice-pw")
			if werr != sasl.ErrAuthFailed || uerr != werr {
				t.Errorf("wrong password: %v; unknown user: %v; want ErrAuthFailed for both", werr, uerr)
			}
			if wf != uf {
				t.Errorf("server-first differs: wrong password %q, unknown user %q", wf, uf)
			}
			if len(wc) != len(uc) || len(wc) == 0 || wc[0] != uc[0] {
				t.Errorf("calls into the store differ: wrong password %v, unknown user %v", wc, uc)
			}
		})
	}
	t.Run("PLAIN", func(t *testing.T) {
		run := func(user string) ([]string, error) {
			rec := &recording{Credentials: store}
			_, done, err := sasl.NewPlain(rec).Start(context.Background(), "").Next(plainMsg("", user, "not-alice-pw"))
			if !done {
				t.Fatalf("%s: PLAIN not done after one message", user)
			}
			return rec.calls, err
		}
		wc, werr := run("alice")
		uc, uerr := run("mallory")
		if werr != sasl.ErrAuthFailed || uerr != werr || len(wc) != 1 || len(uc) != 1 || wc[0] != uc[0] {
			t.Errorf("wrong password: %v %v; unknown user: %v %v; want one VerifyPlain and ErrAuthFailed each", wc, werr, uc, uerr)
		}
	})
}

// BenchmarkFailure measures the gateway's side of a failed authentication,
// for a wrong password and for an unknown user: their times must not tell
// the two apart (docs/benchmarks.md records them side by side).
func BenchmarkFailure(b *testing.B) {
	store := newStore(b, "alice", "alice-pw")
	for _, m := range scramMechs {
		for _, c := range []struct{ kind, user, password string }{{"wrong-password", "alice", "not-alice-pw"}, {"unknown-user", "mallory", "alice-pw"}} {
			b.Run(m.name+"/"+c.kind, func(b *testing.B) {
				client := mustClient(b, m.client, c.user, c.password)
				mech := m.new(store)
				for b.Loop() {
					// The client's PBKDF2 is cached after the first
					// exchange (same salt and count): what is left is
					// the gateway's work and the client's HMACs, the
					// same for both kinds.
					conv := client.NewConversation()
					c1, _ := conv.Step("")
					ex := mech.Start(context.Background(), "")
					s1, _, _ := ex.Next([]byte(c1))
					c2, _ := conv.Step(string(s1))
					if _, _, err := ex.Next([]byte(c2)); err == nil {
						b.Fatal("an exchange succeeded")
					}
				}
			})
		}
	}
	for _, c := range []struct{ kind, user string }{{"wrong-password", "alice"}, {"unknown-user", "mallory"}} {
		b.Run("PLAIN/"+c.kind, func(b *testing.B) {
			mech := sasl.NewPlain(store)
			msg := plainMsg("", c.user, "not-alice-pw")
			for b.Loop() {
				if _, _, err := mech.Start(context.Background(), "").Next(msg); err == nil {
					b.Fatal("PLAIN succeeded")
				}
			}
		})
	}
}
