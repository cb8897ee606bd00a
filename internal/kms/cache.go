package kms

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
)

// CacheOptions bound a cache made by NewCache. Zero values take the defaults.
type CacheOptions struct {
	// MaxEntries bounds the entries held (Unwrap and DeriveKey results and negative answers together); the least
	// recently used entry goes first. Default 10000 (about 2 MB with 32-byte keys and short labels).
	MaxEntries int
	// TTL is how long an answer is reused. It bounds how long key material stays in memory, and how long a
	// KEK version removed from the KMS keeps working here. Default 10 minutes.
	TTL time.Duration
	// LatestTTL is how long a DeriveKey answer for version 0 ("the newest") is reused, at most TTL. It bounds how
	// long after a rotation new deterministic ciphertexts still use the previous version. Default 30 seconds.
	LatestTTL time.Duration
	// NegativeTTL is how long a "key not found" or "wrapped key invalid" answer is reused, so that a stream of
	// records naming a missing KEK does not become a stream of KMS calls. Default 5 seconds.
	NegativeTTL time.Duration
}

// Cache defaults.
const (
	DefaultCacheEntries     = 10000
	DefaultCacheTTL         = 10 * time.Minute
	DefaultCacheLatestTTL   = 30 * time.Second
	DefaultCacheNegativeTTL = 5 * time.Second
)

// maxFlightRetries bounds how often a caller whose shared call failed only because the caller that made it
// gave up (its context ended) tries again itself.
const maxFlightRetries = 3

// NewCache returns a KMS that answers Unwrap (by KEK name, Binding and wrapped key) and DeriveKey (by KEK name, version
// and label) from memory when it can, and asks k otherwise. Concurrent misses for the same entry share one call
// to k. Wrap always goes to k: every Wrap wraps a fresh DEK, so there is nothing to reuse (filters cache their
// own DEKs). Errors other than ErrKeyNotFound and ErrInvalid (ErrUnavailable, context errors) are never cached.
// Slices returned are the caller's own.
func NewCache(k KMS, opt CacheOptions) KMS {
	if opt.MaxEntries <= 0 {
		opt.MaxEntries = DefaultCacheEntries
	}
	if opt.TTL <= 0 {
		opt.TTL = DefaultCacheTTL
	}
	if opt.LatestTTL <= 0 {
		opt.LatestTTL = DefaultCacheLatestTTL
	}
	opt.LatestTTL = min(opt.LatestTTL, opt.TTL)
	if opt.NegativeTTL <= 0 {
		opt.NegativeTTL = DefaultCacheNegativeTTL
	}
	return &cache{
		k:       k,
		opt:     opt,
		now:     time.Now,
		entries: map[string]*list.Element{},
		lru:     list.New(),
		flights: map[string]*flight{},
	}
}

type cache struct {
	k   KMS
	opt CacheOptions
	now func() time.Time // replaced in tests

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	lru     *list.List               // front: most recently used
	flights map[string]*flight       // calls to k in progress, by entry key
}

type entry struct {
	key     string
	val     []byte // the DEK or the derived key
	version int    // DeriveKey's usedVersion
	err     error  // a negative answer
	expires time.Time
}

// flight is one call to k that concurrent misses for the same key wait for.
type flight struct {
	done    chan struct{}
	waiters int // callers waiting besides the one calling; read by tests
	val     []byte
	version int
	err     error
}

func (c *cache) Name() string { return c.k.Name() + " (cached)" }

func (c *cache) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	return c.k.Wrap(ctx, kek, dek)
}

func (c *cache) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	var buf [128]byte
	key := appendKey(buf[:0], 'u', kek)
	// The binding is part of the answer: a KMS that checks it would refuse the same wrapped key under another.
	topic := BindingFrom(ctx).Topic
	key = binary.AppendUvarint(key, uint64(len(topic)))
	key = append(key, topic...)
	key = append(key, wrapped...)
	val, _, err := c.get(ctx, key, c.opt.TTL, func(ctx context.Context) ([]byte, int, error) {
		dek, err := c.k.Unwrap(ctx, kek, wrapped)
		return dek, 0, err
	})
	return val, err
}

func (c *cache) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	var buf [128]byte
	key := appendKey(buf[:0], 'd', kek)
	key = binary.AppendVarint(key, int64(version))
	key = append(key, label...)
	ttl := c.opt.TTL
	if version == 0 {
		ttl = c.opt.LatestTTL
	}
	return c.get(ctx, key, ttl, func(ctx context.Context) ([]byte, int, error) {
		return c.k.DeriveKey(ctx, kek, version, label)
	})
}

// appendKey starts an entry key: the kind of answer, then the KEK name with its length, so that no two
// (name, rest) pairs give the same key.
func appendKey(b []byte, kind byte, kek string) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(kek)))
	return append(b, kek...)
}

// get answers from the cache or, on a miss, calls fetch once for all concurrent callers asking for key, and
// keeps its answer for ttl (or NegativeTTL for ErrKeyNotFound and ErrInvalid).
func (c *cache) get(ctx context.Context, key []byte, ttl time.Duration,
	fetch func(context.Context) ([]byte, int, error)) ([]byte, int, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		now := c.now()
		if el, ok := c.entries[string(key)]; ok { // no allocation: the compiler reads key in place
			e := el.Value.(*entry)
			if now.Before(e.expires) {
				c.lru.MoveToFront(el)
				val, version, err := clone(e.val), e.version, e.err
				c.mu.Unlock()
				return val, version, err
			}
			c.remove(el)
		}
		if f, ok := c.flights[string(key)]; ok {
			f.waiters++
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
			if isContextErr(f.err) && ctx.Err() == nil && attempt < maxFlightRetries {
				continue // the caller that made the call gave up; this one has not
			}
			return clone(f.val), f.version, f.err
		}
		f := &flight{done: make(chan struct{})}
		skey := string(key)
		c.flights[skey] = f
		c.mu.Unlock()
		finished := false
		defer func() {
			if !finished { // fetch panicked: release the waiters, then let the panic go on
				c.finish(skey, f, ttl, nil, 0, fmt.Errorf("%s: a call panicked", c.k.Name()))
			}
		}()
		val, version, err := fetch(ctx)
		finished = true
		c.finish(skey, f, ttl, val, version, err)
		return clone(f.val), f.version, f.err
	}
}

// finish records the answer of flight f, caches it, and wakes the callers waiting for it.
func (c *cache) finish(key string, f *flight, ttl time.Duration, val []byte, version int, err error) {
	f.val, f.version, f.err = val, version, err
	c.mu.Lock()
	delete(c.flights, key)
	switch {
	case err == nil:
		c.add(&entry{key: key, val: val, version: version, expires: c.now().Add(ttl)})
	case errors.Is(err, ErrKeyNotFound) || errors.Is(err, ErrInvalid):
		c.add(&entry{key: key, err: err, expires: c.now().Add(min(c.opt.NegativeTTL, ttl))})
	}
	c.mu.Unlock()
	close(f.done)
}

// add stores e as the most recently used entry, evicting the least recently used beyond MaxEntries. c.mu held.
func (c *cache) add(e *entry) {
	if el, ok := c.entries[e.key]; ok {
		c.remove(el)
	}
	c.entries[e.key] = c.lru.PushFront(e)
	for c.lru.Len() > c.opt.MaxEntries {
		c.remove(c.lru.Back())
	}
}

// remove drops an entry. c.mu held.
func (c *cache) remove(el *list.Element) {
	c.lru.Remove(el)
	delete(c.entries, el.Value.(*entry).key)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
