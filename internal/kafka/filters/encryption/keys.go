package encryption

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// dek is a data-encryption key this instance made, for sealing. Its IV
// counter only goes up and it is never shared with another instance, so no
// two records sealed under it get the same nonce.
type dek struct {
	kek     string
	wrapped []byte // as the KMS returned it; travels in every record
	aead    cipher.AEAD
	next    atomic.Uint64 // the next IV counter to hand out
	limit   uint64        // counters at or past it are not used
	expires time.Time
}

// reserve takes up to n IV counters and returns the first and how many it
// took; zero when the DEK is used up.
func (d *dek) reserve(n int) (first uint64, got int) {
	for {
		cur := d.next.Load()
		if cur >= d.limit {
			return 0, 0
		}
		take := min(uint64(n), d.limit-cur)
		if d.next.CompareAndSwap(cur, cur+take) {
			return cur, int(take)
		}
	}
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// keyring holds the current DEK of each KEK and makes new ones: after
// maxRecords records, after maxAge, or when none exists yet. Concurrent
// callers that need a new DEK for the same KEK share one KMS call.
type keyring struct {
	k          kms.KMS
	maxRecords uint64
	maxAge     time.Duration
	timeout    time.Duration
	now        func() time.Time
	onNew      func(d *dek) // the opening side learns the DEKs made here

	mu    sync.Mutex
	slots map[string]*slot
}

// negativeTTL is how long a KEK the KMS says does not exist is taken as
// missing, so that a stream of produces to its topic is not a stream of KMS
// calls.
const negativeTTL = 5 * time.Second

// maxSlots bounds the KEKs the keyring tracks. KEK names can be built from
// topic names, which clients choose.
const maxSlots = 4096

type slot struct {
	cur atomic.Pointer[dek]

	mu           sync.Mutex
	flight       *flight   // a new DEK being made
	missingUntil time.Time // the KEK was missing at the last try
	missingErr   error
}

type flight struct {
	done chan struct{}
	d    *dek
	err  error
}

// slot returns the slot of kek, making it if needed.
func (r *keyring) slot(kek string) *slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.slots[kek]
	if ok {
		return s
	}
	if len(r.slots) >= maxSlots {
		// Slots of missing KEKs go first; if that frees nothing, all
		// go. A DEK dropped here is simply replaced by a new one.
		for name, old := range r.slots {
			if old.cur.Load() == nil {
				delete(r.slots, name)
			}
		}
		if len(r.slots) >= maxSlots {
			clear(r.slots)
		}
	}
	s = &slot{}
	r.slots[kek] = s
	return s
}

// reserve returns a DEK of kek with up to n IV counters taken from it.
func (r *keyring) reserve(ctx context.Context, kek string, n int) (d *dek, first uint64, got int, err error) {
	s := r.slot(kek)
	for range 16 { // a fresh DEK has room for at least one record; others may take it first
		d = s.cur.Load()
		if d != nil && r.now().Before(d.expires) {
			if first, got = d.reserve(n); got > 0 {
				return d, first, got, nil
			}
		}
		if d, err = r.renew(ctx, s, kek, d); err != nil {
			return nil, 0, 0, err
		}
		if first, got = d.reserve(n); got > 0 {
			return d, first, got, nil
		}
	}
	return nil, 0, 0, fmt.Errorf("%w: could not reserve IVs for KEK %q", kms.ErrUnavailable, kek)
}

// renew replaces old, the slot's DEK, with a new one unless another caller
// already has.
func (r *keyring) renew(ctx context.Context, s *slot, kek string, old *dek) (*dek, error) {
	s.mu.Lock()
	if d := s.cur.Load(); d != old && d != nil && r.now().Before(d.expires) {
		s.mu.Unlock()
		return d, nil
	}
	if r.now().Before(s.missingUntil) {
		err := s.missingErr
		s.mu.Unlock()
		return nil, err
	}
	f := s.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flight = f
		s.mu.Unlock()
		// The call must not end with the first caller's connection:
		// others wait for it. The timeout bounds it instead.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
		f.d, f.err = r.make(cctx, kek)
		cancel()
		s.mu.Lock()
		s.flight = nil
		if f.err == nil {
			s.cur.Store(f.d)
		} else if errors.Is(f.err, kms.ErrKeyNotFound) {
			s.missingUntil, s.missingErr = r.now().Add(negativeTTL), f.err
		}
		s.mu.Unlock()
		close(f.done)
		if f.err == nil && r.onNew != nil {
			r.onNew(f.d)
		}
		return f.d, f.err
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.d, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for a new data key for KEK %q: %w", kms.ErrUnavailable, kek, ctx.Err())
	}
}

