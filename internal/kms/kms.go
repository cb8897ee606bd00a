// Package kms is the interface Strait's encryption filters use to protect data-encryption keys (DEKs) with
// key-encryption keys (KEKs) held by a key management system, and a cache in front of it. Implementations:
// internal/kms/vault (a filesystem vault) and internal/kms/awskms (AWS KMS). HashiCorp Vault Transit, GCP KMS
// etc. must be addable as further implementations without touching the filters.
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

// Binding is non-secret data a wrapped key is bound to besides its KEK. A KMS that authenticates such data
// with what it wraps (AWS KMS's encryption context) binds it, so that Unwrap succeeds only under the Binding
// Wrap had; one that cannot (the filesystem vault's AES key wrap) ignores it. The filters bind the topic in
// their own associated data either way: this adds the KMS's own check, and its audit log, on top.
type Binding struct {
	// Topic is the topic whose records the DEK seals; empty when the filter does not bind records to their
	// topic (bind_topic: false).
	Topic string
}

type bindingKey struct{}

// WithBinding returns ctx carrying b for the Wrap and Unwrap calls made under it.
func WithBinding(ctx context.Context, b Binding) context.Context {
	if b == (Binding{}) {
		return ctx
	}
	return context.WithValue(ctx, bindingKey{}, b)
}

// BindingFrom returns the Binding ctx carries, the zero Binding when none.
func BindingFrom(ctx context.Context) Binding {
	b, _ := ctx.Value(bindingKey{}).(Binding)
	return b
}

// Errors. Implementations wrap these (errors.Is) so filters can map them to Kafka error codes.
var (
	ErrKeyNotFound = errors.New("key not found")       // the KEK (or that version) does not exist: not retriable
	ErrUnavailable = errors.New("kms unavailable")     // the KMS cannot be reached now: retriable
	ErrInvalid     = errors.New("wrapped key invalid") // wrapped key malformed or its tag does not verify
)
