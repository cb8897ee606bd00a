package proxy

import (
	"net"
	"sync"
	"time"
)

// failureBudget slows down guessing: each client address may fail to
// authenticate a few times a minute at the usual failure delay; past its
// budget, every further failure waits a second longer than the one
// before, up to maxPenalty, until a minute passes without one.
type failureBudget struct {
	budget int
	mu     sync.Mutex
	by     map[string]*failures
}

type failures struct {
	count int
	last  time.Time
}

const (
	failureWindow = time.Minute
	maxPenalty    = 30 * time.Second
	// maxTracked bounds the addresses remembered; past it the oldest
	// go first (all of them, as a simple bound).
	maxTracked = 65536
)

// fail records a failure from addr and returns the extra wait it earns.
func (b *failureBudget) fail(addr net.Addr, now time.Time) time.Duration {
	if b == nil || b.budget <= 0 {
		return 0
	}
	host := addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil || len(b.by) >= maxTracked {
		b.by = map[string]*failures{}
	}
	f := b.by[host]
	if f == nil || now.Sub(f.last) > failureWindow {
		f = &failures{}
		b.by[host] = f
	}
	f.count++
	f.last = now
	over := f.count - b.budget
	if over <= 0 {
		return 0
	}
	return min(time.Duration(over)*time.Second, maxPenalty)
}
