package proxy

import "sync"

// pipeline is a connection's queue of requests awaiting their answers, in
// the order sent: readRequests pushes, respond pops. It is bounded by
// max_inflight, which is what keeps a slow peer from making the gateway
// hold more, but its ring grows only as far as requests are actually in
// flight at once: a channel of max_inflight entries would reserve about
// 36 KiB per connection (256 of them), idle or not.
type pipeline struct {
	mu      sync.Mutex
	ring    []pending
	head    int
	n       int
	peak    int // the most queued at once in this window of emptyings
	empties int // times the pipeline emptied in this window
	max     int
	closed  bool
	// A side that must wait says so, and the other side's next pop or
	// push leaves one token in the matching channel (capacity 1).
	popWaiting, pushWaiting bool
	popReady, pushReady     chan struct{}
}

// keepRing is the largest ring an emptied pipeline always keeps. A larger
// one goes once the pipeline has emptied shrinkWindow times without
// holding more than a quarter of it, so a connection that pipelined deeply
// for a while gives the memory back after a while of light use, and one
// that does so steadily does not reallocate each time it empties.
const (
	keepRing     = 32
	shrinkWindow = 256
)

func newPipeline(max int) *pipeline {
	return &pipeline{max: max, popReady: make(chan struct{}, 1), pushReady: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// len is how many entries are queued.
func (q *pipeline) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// tryPush queues p unless the pipeline is full.
func (q *pipeline) tryPush(p *pending) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= q.max {
		return false
	}
	if q.n == len(q.ring) {
		ring := make([]pending, min(q.max, max(4, 2*len(q.ring))))
		for i := range q.n {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = *p
	q.n++
	q.peak = max(q.peak, q.n)
	if q.popWaiting {
		q.popWaiting = false
		signal(q.popReady)
	}
	return true
}

// push queues p, waiting for room until done is closed (false).
func (q *pipeline) push(p *pending, done <-chan struct{}) bool {
	for {
		if q.tryPush(p) {
			return true
		}
		q.mu.Lock()
		full := q.n >= q.max
		q.pushWaiting = full
		q.mu.Unlock()
		if !full {
			continue
		}
		select {
		case <-q.pushReady:
		case <-done:
			return false
		}
	}
}

// tryPop takes the oldest entry. ok is false when there is none; closed
// is then set if none will come.
func (q *pipeline) tryPop() (p pending, ok, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		if q.empties++; q.empties >= shrinkWindow {
			if len(q.ring) > keepRing && q.peak <= len(q.ring)/4 {
				q.ring, q.head = nil, 0
			}
			q.peak, q.empties = 0, 0
		}
		return pending{}, false, q.closed
	}
	p = q.ring[q.head]
	q.ring[q.head] = pending{} // let go of what it references
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	if q.pushWaiting {
		q.pushWaiting = false
		signal(q.pushReady)
	}
	return p, true, false
}

// pop takes the oldest entry, waiting for one; false once the pipeline is
// closed and empty.
func (q *pipeline) pop() (pending, bool) {
	for {
		p, ok, closed := q.tryPop()
		if ok {
			return p, true
		}
		if closed {
			return pending{}, false
		}
		q.mu.Lock()
		wait := q.n == 0 && !q.closed
		q.popWaiting = wait
		q.mu.Unlock()
		if wait {
			<-q.popReady
		}
	}
}

// wait blocks until an entry is queued or the pipeline is closed.
func (q *pipeline) wait() {
	q.mu.Lock()
	for q.n == 0 && !q.closed {
		q.popWaiting = true
		q.mu.Unlock()
		<-q.popReady
		q.mu.Lock()
	}
	q.mu.Unlock()
}

// dropRing lets go of the ring if nothing is queued: the connection has
// gone quiet, and the next entry allocates a small one.
func (q *pipeline) dropRing() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		q.ring, q.head, q.peak, q.empties = nil, 0, 0, 0
	}
}

// close says no more entries come; those queued are still popped.
func (q *pipeline) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.popWaiting {
		q.popWaiting = false
		signal(q.popReady)
	}
}
