package membudget

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcquireRelease(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if b.TryAcquire(50) {
		t.Fatal("TryAcquire took 50 of the 40 bytes left")
	}
	if !b.TryAcquire(40) {
		t.Fatal("TryAcquire refused the 40 bytes left")
	}
	if got := b.InUse(); got != 100 {
		t.Fatalf("InUse = %d, want 100", got)
	}
	b.Release(100)
	if got := b.InUse(); got != 0 {
		t.Fatalf("InUse after release = %d, want 0", got)
	}
	if got := b.Peak(); got != 100 {
		t.Fatalf("Peak = %d, want 100", got)
	}
}

// A request larger than the whole budget fails at once instead of waiting
// for bytes that can never be free.
func TestOverSizeFailsAtOnce(t *testing.T) {
	b := New(100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := b.Acquire(ctx, 101)
	if !errors.Is(err, ErrOverSize) {
		t.Fatalf("Acquire(101) of 100 = %v, want ErrOverSize", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Acquire waited for the context instead of failing at once")
	}
	if b.InUse() != 0 {
		t.Fatalf("a refused request holds %d bytes", b.InUse())
	}
}

// A waiter whose context ends gets an error and holds nothing, and does not
// keep later waiters from bytes that fit.
func TestWaitBoundedByContext(t *testing.T) {
	b := New(100)
	if err := b.Acquire(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(ctx, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v, want DeadlineExceeded", err)
	}
	if got := b.InUse(); got != 80 {
		t.Fatalf("InUse = %d after a timed-out wait, want 80", got)
	}
	if !b.TryAcquire(20) {
		t.Fatal("a timed-out waiter still blocks the queue")
	}
}

// Waiters are served in arrival order: a large one is not passed over by
// small ones that arrive after it.
func TestFirstComeFirstServed(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, 100); err != nil {
		t.Fatal(err)
	}
	bigDone := make(chan struct{})
	go func() {
		if err := b.Acquire(ctx, 90); err != nil {
			t.Error(err)
		}
		close(bigDone)
	}()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == 1 })
	if b.TryAcquire(5) {
		t.Fatal("TryAcquire jumped the queue")
	}
	smallDone := make(chan struct{})
	go func() {
		if err := b.Acquire(ctx, 5); err != nil {
			t.Error(err)
		}
		close(smallDone)
	}()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == 2 })
	b.Release(100)
	<-bigDone
	<-smallDone
	if got := b.InUse(); got != 95 {
		t.Fatalf("InUse = %d, want 95", got)
	}
}

func TestGrowToLetsWaitersIn(t *testing.T) {
	b := New(10)
	if err := b.Acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Acquire(context.Background(), 10) }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == 1 })
	b.GrowTo(5) // never lowers
	if b.Size() != 10 {
		t.Fatalf("GrowTo(5) changed the size to %d", b.Size())
	}
	b.GrowTo(20)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Under contention the bytes held never exceed the budget, and every
// caller eventually gets its bytes.
func TestNeverOverBudget(t *testing.T) {
	const size = 1000
	b := New(size)
	var held atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				n := int64(1 + (i*37+j*11)%400)
				if err := b.Acquire(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				if h := held.Add(n); h > size {
					over.Store(h)
				}
				held.Add(-n)
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	if o := over.Load(); o != 0 {
		t.Fatalf("callers held %d bytes of a %d-byte budget at once", o, size)
	}
	if b.Peak() > size || b.InUse() != 0 {
		t.Fatalf("peak %d, in use %d after all released (budget %d)", b.Peak(), b.InUse(), size)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// The idle hook runs once a burst that held at least its minimum is over,
// not after small use, and not more often than asked.
func TestOnIdle(t *testing.T) {
	b := New(1000)
	const every = 200 * time.Millisecond
	var runs atomic.Int64
	var lasts []time.Time // when each run started, as the budget records it
	b.OnIdle(500, 10*time.Millisecond, every, func() {
		b.mu.Lock()
		lasts = append(lasts, b.idle.last)
		b.mu.Unlock()
		runs.Add(1)
	})
	ctx := context.Background()
	armed := func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.idleTimer != nil }

	take := func(n int64) {
		if err := b.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
		b.Release(n)
	}
	take(100) // small: no hook
	if armed() {
		t.Fatal("the hook is due after use under its minimum")
	}

	// A burst: two holders, the hook waits for both to finish.
	if err := b.Acquire(ctx, 300); err != nil {
		t.Fatal(err)
	}
	take(400)
	if armed() {
		t.Fatal("the hook is due while bytes are held")
	}
	b.Release(300)
	waitFor(t, func() bool { return runs.Load() == 1 })

	// A second burst right after: at most once per every.
	take(600)
	waitFor(t, func() bool { return runs.Load() == 2 })
	b.mu.Lock()
	gap := lasts[1].Sub(lasts[0])
	b.mu.Unlock()
	if gap < every {
		t.Errorf("the hook ran again %s after the last run, sooner than once per %s", gap, every)
	}
	take(100)
	if armed() || runs.Load() != 2 {
		t.Errorf("the hook is due again (ran %d times) after small use since the last run", runs.Load())
	}
}
