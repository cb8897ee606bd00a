package kms

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var ctx = context.Background()

// fake is a KMS that counts its calls and answers from answer.
type fake struct {
	calls  atomic.Int64
	answer func(ctx context.Context, op, kek string, arg []byte, version int) ([]byte, int, error)
}

func (f *fake) Name() string { return "fake" }

func (f *fake) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	f.calls.Add(1)
	b, _, err := f.answer(ctx, "wrap", kek, dek, 0)
	return b, err
}

func (f *fake) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	f.calls.Add(1)
	b, _, err := f.answer(ctx, "unwrap", kek, wrapped, 0)
	return b, err
}

func (f *fake) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	f.calls.Add(1)
	return f.answer(ctx, "derive", kek, label, version)
}

// echo answers with a description of the request, so that tests can tell answers apart.
func echo(_ context.Context, op, kek string, arg []byte, version int) ([]byte, int, error) {
	if version == 0 {
		version = 7
	}
	return fmt.Appendf(nil, "%s|%s|%s", op, kek, arg), version, nil
}

// clock is a settable clock for the cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestCache(k KMS, opt CacheOptions) (*cache, *clock) {
	c := NewCache(k, opt).(*cache)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	c.now = clk.now
	return c, clk
}

func mustUnwrap(t *testing.T, k KMS, kek, wrapped string) []byte {
	t.Helper()
	b, err := k.Unwrap(ctx, kek, []byte(wrapped))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantCalls(t *testing.T, f *fake, want int64, when string) {
	t.Helper()
	if got := f.calls.Load(); got != want {
		t.Errorf("%s: %d calls to the KMS, want %d", when, got, want)
	}
}

func TestCacheHits(t *testing.T) {
	f := &fake{answer: echo}
	c, _ := newTestCache(f, CacheOptions{})
	first := mustUnwrap(t, c, "orders", "w1")
	if string(first) != "unwrap|orders|w1" {
		t.Fatalf("unwrap = %q", first)
	}
	first[0] = 'X' // the caller's own copy: changing it must not change the cache
	if got := mustUnwrap(t, c, "orders", "w1"); string(got) != "unwrap|orders|w1" {
		t.Errorf("second unwrap = %q, want the cached answer unchanged", got)
	}
	wantCalls(t, f, 1, "the same unwrap twice")

	// Entries are told apart by KEK and wrapped key, with no way for one pair to pose as another.
	mustUnwrap(t, c, "orders", "w2")
	mustUnwrap(t, c, "orders2", "w1")
	mustUnwrap(t, c, "a", "bc")
	if got := mustUnwrap(t, c, "ab", "c"); string(got) != "unwrap|ab|c" {
		t.Errorf("unwrap(ab, c) = %q: answered from the entry of (a, bc)", got)
	}
	wantCalls(t, f, 5, "five different unwraps")

	// Wrap is never cached.
	for range 2 {
		if _, err := c.Wrap(ctx, "orders", []byte("dek")); err != nil {
			t.Fatal(err)
		}
	}
	wantCalls(t, f, 7, "two wraps")
	if c.Name() != "fake (cached)" {
		t.Errorf("Name() = %q", c.Name())
	}
}

func TestCacheDeriveKey(t *testing.T) {
	f := &fake{answer: echo}
	c, clk := newTestCache(f, CacheOptions{TTL: time.Hour, LatestTTL: time.Minute})
	derive := func(version int, label string) ([]byte, int) {
		t.Helper()
		k, used, err := c.DeriveKey(ctx, "orders", version, []byte(label))
		if err != nil {
			t.Fatal(err)
		}
		return k, used
	}
	k0, used := derive(0, "l1")
	if string(k0) != "derive|orders|l1" || used != 7 {
		t.Fatalf("derive = %q, v%d", k0, used)
	}
	derive(0, "l1")
	derive(3, "l1")
	derive(3, "l1")
	derive(3, "l2")
	wantCalls(t, f, 3, "derive (0,l1) (0,l1) (3,l1) (3,l1) (3,l2)")
	if _, used := derive(3, "l1"); used != 3 {
		t.Errorf("explicit version 3 answered with version %d", used)
	}

	// Version 0 ("the newest") is asked again after LatestTTL, so a rotation is seen; explicit versions are not.
	clk.advance(time.Minute)
	derive(0, "l1")
	derive(3, "l1")
	wantCalls(t, f, 4, "after LatestTTL")
}

func TestCacheTTL(t *testing.T) {
	f := &fake{answer: echo}
	c, clk := newTestCache(f, CacheOptions{TTL: 10 * time.Second})
	mustUnwrap(t, c, "orders", "w1")
	clk.advance(10*time.Second - time.Nanosecond)
	mustUnwrap(t, c, "orders", "w1")
	wantCalls(t, f, 1, "just before the TTL")
	clk.advance(time.Nanosecond)
	mustUnwrap(t, c, "orders", "w1")
	wantCalls(t, f, 2, "at the TTL")
	if n := len(c.entries); n != 1 || c.lru.Len() != 1 {
		t.Errorf("%d entries, %d in the LRU list after an expired entry was replaced; want 1", n, c.lru.Len())
	}
}

func TestCacheNegative(t *testing.T) {
	var err atomic.Value
	err.Store(fmt.Errorf("%w: no KEK orders", ErrKeyNotFound))
	f := &fake{answer: func(context.Context, string, string, []byte, int) ([]byte, int, error) {
		return nil, 0, err.Load().(error)
	}}
	c, clk := newTestCache(f, CacheOptions{NegativeTTL: 5 * time.Second})
	for range 3 {
		if _, e := c.Unwrap(ctx, "orders", []byte("w")); !errors.Is(e, ErrKeyNotFound) || e.Error() != "key not found: no KEK orders" {
			t.Fatalf("err = %v, want the KMS's ErrKeyNotFound", e)
		}
	}
	wantCalls(t, f, 1, "three unwraps of a missing KEK")
	clk.advance(5 * time.Second)
	c.Unwrap(ctx, "orders", []byte("w"))
	wantCalls(t, f, 2, "after NegativeTTL")

	err.Store(fmt.Errorf("%w: tag mismatch", ErrInvalid))
	c.Unwrap(ctx, "orders", []byte("bad"))
	c.Unwrap(ctx, "orders", []byte("bad"))
	wantCalls(t, f, 3, "an invalid wrapped key twice")

	// Retriable errors are never kept: the next call asks again.
	err.Store(fmt.Errorf("%w: connection refused", ErrUnavailable))
	for range 2 {
		if _, e := c.Unwrap(ctx, "orders", []byte("x")); !errors.Is(e, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", e)
		}
	}
	wantCalls(t, f, 5, "ErrUnavailable twice")
}

func TestCacheBounded(t *testing.T) {
	f := &fake{answer: echo}
	c, _ := newTestCache(f, CacheOptions{MaxEntries: 2})
	mustUnwrap(t, c, "k", "a")
	mustUnwrap(t, c, "k", "b")
	mustUnwrap(t, c, "k", "a") // a is now the most recently used
	mustUnwrap(t, c, "k", "c") // evicts b
	wantCalls(t, f, 3, "a b a c")
	mustUnwrap(t, c, "k", "a")
	mustUnwrap(t, c, "k", "c")
	wantCalls(t, f, 3, "a and c again")
	mustUnwrap(t, c, "k", "b")
	wantCalls(t, f, 4, "b after its eviction")
	if n := len(c.entries); n != 2 {
		t.Errorf("%d entries, want at most 2", n)
	}
}

// waitWaiters waits until n callers besides the calling one wait for the flight of the only call in progress.
func waitWaiters(t *testing.T, c *cache, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := -1
		for _, f := range c.flights {
			got = f.waiters
		}
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d callers to wait on one call: %d wait", n, got)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCacheCollapsesConcurrentMisses(t *testing.T) {
	release := make(chan struct{})
	f := &fake{answer: func(ctx context.Context, op, kek string, arg []byte, version int) ([]byte, int, error) {
		<-release
		return echo(ctx, op, kek, arg, version)
	}}
	c, _ := newTestCache(f, CacheOptions{})
	const n = 8
	var wg sync.WaitGroup
	results := make(chan string, n)
	for range n {
		wg.Go(func() {
			b, err := c.Unwrap(ctx, "orders", []byte("w"))
			if err != nil {
				results <- err.Error()
				return
			}
			results <- string(b)
		})
	}
	waitWaiters(t, c, n-1)
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r != "unwrap|orders|w" {
			t.Errorf("a caller got %q", r)
		}
	}
	wantCalls(t, f, 1, fmt.Sprintf("%d concurrent unwraps of one key", n))
	if len(c.flights) != 0 {
		t.Errorf("%d calls still recorded in flight", len(c.flights))
	}
}

