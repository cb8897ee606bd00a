package sasl

// Credentials is where PLAIN and SCRAM find users: internal/auth/credstore's Store is one. It is defined here,
// by its user, and credstore satisfies it without importing this package (nor this package credstore), so
// that the mechanisms can be tested, and later backed, by anything that keeps users.
//
// Neither method may tell an unknown user from a known one by what it returns before the password is
// checked, nor by how long it takes.
type Credentials interface {
	// Lookup returns user's credentials for the SCRAM mechanism named mechanism (SCRAM-SHA-256,
	// SCRAM-SHA-512) and true; for a user without them, phantom credentials and false. Phantom credentials
	// look like real ones (the same salt length and usual iteration count), are the same for the same name
	// within a process, and verify no proof.
	Lookup(user, mechanism string) (SCRAMCredentials, bool)
	// VerifyPlain reports whether password is user's password, doing the same work for a user it does not
	// know.
	VerifyPlain(user, password string) bool
}

// SCRAMCredentials are what a server keeps of a user's password for one SCRAM mechanism (RFC 5802 §3): the
// salt and iteration count a client derives its keys with, StoredKey and ServerKey. An alias of an unnamed
// struct type, so that credstore names the same type with an alias of its own. The slices must not be
// changed.
type SCRAMCredentials = struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}
