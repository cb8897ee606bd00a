package filter

import (
	"context"
	"sync"
	"sync/atomic"
)

// PerRequest holds what a filter decided on a request and must apply to
// its response (partitions it refused, to add to the broker's answer), per
// connection and by correlation id. Requests and responses run on
// different goroutines; PerRequest is safe for that.
//
// Len lets WantsResponse stay cheap: while nothing waits on any
// connection, the filter need not see responses at all. Entries of a
// connection that ends before its responses come are dropped, so they do
// not keep responses off the fast path.
//
// Each PerRequest is its own key in the connection's state, so two filter
// instances in one chain do not see each other's entries.
type PerRequest[T any] struct {
	n atomic.Int64
}

type perRequestState[T any] struct {
	mu     sync.Mutex
	byCorr map[int32][]T
}

// Len is the number of entries waiting, over all connections.
func (p *PerRequest[T]) Len() int64 { return p.n.Load() }

// Add keeps items for the response to request corr on c's connection.
func (p *PerRequest[T]) Add(c *Context, corr int32, items ...T) {
	if len(items) == 0 {
		return
	}
	st := p.state(c, true)
	st.mu.Lock()
	st.byCorr[corr] = append(st.byCorr[corr], items...)
	st.mu.Unlock()
	p.n.Add(int64(len(items)))
}

// Take returns and forgets what was kept for the response to request corr.
func (p *PerRequest[T]) Take(c *Context, corr int32) []T {
	st := p.state(c, false)
	if st == nil {
		return nil
	}
	st.mu.Lock()
	items, ok := st.byCorr[corr]
	delete(st.byCorr, corr)
	st.mu.Unlock()
	if ok {
		p.n.Add(-int64(len(items)))
	}
	return items
}

// state returns the connection's entries, making them on first use (on
// the request goroutine, the only one that adds).
func (p *PerRequest[T]) state(c *Context, create bool) *perRequestState[T] {
	if st, ok := c.Value(p).(*perRequestState[T]); ok || !create {
		return st
	}
	st := &perRequestState[T]{byCorr: map[int32][]T{}}
	c.SetValue(p, st)
	if c.Ctx != nil {
		context.AfterFunc(c.Ctx, func() {
			st.mu.Lock()
			n := 0
			for _, items := range st.byCorr {
				n += len(items)
			}
			clear(st.byCorr)
			st.mu.Unlock()
			p.n.Add(-int64(n))
		})
	}
	return st
}