// TestCacheCallerGivesUp: when the caller that made the shared call gives up (its context ends), a waiter whose
// context is still live makes the call itself instead of failing with the other caller's context error; a
// waiter may also give up on its own.
func TestCacheCallerGivesUp(t *testing.T) {
	entered := make(chan struct{}, 4)
	f := &fake{}
	f.answer = func(ctx context.Context, op, kek string, arg []byte, version int) ([]byte, int, error) {
		entered <- struct{}{}
		if f.calls.Load() == 1 {
			<-ctx.Done()
			return nil, 0, ctx.Err()
		}
		return echo(ctx, op, kek, arg, version)
	}
	c, _ := newTestCache(f, CacheOptions{})
	first, cancelFirst := context.WithCancel(ctx)
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Unwrap(first, "orders", []byte("w"))
		firstErr <- err
	}()
	<-entered

	impatient, cancelImpatient := context.WithCancel(ctx)
	impatientErr := make(chan error, 1)
	go func() {
		_, err := c.Unwrap(impatient, "orders", []byte("w"))
		impatientErr <- err
	}()
	waitWaiters(t, c, 1)
	cancelImpatient()
	if err := <-impatientErr; !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: err = %v, want context.Canceled", err)
	}

	patient := make(chan []byte, 1)
	go func() {
		b, err := c.Unwrap(ctx, "orders", []byte("w"))
		if err != nil {
			t.Errorf("the patient waiter: %v", err)
		}
		patient <- b
	}()
	waitWaiters(t, c, 2) // the impatient one left, but counts are not decremented
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up: err = %v, want context.Canceled", err)
	}
	if got := <-patient; string(got) != "unwrap|orders|w" {
		t.Errorf("the patient waiter got %q", got)
	}
	wantCalls(t, f, 2, "one call given up, one made again")
}