// make generates a DEK and has the KMS wrap it.
func (r *keyring) make(ctx context.Context, kek string) (*dek, error) {
	key := make([]byte, dekLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("%w: generating a data key: %w", kms.ErrUnavailable, err)
	}
	defer clear(key)
	wrapped, err := r.k.Wrap(ctx, kek, key)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, kms.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", kms.ErrUnavailable, err)
		}
		return nil, err
	}
	if len(wrapped) == 0 || len(wrapped) > maxNameLen {
		return nil, fmt.Errorf("%w: the KMS wrapped a data key into %d bytes; the envelope holds 1 to %d", kms.ErrInvalid, len(wrapped), maxNameLen)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	d := &dek{kek: kek, wrapped: wrapped, aead: aead, limit: r.maxRecords, expires: r.now().Add(r.maxAge)}
	return d, nil
}

// openers caches the AEADs of DEKs by KEK name and wrapped DEK, so a DEK is
// unwrapped by the KMS once, not once per record. Bounded: when full, an
// arbitrary entry goes.
type openers struct {
	k       kms.KMS
	timeout time.Duration

	mu sync.RWMutex
	m  map[string]cipher.AEAD
}

const maxOpeners = 8192

// openerKey appends the cache key of a DEK: the KEK name's length and name,
// then the wrapped DEK.
func openerKey(dst, kek, wrapped []byte) []byte {
	dst = append(dst, byte(len(kek)))
	dst = append(dst, kek...)
	return append(dst, wrapped...)
}

func (o *openers) put(key []byte, a cipher.AEAD) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) >= maxOpeners {
		for k := range o.m {
			delete(o.m, k)
			break
		}
	}
	o.m[string(key)] = a
}

// get returns the AEAD of a DEK; scratch holds its openerKey.
func (o *openers) get(ctx context.Context, kek, wrapped []byte, scratch *[]byte) (cipher.AEAD, error) {
	o.mu.RLock()
	a, ok := o.m[string(*scratch)]
	o.mu.RUnlock()
	if ok {
		return a, nil
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	key, err := o.k.Unwrap(cctx, string(kek), wrapped)
	if err != nil {
		if cctx.Err() != nil && !errors.Is(err, kms.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", kms.ErrUnavailable, err)
		}
		return nil, err
	}
	defer clear(key)
	if len(key) != dekLen {
		return nil, fmt.Errorf("%w: the KMS unwrapped a %d-byte data key, want %d", kms.ErrInvalid, len(key), dekLen)
	}
	if a, err = newAEAD(key); err != nil {
		return nil, err
	}
	o.put(*scratch, a)
	return a, nil
}

// Deterministic key encryption. A record key is sealed with AES-256-GCM
// under encKey, with a synthetic nonce: the first 12 bytes of
// HMAC-SHA256(macKey, ad || key), where ad is the topic binding (keyAD). Equal keys in one topic therefore
// give equal ciphertexts, so log compaction still works, and a nonce
// repeats only for an equal key, which GCM tolerates: it then produces the
// same ciphertext again and reveals nothing but the equality. encKey and
// macKey are HKDF-SHA256 expansions of KMS.DeriveKey(kek, version,
// keyLabel); the KEK version is stored with each key so that a rotated KEK
// still opens old keys.
//
//	uvarint KEK version | nonce (12) | ciphertext | tag (16)
var keyLabel = []byte("strait/record-encryption/record-key/v1")

const (
	infoEnc = "strait/record-encryption/record-key/v1/enc"
	infoMAC = "strait/record-encryption/record-key/v1/mac"
)

// keyOverhead is what deterministic encryption adds to a key, but for the
// KEK version's uvarint.
const keyOverhead = nonceLen + tagLen

type keyCipher struct {
	version int
	aead    cipher.AEAD
	macs    sync.Pool // of hash.Hash: HMAC-SHA256 under macKey
}

// seal appends the deterministic encryption of key to dst. ad is the
// additional data, self-delimiting (see keyAD).
func (kc *keyCipher) seal(dst, ad, key []byte) []byte {
	m := kc.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(ad)
	m.Write(key)
	dst = binary.AppendUvarint(dst, uint64(kc.version))
	at := len(dst)
	dst = m.Sum(dst)
	kc.macs.Put(m)
	dst = dst[:at+nonceLen] // the nonce: the MAC's first 12 bytes
	return kc.aead.Seal(dst, dst[at:], key, ad)
}

// keyAD is the additional data of a record key: the topic, length first,
// when bound, or a single zero byte (no topic is empty) when not. Either
// form is self-delimiting, so the MAC input ad || key is unambiguous and a
// nonce never repeats for two different keys, whether or not bind_topic
// changed in between.
func keyAD(dst []byte, topic string, bind bool) []byte {
	if !bind {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(topic)))
	return append(dst, topic...)
}

