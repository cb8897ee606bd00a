// Package datakey is the envelope encryption that Strait's encryption
// filters share: data-encryption keys (DEKs) made here and wrapped by a
// key-encryption key (KEK) through a KMS, the AEADs of DEKs other instances
// made, and keys derived from a KEK for deterministic encryption.
//
// The record-encryption filter seals whole records with it and the
// field-encryption filter seals fields inside records; each lays out its own
// envelope around what this package returns, and derives its deterministic
// keys under its own label, so neither can open what the other sealed.
//
// It imports only internal/kms.
package datakey

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// AES-GCM parameters.
const (
	NonceLen = 12
	TagLen   = 16
	dekLen   = 32 // AES-256
)

// MaxNameLen bounds a KEK name and a wrapped DEK, so that an envelope can
// hold each behind one length byte.
const MaxNameLen = 255

// DEK is a data-encryption key this instance made, for sealing. Its IV
// counter only goes up and it is never shared with another instance, so no
// two values sealed under it get the same nonce.
type DEK struct {
	kek     string
	wrapped []byte // as the KMS returned it; travels in every envelope
	aead    cipher.AEAD
	next    atomic.Uint64 // the next IV counter to hand out
	limit   uint64        // counters at or past it are not used
	expires time.Time
}

// KEK is the name of the KEK the DEK is wrapped under.
func (d *DEK) KEK() string { return d.kek }

// Wrapped is the DEK as the KMS wrapped it, 1 to MaxNameLen bytes. It is
// not to be changed.
func (d *DEK) Wrapped() []byte { return d.wrapped }

// AEAD seals under the DEK. Seal with Nonce of an IV counter that Reserve
// handed out, once per counter.
func (d *DEK) AEAD() cipher.AEAD { return d.aead }

// reserve takes up to n IV counters and returns the first and how many it
// took; zero when the DEK is used up.
func (d *DEK) reserve(n int) (first uint64, got int) {
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

// Nonce is the GCM nonce of IV counter iv: four zero bytes and the counter,
// big-endian. A DEK's counter only goes up, and a DEK lives in the memory of
// the instance that made it, so a nonce never repeats under a DEK.
func Nonce(iv uint64) [NonceLen]byte {
	var n [NonceLen]byte
	binary.BigEndian.PutUint64(n[4:], iv)
	return n
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
