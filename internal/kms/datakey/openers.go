package datakey

import (
	"context"
	"crypto/cipher"
	"fmt"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// Openers caches the AEADs of DEKs by KEK name and wrapped DEK, so a DEK is
// unwrapped by the KMS once, not once per value. Bounded: when full, an
// arbitrary entry goes. It is safe for concurrent use.
type Openers struct {
	k       kms.KMS
	timeout time.Duration // bounds each KMS call

	mu sync.RWMutex
	m  map[string]cipher.AEAD
}

const maxOpeners = 8192

// NewOpeners returns an empty cache in front of k.
func NewOpeners(k kms.KMS, timeout time.Duration) *Openers {
	return &Openers{k: k, timeout: timeout, m: map[string]cipher.AEAD{}}
}

// AppendOpenerKey appends the cache key of a DEK: the KEK name's length and
// name, then the wrapped DEK. The KEK name is at most MaxNameLen bytes.
func AppendOpenerKey(dst, kek, wrapped []byte) []byte {
	dst = append(dst, byte(len(kek)))
	dst = append(dst, kek...)
	return append(dst, wrapped...)
}

// Add caches the AEAD of a DEK this instance made (Ring's OnNew), so that
// the instance opens what it sealed without asking the KMS to unwrap it.
func (o *Openers) Add(d *DEK) {
	o.put(AppendOpenerKey(nil, []byte(d.kek), d.wrapped), d.aead)
}

func (o *Openers) put(key []byte, a cipher.AEAD) {
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

// Get returns the AEAD of the DEK wrapped under kek; key is its
// AppendOpenerKey, which the caller keeps to know the DEK again. The errors
// are the KMS's, marked kms.ErrUnavailable when the call timed out, or
// kms.ErrInvalid when the KMS unwrapped a key of the wrong length.
func (o *Openers) Get(ctx context.Context, key, kek, wrapped []byte) (cipher.AEAD, error) {
	return o.GetBound(ctx, key, kek, wrapped, kms.Binding{})
}

// GetBound is Get for a DEK wrapped under binding b (Ring.ReserveBound). The
// binding is not part of the cache key: it is checked by the KMS when the DEK
// is first unwrapped, and by the filter's own associated data for every
// value after.
func (o *Openers) GetBound(ctx context.Context, key, kek, wrapped []byte, b kms.Binding) (cipher.AEAD, error) {
	o.mu.RLock()
	a, ok := o.m[string(key)]
	o.mu.RUnlock()
	if ok {
		return a, nil
	}
	cctx, cancel := context.WithTimeout(kms.WithBinding(ctx, b), o.timeout)
	defer cancel()
	dek, err := o.k.Unwrap(cctx, string(kek), wrapped)
	if err != nil {
		return nil, unavailableIfTimedOut(cctx, err)
	}
	defer clear(dek)
	if len(dek) != dekLen {
		return nil, fmt.Errorf("%w: the KMS unwrapped a %d-byte data key, want %d", kms.ErrInvalid, len(dek), dekLen)
	}
	if a, err = newAEAD(dek); err != nil {
		return nil, err
	}
	o.put(key, a)
	return a, nil
}
