// Package membudget bounds how many bytes a process holds at once for one
// purpose, such as decompressed record batches: a counting semaphore over
// bytes, shared by every connection. A caller acquires what it is about to
// hold and releases it when done; when the budget is spent, callers wait in
// arrival order, each for as long as its context allows.
//
// Waiters are served first come, first served, so that a large request is
// not passed over forever by a stream of small ones; a request larger than
// the whole budget is refused at once rather than left waiting for bytes
// that can never be free.
package membudget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrOverSize is returned, wrapped with the sizes, by Acquire for a request
// larger than the whole budget.
var ErrOverSize = errors.New("request larger than the whole memory budget")

// Budget is a number of bytes shared by its callers. The zero value is not
// usable: make one with New. Its methods are safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	peak    int64
	waiters []*waiter // in arrival order

	idle      idleHook
	high      int64       // the most held at once since the idle hook last ran
	idleTimer *time.Timer // armed while the hook waits to run
}

// idleHook is what OnIdle set.
type idleHook struct {
	min          int64
	delay, every time.Duration
	fn           func()
	last         time.Time
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are the waiter's
}

// New returns a budget of size bytes.
func New(size int64) *Budget { return &Budget{size: max(size, 0)} }

// Size is the budget in bytes.
func (b *Budget) Size() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// InUse is how many bytes are held now.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes held at once since the budget was made.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// GrowTo raises the budget to size bytes, if it is smaller, and lets in the
// waiters that now fit. It never lowers it: bytes already held cannot be
// taken back.
func (b *Budget) GrowTo(size int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if size > b.size {
		b.size = size
		b.grantLocked()
	}
}

// OnIdle has fn run, on a goroutine of its own, once nothing has been held
// for delay after at least min bytes were held at once, and at most once
// per every. A caller uses it to hand memory back once a burst is over:
// the bytes a budget counts are usually freed to the garbage collector,
// which may not run again for minutes in a process that has gone quiet.
func (b *Budget) OnIdle(min int64, delay, every time.Duration, fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idle = idleHook{min: min, delay: delay, every: every, fn: fn}
}

// TryAcquire takes n bytes if they are free now and nobody is waiting
// before it, and reports whether it did.
func (b *Budget) TryAcquire(n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.takeLocked(n)
		return true
	}
	return false
}

// Acquire takes n bytes, waiting for them while ctx allows. It fails at once,
// with an error wrapping ErrOverSize, for n larger than the whole budget;
// and with ctx's error when ctx ends first, holding nothing then.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	if n > b.size {
		size := b.size
		b.mu.Unlock()
		return fmt.Errorf("%w: %d bytes asked, %d in all", ErrOverSize, n, size)
	}
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.takeLocked(n)
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while ctx ended: give the bytes back, so that the
		// caller, which sees an error, has nothing to release.
		b.used -= n
		b.grantLocked()
		b.armIdleLocked()
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		// A large waiter leaving the head may let smaller ones in.
		b.grantLocked()
	}
	return ctx.Err()
}

// Release gives back n bytes taken by Acquire or TryAcquire.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		// Releasing more than was taken is a bug in the caller; the
		// budget stays usable rather than growing without bound.
		b.used = 0
	}
	b.grantLocked()
	b.armIdleLocked()
}

// armIdleLocked starts the wait before the idle hook when the budget has
// just emptied after a burst.
func (b *Budget) armIdleLocked() {
	h := &b.idle
	if h.fn == nil || b.used != 0 || b.high < h.min || b.idleTimer != nil {
		return
	}
	wait := max(h.delay, time.Until(h.last.Add(h.every)))
	b.idleTimer = time.AfterFunc(wait, func() {
		b.mu.Lock()
		b.idleTimer = nil
		if b.used != 0 {
			// Busy again: the next time it empties re-arms.
			b.mu.Unlock()
			return
		}
		b.high = 0
		h.last = time.Now()
		fn := h.fn
		b.mu.Unlock()
		fn()
	})
}

func (b *Budget) takeLocked(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
	b.high = max(b.high, b.used)
}

// grantLocked hands bytes to waiters, in order, while the first one fits.
func (b *Budget) grantLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.size {
			return
		}
		b.takeLocked(w.n)
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}
