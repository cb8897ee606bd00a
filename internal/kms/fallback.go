package kms

import (
	"context"
	"errors"
	"fmt"
)

// WithPrevious returns a KMS that wraps with k alone and unwraps (and derives keys) with k, or with previous
// when k says the key is not its own: not found, or a wrapped key it cannot read. It is how a topic moves from
// one KMS to another without losing its old records: new DEKs are wrapped by the new KMS, and DEKs in records
// written before the move are still unwrapped by the old one, for as long as it is configured.
//
// An unavailable k is not asked around: its answer is unknown, and the caller retries.
func WithPrevious(k, previous KMS) KMS { return &withPrevious{k: k, prev: previous} }

type withPrevious struct{ k, prev KMS }

func (p *withPrevious) Name() string {
	return p.k.Name() + ", then " + p.prev.Name() + " for older keys"
}

func (p *withPrevious) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	return p.k.Wrap(ctx, kek, dek)
}

// notOurs reports whether err says the key belongs to another KMS, or to none.
func notOurs(err error) bool { return errors.Is(err, ErrKeyNotFound) || errors.Is(err, ErrInvalid) }

func (p *withPrevious) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	dek, err := p.k.Unwrap(ctx, kek, wrapped)
	if err == nil || !notOurs(err) {
		return dek, err
	}
	dek, perr := p.prev.Unwrap(ctx, kek, wrapped)
	if perr != nil {
		return nil, previousErr(err, perr)
	}
	return dek, nil
}

func (p *withPrevious) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	key, v, err := p.k.DeriveKey(ctx, kek, version, label)
	if err == nil || !notOurs(err) || version == 0 {
		// Version 0 is the newest key, which is the current KMS's.
		return key, v, err
	}
	key, v, perr := p.prev.DeriveKey(ctx, kek, version, label)
	if perr != nil {
		return nil, 0, previousErr(err, perr)
	}
	return key, v, nil
}

// previousErr is the error when neither KMS could answer. The previous KMS's wins where it is retriable (it
// may yet answer); otherwise the current KMS's, which names the key as configured now.
func previousErr(err, perr error) error {
	if errors.Is(perr, ErrUnavailable) {
		return fmt.Errorf("%w (the current KMS: %v)", perr, err)
	}
	return fmt.Errorf("%w (and the previous KMS: %v)", err, perr)
}
