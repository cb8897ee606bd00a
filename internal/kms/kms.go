// Package kms is the interface Strait's encryption filters use to protect data-encryption keys (DEKs) with
// key-encryption keys (KEKs) held by a key management system, and a cache in front of it. Implementations:
// internal/kms/vault (a filesystem vault). HashiCorp Vault Transit, AWS KMS, GCP KMS etc. must be addable as
// further implementations without touching the filters.
package kms

import (
	"context"
	"errors"
)

// KMS wraps and unwraps DEKs under named KEKs. Implementations must be safe for concurrent use.
type KMS interface {
	// Wrap encrypts dek under the newest version of the KEK named kek. The returned wrapped key is opaque to the
	// caller, self-describing for the implementation (it records the KEK version), and as short as the
	// implementation can make it (the filesystem vault: at most 48 bytes for a 32-byte DEK).
	Wrap(ctx context.Context, kek string, dek []byte) (wrapped []byte, err error)
	// Unwrap recovers a DEK wrapped by Wrap under the KEK named kek (any version that still exists).
	Unwrap(ctx context.Context, kek string, wrapped []byte) (dek []byte, err error)
	// DeriveKey returns a 32-byte key derived deterministically from a given version of the named KEK and
	// label, the same on every Strait instance and after restarts (e.g. HKDF-SHA256 over
	// the KEK material for the vault; an HMAC operation for KMSs that offer one). It lets a filter encrypt
	// deterministically (equal plaintexts give equal ciphertexts, for compacted record keys). version 0 means
	// the newest; the version used is returned so it can be recorded with the ciphertext.
	DeriveKey(ctx context.Context, kek string, version int, label []byte) (key []byte, usedVersion int, err error)
	// Name describes the KMS for logs ("vault /etc/strait/vault").
	Name() string
}

// Errors. Implementations wrap these (errors.Is) so filters can map them to Kafka error codes.
var (
	ErrKeyNotFound = errors.New("key not found")       // the KEK (or that version) does not exist: not retriable
	ErrUnavailable = errors.New("kms unavailable")     // the KMS cannot be reached now: retriable
	ErrInvalid     = errors.New("wrapped key invalid") // wrapped key malformed or its tag does not verify
)
