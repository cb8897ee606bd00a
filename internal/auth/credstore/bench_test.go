package credstore

import (
	"fmt"
	"testing"
)

// BenchmarkVerifyPlain is what the gateway pays per PLAIN authentication: PBKDF2-HMAC-SHA-256 at the user's
// iteration count, then the StoredKey. An unknown user costs the same.
func BenchmarkVerifyPlain(b *testing.B) {
	for _, iters := range []int{MinIterations, DefaultIterations, MaxIterations} {
		b.Run(fmt.Sprintf("iterations=%d", iters), func(b *testing.B) {
			path := b.TempDir() + "/users.store"
			if _, err := AddUser(path, "alice", "alice-secret", iters); err != nil {
				b.Fatal(err)
			}
			s, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if !s.VerifyPlain("alice", "alice-secret") {
					b.Fatal("alice's password does not verify")
				}
			}
		})
	}
}

// BenchmarkSaltedPassword is PBKDF2 alone per mechanism: what a SCRAM client computes once per
// authentication (the gateway does not: it checks the proof with two HMACs and a hash).
func BenchmarkSaltedPassword(b *testing.B) {
	salt := make([]byte, saltLen)
	for _, m := range mechanisms {
		for _, iters := range []int{MinIterations, DefaultIterations, MaxIterations} {
			b.Run(fmt.Sprintf("%s/iterations=%d", m.name, iters), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					m.saltedPassword("alice-secret", salt, iters)
				}
			})
		}
	}
}

// BenchmarkLookup is the store's share of a SCRAM authentication, for a known and an unknown user (whose
// phantom credentials every lookup computes).
func BenchmarkLookup(b *testing.B) {
	path := b.TempDir() + "/users.store"
	if _, err := AddUser(path, "alice", "alice-secret", MinIterations); err != nil {
		b.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"alice", "mallory"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Lookup(name, SCRAMSHA256)
			}
		})
	}
}
