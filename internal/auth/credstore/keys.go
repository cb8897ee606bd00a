package credstore

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"hash"
	"sync"
)

// Iteration counts of PBKDF2 (RFC 5802's Hi).
const (
	// MinIterations is RFC 7677's minimum for SCRAM-SHA-256, and what Kafka's clients refuse to go below.
	MinIterations = 4096
	// MaxIterations is the most Kafka itself stores (its ScramMechanism's maximum): clients written against
	// Kafka have never had to accept more, so the store never holds more.
	MaxIterations = 16384
	// DefaultIterations is twice RFC 7677's minimum. A client pays it once per connection (and per
	// re-authentication), a PLAIN login costs the gateway the same; docs/security.md has what that is on our
	// machines. Doubling the minimum doubles an offline guesser's work for a stolen store at a cost no
	// connecting client notices.
	DefaultIterations = 8192
)

// Salt sizes. New salts are 16 bytes, the minimum NIST SP 800-132 asks of PBKDF2 salts.
const (
	saltLen    = 16
	minSaltLen = 16
	maxSaltLen = 64
)

// SCRAMCredentials are what a server keeps of a user's password for one SCRAM mechanism (RFC 5802 §3). It is
// an alias of an unnamed struct type so that the SASL mechanisms (internal/auth/sasl) can name the same type
// with their own alias, and Store satisfy their interface, without either package importing the other. The
// slices are shared: callers must not change them.
type SCRAMCredentials = struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// mechanism is a SCRAM mechanism the store knows.
type mechanism struct {
	name string
	hash func() hash.Hash
	size int // of the hash, and so of StoredKey and ServerKey
}

// mechanisms are indexed as user.scram.
var mechanisms = [2]mechanism{
	{SCRAMSHA256, sha256.New, sha256.Size},
	{SCRAMSHA512, sha512.New, sha512.Size},
}

// mechanismIndex returns the index in mechanisms of the mechanism named name, or -1.
func mechanismIndex(name string) int {
	for i, m := range mechanisms {
		if m.name == name {
			return i
		}
	}
	return -1
}

// saltedPassword is RFC 5802's SaltedPassword := Hi(password, salt, i): PBKDF2 with HMAC-H and one block.
func (m mechanism) saltedPassword(password string, salt []byte, iterations int) []byte {
	sp, err := pbkdf2.Key(m.hash, password, salt, iterations, m.size)
	if err != nil {
		// Only in FIPS 140-only mode, for parameters the store never has (salts under 16 bytes, and the
		// like): a configuration error of the process, not an input.
		panic(fmt.Sprintf("credstore: PBKDF2: %v", err))
	}
	return sp
}

// keys are RFC 5802's StoredKey := H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey := HMAC(SaltedPassword, "Server Key").
func (m mechanism) keys(saltedPassword []byte) (storedKey, serverKey []byte) {
	mac := hmac.New(m.hash, saltedPassword)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	h := m.hash()
	h.Write(clientKey)
	storedKey = h.Sum(nil)
	mac = hmac.New(m.hash, saltedPassword)
	mac.Write([]byte("Server Key"))
	return storedKey, mac.Sum(nil)
}

// derive makes new credentials for password: a fresh salt, then the keys.
func (m mechanism) derive(password string, iterations int) *SCRAMCredentials {
	salt := make([]byte, saltLen)
	rand.Read(salt) // never fails: on a broken system it crashes the program instead
	stored, server := m.keys(m.saltedPassword(password, salt, iterations))
	return &SCRAMCredentials{Salt: salt, Iterations: iterations, StoredKey: stored, ServerKey: server}
}

// verify reports whether password derives c's StoredKey, comparing in constant time.
func (m mechanism) verify(c *SCRAMCredentials, password string) bool {
	stored, _ := m.keys(m.saltedPassword(password, c.Salt, c.Iterations))
	return subtle.ConstantTimeCompare(stored, c.StoredKey) == 1
}

// phantomSecret keys the phantom credentials of unknown users: random, made once per process, so that the
// same unknown name gets the same salt on every attempt (as a real user does) and no two processes agree.
var phantomSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
})

// phantom returns credentials for a user the store does not have, for mechanism m: a salt and keys that are
// HMACs of the name under phantomSecret, and the given iteration count. To a client they look like a real
// user's; no password derives their StoredKey except by breaking HMAC.
func (m mechanism) phantom(name string, iterations int) *SCRAMCredentials {
	secret := phantomSecret()
	derive := func(h func() hash.Hash, label string) []byte {
		mac := hmac.New(h, secret)
		mac.Write([]byte(label))
		mac.Write([]byte{0})
		mac.Write([]byte(m.name))
		mac.Write([]byte{0})
		mac.Write([]byte(name))
		return mac.Sum(nil)
	}
	return &SCRAMCredentials{
		Salt:       derive(sha256.New, "salt")[:saltLen],
		Iterations: iterations,
		StoredKey:  derive(m.hash, "stored key"),
		ServerKey:  derive(m.hash, "server key"),
	}
}