// keyVersion reads the KEK version at the start of an encrypted key.
func keyVersion(b []byte) (version int, rest []byte, err error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintLen(v) || v == 0 || v > 1<<31 {
		return 0, nil, fmt.Errorf("%w: encrypted key has no valid KEK version", errBadEnvelope)
	}
	if len(b)-n < keyOverhead {
		return 0, nil, fmt.Errorf("%w: encrypted key too short", errBadEnvelope)
	}
	return int(v), b[n:], nil
}

// open appends the key sealed in b (after its version) to dst.
func (kc *keyCipher) open(dst, b, ad []byte) ([]byte, error) {
	return kc.aead.Open(dst, b[:nonceLen], b[nonceLen:], ad)
}

// keyCiphers caches key ciphers by KEK and version, and the newest version
// of each KEK for latestTTL.
type keyCiphers struct {
	k       kms.KMS
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	byVer  map[kekVersion]*keyCipher
	latest map[string]latestCipher
}

type kekVersion struct {
	kek     string
	version int
}

type latestCipher struct {
	kc      *keyCipher
	expires time.Time
}

// latestTTL is how long the newest version of a KEK is taken as the newest
// for key encryption. After a KEK rotation, instances switch within it.
const latestTTL = 30 * time.Second

const maxKeyCiphers = 4096

// newest returns the cipher of the newest version of kek.
func (c *keyCiphers) newest(ctx context.Context, kek string) (*keyCipher, error) {
	c.mu.Lock()
	l, ok := c.latest[kek]
	c.mu.Unlock()
	if ok && c.now().Before(l.expires) {
		return l.kc, nil
	}
	kc, err := c.derive(ctx, kek, 0)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.latest) >= maxKeyCiphers {
		clear(c.latest)
	}
	c.latest[kek] = latestCipher{kc: kc, expires: c.now().Add(latestTTL)}
	c.mu.Unlock()
	return kc, nil
}

// version returns the cipher of a given version of kek.
func (c *keyCiphers) version(ctx context.Context, kek []byte, version int) (*keyCipher, error) {
	c.mu.Lock()
	kc, ok := c.byVer[kekVersion{string(kek), version}]
	c.mu.Unlock()
	if ok {
		return kc, nil
	}
	return c.derive(ctx, string(kek), version)
}

func (c *keyCiphers) derive(ctx context.Context, kek string, version int) (*keyCipher, error) {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	secret, used, err := c.k.DeriveKey(cctx, kek, version, keyLabel)
	if err != nil {
		if cctx.Err() != nil && !errors.Is(err, kms.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", kms.ErrUnavailable, err)
		}
		return nil, err
	}
	defer clear(secret)
	if used <= 0 {
		return nil, fmt.Errorf("%w: the KMS derived a key from KEK %q version %d", kms.ErrInvalid, kek, used)
	}
	enc, err := hkdf.Expand(sha256.New, secret, infoEnc, 32)
	if err != nil {
		return nil, err
	}
	defer clear(enc)
	macKey, err := hkdf.Expand(sha256.New, secret, infoMAC, 32)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(enc)
	if err != nil {
		return nil, err
	}
	kc := &keyCipher{version: used, aead: aead}
	kc.macs.New = func() any { return hmac.New(sha256.New, macKey) }
	c.mu.Lock()
	if len(c.byVer) >= maxKeyCiphers {
		clear(c.byVer)
	}
	if old, ok := c.byVer[kekVersion{kek, used}]; ok {
		kc = old // keep one cipher per version, and its pool of MACs
	} else {
		c.byVer[kekVersion{kek, used}] = kc
	}
	c.mu.Unlock()
	return kc, nil
}
