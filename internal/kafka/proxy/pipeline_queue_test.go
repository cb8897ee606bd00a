package proxy

import (
	"runtime"
	"testing"

	"github.com/straitgw/strait/internal/kafka/filter"
)

func TestPipelineOrderBoundAndClose(t *testing.T) {
	q := newPipeline(3)
	for i := range int32(3) {
		if !q.tryPush(&pending{hdr: hdrOf(i)}) {
			t.Fatalf("push %d refused below the bound", i)
		}
	}
	if q.tryPush(&pending{hdr: hdrOf(3)}) {
		t.Fatal("a full pipeline took a fourth entry")
	}
	pushed := make(chan bool)
	go func() { pushed <- q.push(&pending{hdr: hdrOf(3)}, make(chan struct{})) }()
	// push says it waits before it does; until then it must not return.
	for waiting := false; !waiting; {
		select {
		case <-pushed:
			t.Fatal("push did not wait for room")
		default:
		}
		q.mu.Lock()
		waiting = q.pushWaiting
		q.mu.Unlock()
		runtime.Gosched()
	}
	select {
	case <-pushed:
		t.Fatal("push did not wait for room")
	default:
	}
	for want := range int32(4) {
		p, ok := q.pop()
		if !ok || p.hdr.CorrelationID != want {
			t.Fatalf("pop = %d, %v; want %d", p.hdr.CorrelationID, ok, want)
		}
		if want == 0 && !<-pushed {
			t.Fatal("push gave up")
		}
	}
	popped := make(chan bool)
	go func() { _, ok := q.pop(); popped <- ok }()
	q.close()
	if <-popped {
		t.Fatal("pop of a closed, empty pipeline returned an entry")
	}
	done := make(chan struct{})
	close(done)
	q2 := newPipeline(1)
	q2.tryPush(&pending{})
	if q2.push(&pending{}, done) {
		t.Fatal("push into a full pipeline of a closed connection succeeded")
	}
}

// The ring grows with what is in flight, not to max_inflight, and a deep
// ring goes after a window of light use.
func TestPipelineRingGrowsAndShrinks(t *testing.T) {
	q := newPipeline(256)
	q.tryPush(&pending{})
	if len(q.ring) > 4 {
		t.Fatalf("one entry took a ring of %d", len(q.ring))
	}
	q.pop()
	for i := range 200 {
		q.tryPush(&pending{hdr: hdrOf(int32(i))})
	}
	for range 200 {
		q.pop()
	}
	if len(q.ring) < 200 {
		t.Fatalf("ring of %d for 200 in flight", len(q.ring))
	}
	for range 2*shrinkWindow + 1 { // the window the burst was in, then one of light use
		q.tryPush(&pending{})
		q.tryPop()
		q.tryPop()
	}
	if len(q.ring) > keepRing {
		t.Fatalf("ring of %d kept after a window of one entry at a time", len(q.ring))
	}
}

func hdrOf(corr int32) filter.Header { return filter.Header{CorrelationID: corr} }