func TestCachePanicReleasesWaiters(t *testing.T) {
	entered, release := make(chan struct{}, 2), make(chan struct{})
	f := &fake{}
	f.answer = func(ctx context.Context, op, kek string, arg []byte, version int) ([]byte, int, error) {
		if f.calls.Load() == 1 {
			entered <- struct{}{}
			<-release
			panic("boom")
		}
		return echo(ctx, op, kek, arg, version)
	}
	c, _ := newTestCache(f, CacheOptions{})
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		c.Unwrap(ctx, "orders", []byte("w"))
	}()
	<-entered
	waiterErr := make(chan error, 1)
	go func() {
		_, err := c.Unwrap(ctx, "orders", []byte("w"))
		waiterErr <- err
	}()
	waitWaiters(t, c, 1)
	close(release)
	if r := <-panicked; r != "boom" {
		t.Errorf("the calling goroutine recovered %v, want the KMS's panic to go on", r)
	}
	if err := <-waiterErr; err == nil || err.Error() != "fake: a call panicked" {
		t.Errorf("the waiter: err = %v, want one saying the call panicked", err)
	}
	if got := mustUnwrap(t, c, "orders", "w"); string(got) != "unwrap|orders|w" {
		t.Errorf("after the panic: %q", got)
	}
	wantCalls(t, f, 2, "a call that panicked, then one that did not")
}

func TestCacheDefaults(t *testing.T) {
	c := NewCache(&fake{answer: echo}, CacheOptions{TTL: 10 * time.Second}).(*cache)
	want := CacheOptions{MaxEntries: DefaultCacheEntries, TTL: 10 * time.Second, LatestTTL: 10 * time.Second, NegativeTTL: 5 * time.Second}
	if c.opt != want {
		t.Errorf("options = %+v, want %+v (LatestTTL at most TTL)", c.opt, want)
	}
}

func TestCacheConcurrentUse(t *testing.T) {
	f := &fake{answer: echo}
	c, clk := newTestCache(f, CacheOptions{MaxEntries: 16, TTL: time.Second})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				wrapped := fmt.Sprint(i % 40)
				b, err := c.Unwrap(ctx, "orders", []byte(wrapped))
				if err != nil || !bytes.Equal(b, []byte("unwrap|orders|"+wrapped)) {
					t.Errorf("worker %d: unwrap(%s) = %q, %v", w, wrapped, b, err)
					return
				}
				if _, _, err := c.DeriveKey(ctx, "orders", i%3, []byte(wrapped)); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					clk.advance(300 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if n := len(c.entries); n > 16 || c.lru.Len() != n {
		t.Errorf("%d entries (%d in the LRU list), want at most 16 and equal", n, c.lru.Len())
	}
}
