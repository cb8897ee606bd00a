package datakey

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

// Ring holds the current DEK of each KEK (and binding: a KEK shared by
// several topics has a DEK per topic when the filter binds records to their
// topic, as the KMS binds each wrapped DEK to one) and makes new ones: after
// MaxRecords values, after MaxAge, or when none exists yet. Concurrent
// callers that need a new DEK for the same KEK share one KMS call. It is safe
// for concurrent use.
type Ring struct {
	k          kms.KMS
	maxRecords uint64
	maxAge     time.Duration
	timeout    time.Duration
	now        func() time.Time
	onNew      func(d *DEK)

	mu    sync.Mutex
	slots map[slotKey]*slot
}

// slotKey names a slot: a KEK and the binding its DEKs are wrapped under.
type slotKey struct {
	kek   string
	topic string
}

// RingOptions configure a Ring.
type RingOptions struct {
	KMS        kms.KMS
	MaxRecords uint64        // IV counters a DEK hands out before it is replaced
	MaxAge     time.Duration // how long a DEK is used before it is replaced
	Timeout    time.Duration // bounds each KMS call
	Now        func() time.Time
	// OnNew, if set, learns each DEK the ring makes, after it is in use:
	// the opening side of a filter caches it (Openers.Add).
	OnNew func(d *DEK)
}

// NewRing returns a ring with no DEK yet. A nil Now is time.Now.
func NewRing(o RingOptions) *Ring {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Ring{k: o.KMS, maxRecords: o.MaxRecords, maxAge: o.MaxAge, timeout: o.Timeout, now: o.Now,
		onNew: o.OnNew, slots: map[slotKey]*slot{}}
}

// negativeTTL is how long a KEK the KMS says does not exist is taken as
// missing, so that a stream of produces to its topic is not a stream of KMS
// calls.
const negativeTTL = 5 * time.Second

// maxSlots bounds the KEKs the ring tracks. KEK names can be built from
// topic names, which clients choose.
const maxSlots = 4096

type slot struct {
	cur atomic.Pointer[DEK]

	mu           sync.Mutex
	flight       *flight   // a new DEK being made
	missingUntil time.Time // the KEK was missing at the last try
	missingErr   error
}

type flight struct {
	done chan struct{}
	d    *DEK
	err  error
}

// slot returns the slot of kek, making it if needed.
func (r *Ring) slot(kek slotKey) *slot {
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

// Reserve returns a DEK of kek with up to n (at least 1) IV counters taken
// from it: first, first+1, ... first+got-1. The errors wrap the KMS's: a
// missing KEK (kms.ErrKeyNotFound) is taken as missing, without asking the
// KMS again, for a few seconds.
func (r *Ring) Reserve(ctx context.Context, kek string, n int) (d *DEK, first uint64, got int, err error) {
	return r.ReserveBound(ctx, kek, kms.Binding{}, n)
}

// ReserveBound is Reserve for a DEK wrapped under binding b (kms.Binding):
// only what is sealed for that binding may use it, since unwrapping it takes
// the same binding.
func (r *Ring) ReserveBound(ctx context.Context, kek string, b kms.Binding, n int) (d *DEK, first uint64, got int, err error) {
	s := r.slot(slotKey{kek, b.Topic})
	// A fresh DEK has room for at least one value, and its maker takes its
	// counters first, so every round serves some caller; but callers that
	// keep coming back (one per record) can win round after round while
	// another loses, when DEKs hold few counters. So the bound is the
	// caller's context, and a count far beyond any real contention.
	for range maxRounds {
		d = s.cur.Load()
		if d != nil && r.now().Before(d.expires) {
			if first, got = d.reserve(n); got > 0 {
				return d, first, got, nil
			}
		}
		var made bool
		if d, made, first, got, err = r.renew(ctx, s, kek, b, d, n); err != nil {
			return nil, 0, 0, err
		}
		if made {
			return d, first, got, nil
		}
		if first, got = d.reserve(n); got > 0 {
			return d, first, got, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, 0, fmt.Errorf("%w: reserving IVs for KEK %q: %w", kms.ErrUnavailable, kek, err)
		}
	}
	return nil, 0, 0, fmt.Errorf("%w: could not reserve IVs for KEK %q", kms.ErrUnavailable, kek)
}

// maxRounds bounds Reserve's attempts.
const maxRounds = 10000

// renew replaces old, the slot's DEK, with a new one unless another caller
// already has. The caller that makes the new DEK takes its n counters from
// it before anyone else can see it (made is then true): however many
// callers race for DEKs that hold only a few counters, each round serves
// one of them, so none waits forever.
func (r *Ring) renew(ctx context.Context, s *slot, kek string, b kms.Binding, old *DEK, n int) (d *DEK, made bool, first uint64, got int, err error) {
	s.mu.Lock()
	if d := s.cur.Load(); d != old && d != nil && r.now().Before(d.expires) {
		s.mu.Unlock()
		return d, false, 0, 0, nil
	}
	if r.now().Before(s.missingUntil) {
		err := s.missingErr
		s.mu.Unlock()
		return nil, false, 0, 0, err
	}
	f := s.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flight = f
		s.mu.Unlock()
		// The call must not end with the first caller's connection:
		// others wait for it. The timeout bounds it instead.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
		f.d, f.err = r.make(kms.WithBinding(cctx, b), kek)
		cancel()
		s.mu.Lock()
		s.flight = nil
		if f.err == nil {
			first, got = f.d.reserve(n)
			s.cur.Store(f.d)
		} else if errors.Is(f.err, kms.ErrKeyNotFound) {
			s.missingUntil, s.missingErr = r.now().Add(negativeTTL), f.err
		}
		s.mu.Unlock()
		close(f.done)
		if f.err == nil && r.onNew != nil {
			r.onNew(f.d)
		}
		return f.d, f.err == nil && got > 0, first, got, f.err
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.d, false, 0, 0, f.err
	case <-ctx.Done():
		return nil, false, 0, 0, fmt.Errorf("%w: waiting for a new data key for KEK %q: %w", kms.ErrUnavailable, kek, ctx.Err())
	}
}

// make generates a DEK and has the KMS wrap it.
func (r *Ring) make(ctx context.Context, kek string) (*DEK, error) {
	key := make([]byte, dekLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("%w: generating a data key: %w", kms.ErrUnavailable, err)
	}
	defer clear(key)
	wrapped, err := r.k.Wrap(ctx, kek, key)
	if err != nil {
		return nil, unavailableIfTimedOut(ctx, err)
	}
	if len(wrapped) == 0 || len(wrapped) > MaxNameLen {
		return nil, fmt.Errorf("%w: the KMS wrapped a data key into %d bytes; the envelope holds 1 to %d", kms.ErrInvalid, len(wrapped), MaxNameLen)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	d := &DEK{kek: kek, wrapped: wrapped, aead: aead, limit: r.maxRecords, expires: r.now().Add(r.maxAge)}
	return d, nil
}

// unavailableIfTimedOut marks err, a KMS call's, retriable when the call's
// context ended: whatever the KMS said, it was cut short.
func unavailableIfTimedOut(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, kms.ErrUnavailable) {
		return fmt.Errorf("%w: %w", kms.ErrUnavailable, err)
	}
	return err
}
