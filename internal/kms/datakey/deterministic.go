package datakey

import (
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// Deterministic encryption. A plaintext is sealed with AES-256-GCM under
// encKey, with a synthetic nonce: the first 12 bytes of
// HMAC-SHA256(macKey, ad || plaintext), where ad is additional data the
// caller makes self-delimiting. Equal plaintexts under equal ad therefore
// give equal ciphertexts (so that, for record keys, log compaction still
// works), and a nonce repeats only for an equal plaintext, which GCM
// tolerates: it then produces the same ciphertext again and reveals nothing
// but the equality. encKey and macKey are HKDF-SHA256 expansions, with the
// infos label+"/enc" and label+"/mac", of KMS.DeriveKey(kek, version,
// label); the KEK version is stored with each ciphertext so that a rotated
// KEK still opens old ones.
//
//	uvarint KEK version | nonce (12) | ciphertext | tag (16)

// DeterministicOverhead is what deterministic encryption adds to a
// plaintext, but for the KEK version's uvarint.
const DeterministicOverhead = NonceLen + TagLen

// Errors of ReadVersion. Their text follows the name of what was read:
// "encrypted key too short".
var (
	ErrNoVersion = errors.New("has no valid KEK version")
	ErrTooShort  = errors.New("too short")
)

// ReadVersion reads the KEK version at the start of a deterministic
// ciphertext, and returns the rest for DeterministicCipher.Open. It accepts
// only a canonical uvarint from 1 to 2^31, followed by at least
// DeterministicOverhead bytes.
func ReadVersion(b []byte) (version int, rest []byte, err error) {
	v, n := binary.Uvarint(b)
	// A uvarint longer than it needs to be ends in a zero byte.
	if n <= 0 || (n > 1 && b[n-1] == 0) || v == 0 || v > 1<<31 {
		return 0, nil, ErrNoVersion
	}
	if len(b)-n < DeterministicOverhead {
		return 0, nil, ErrTooShort
	}
	return int(v), b[n:], nil
}

// DeterministicCipher seals and opens under the keys derived from one
// version of a KEK. It is safe for concurrent use.
type DeterministicCipher struct {
	version int
	aead    cipher.AEAD
	macs    sync.Pool // of hash.Hash: HMAC-SHA256 under macKey
}

// Version is the KEK version the cipher's keys are derived from.
func (c *DeterministicCipher) Version() int { return c.version }

// Seal appends the deterministic encryption of plaintext, its KEK version
// first, to dst. ad is the additional data; it must be self-delimiting, so
// that the MAC input ad || plaintext is unambiguous and a nonce never
// repeats for two different plaintexts.
func (c *DeterministicCipher) Seal(dst, ad, plaintext []byte) []byte {
	m := c.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(ad)
	m.Write(plaintext)
	dst = binary.AppendUvarint(dst, uint64(c.version))
	at := len(dst)
	dst = m.Sum(dst)
	c.macs.Put(m)
	dst = dst[:at+NonceLen] // the nonce: the MAC's first 12 bytes
	return c.aead.Seal(dst, dst[at:], plaintext, ad)
}

// Open appends the plaintext sealed in sealed, what ReadVersion returned
// after the version, to dst. It fails if sealed or ad were changed.
func (c *DeterministicCipher) Open(dst, sealed, ad []byte) ([]byte, error) {
	if len(sealed) < DeterministicOverhead {
		return dst, ErrTooShort
	}
	return c.aead.Open(dst, sealed[:NonceLen], sealed[NonceLen:], ad)
}

// Deterministic caches deterministic ciphers by KEK and version, and the
// newest version of each KEK for newestTTL. It is safe for concurrent use.
type Deterministic struct {
	k       kms.KMS
	timeout time.Duration
	now     func() time.Time
	label   []byte
	infoEnc string
	infoMAC string

	mu     sync.Mutex
	byVer  map[kekVersion]*DeterministicCipher
	newest map[string]newestCipher
}

// DeterministicOptions configure a Deterministic.
type DeterministicOptions struct {
	KMS     kms.KMS
	Timeout time.Duration // bounds each KMS call
	Now     func() time.Time
	// Label names what the keys are for, and so separates the keys of
	// each use of a KEK. It must never change once data is sealed:
	// nothing sealed under the old label would open.
	Label string
}

// NewDeterministic returns an empty cache. A nil Now is time.Now.
func NewDeterministic(o DeterministicOptions) *Deterministic {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Deterministic{k: o.KMS, timeout: o.Timeout, now: o.Now,
		label: []byte(o.Label), infoEnc: o.Label + "/enc", infoMAC: o.Label + "/mac",
		byVer: map[kekVersion]*DeterministicCipher{}, newest: map[string]newestCipher{}}
}

type kekVersion struct {
	kek     string
	version int
}

type newestCipher struct {
	c       *DeterministicCipher
	expires time.Time
}

// newestTTL is how long the newest version of a KEK is taken as the newest
// for deterministic encryption. After a KEK rotation, instances switch
// within it.
const newestTTL = 30 * time.Second

const maxDeterministic = 4096

// Newest returns the cipher of the newest version of kek, for sealing.
func (d *Deterministic) Newest(ctx context.Context, kek string) (*DeterministicCipher, error) {
	d.mu.Lock()
	l, ok := d.newest[kek]
	d.mu.Unlock()
	if ok && d.now().Before(l.expires) {
		return l.c, nil
	}
	c, err := d.derive(ctx, kek, 0)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if len(d.newest) >= maxDeterministic {
		clear(d.newest)
	}
	d.newest[kek] = newestCipher{c: c, expires: d.now().Add(newestTTL)}
	d.mu.Unlock()
	return c, nil
}

// Version returns the cipher of a given version of kek, for opening.
func (d *Deterministic) Version(ctx context.Context, kek []byte, version int) (*DeterministicCipher, error) {
	d.mu.Lock()
	c, ok := d.byVer[kekVersion{string(kek), version}]
	d.mu.Unlock()
	if ok {
		return c, nil
	}
	return d.derive(ctx, string(kek), version)
}

func (d *Deterministic) derive(ctx context.Context, kek string, version int) (*DeterministicCipher, error) {
	cctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	secret, used, err := d.k.DeriveKey(cctx, kek, version, d.label)
	if err != nil {
		return nil, unavailableIfTimedOut(cctx, err)
	}
	defer clear(secret)
	if used <= 0 {
		return nil, fmt.Errorf("%w: the KMS derived a key from KEK %q version %d", kms.ErrInvalid, kek, used)
	}
	enc, err := hkdf.Expand(sha256.New, secret, d.infoEnc, 32)
	if err != nil {
		return nil, err
	}
	defer clear(enc)
	macKey, err := hkdf.Expand(sha256.New, secret, d.infoMAC, 32)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(enc)
	if err != nil {
		return nil, err
	}
	c := &DeterministicCipher{version: used, aead: aead}
	c.macs.New = func() any { return hmac.New(sha256.New, macKey) }
	d.mu.Lock()
	if len(d.byVer) >= maxDeterministic {
		clear(d.byVer)
	}
	if old, ok := d.byVer[kekVersion{kek, used}]; ok {
		c = old // keep one cipher per version, and its pool of MACs
	} else {
		d.byVer[kekVersion{kek, used}] = c
	}
	d.mu.Unlock()
	return c, nil
}
