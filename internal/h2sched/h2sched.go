// Package h2sched is the HTTP/2 write scheduler of Strait's HTTP servers
// (the LLM gateway and the mock provider): one whose cost per frame does
// not grow with the number of streams open on a connection.
//
// net/http's HTTP/2 server keeps every open stream in a ring and, for each
// frame it writes, walks the ring until it finds a stream with something
// queued (x/net's default RFC 9218 scheduler walks its rings the same
// way). A gateway holds thousands of streams open per client connection
// while providers think, nearly all with nothing to send: with 1,500
// streams per connection that walk was a tenth of the gateway's CPU, and
// it grows with the requests in flight.
//
// This scheduler keeps in its ring only the streams that have frames
// queued, in the order they first had one, and otherwise does what
// net/http's does: frames that belong to no stream (settings, pings,
// window updates, resets) go first; streams take turns a frame at a time;
// a stream that flow control holds back is passed over until its window
// opens; closing a stream drops what it still had queued. Priorities are
// ignored, as net/http ignores them. (x/net's random scheduler is O(1) as
// well, but serving streams in random order lengthened the gateway's tail
// latency whenever frames queued up.)
//
// The scheduler must tell a frame of a stream from a frame of the
// connection, which x/net's FrameWriteRequest knows but does not export
// for a reset of a stream (a RST_STREAM carries a stream ID yet belongs to
// no open stream's queue). Where its layout is not the one this package
// reads, New returns x/net's random scheduler instead.
package h2sched

import (
	"math"
	"reflect"
	"unsafe"

	"golang.org/x/net/http2"
)

// streamOffset is where FrameWriteRequest keeps its stream pointer (nil
// for a frame of the connection), or -1 if it is not found.
var streamOffset = func() uintptr {
	f, ok := reflect.TypeFor[http2.FrameWriteRequest]().FieldByName("stream")
	if !ok || f.Type.Kind() != reflect.Pointer || len(f.Index) != 1 {
		return ^uintptr(0)
	}
	return f.Offset
}()

// Exact reports whether New returns this package's scheduler rather than
// x/net's random one.
func Exact() bool { return streamOffset != ^uintptr(0) }

// New returns a write scheduler for one HTTP/2 connection, for
// http2.Server.NewWriteScheduler.
func New() http2.WriteScheduler {
	if !Exact() {
		return http2.NewRandomWriteScheduler()
	}
	return &scheduler{streams: map[uint32]*queue{}}
}

// ofStream reports whether wr belongs to a stream's queue.
func ofStream(wr *http2.FrameWriteRequest) bool {
	return *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(wr), streamOffset)) != nil
}

type scheduler struct {
	control fifo
	// streams holds the queue of every stream with frames waiting; ready is
	// the same queues in a ring, the next to send at its head.
	streams map[uint32]*queue
	ready   *queue
	free    []*queue
}

// maxFree bounds the queues kept for reuse per connection.
const maxFree = 256

type queue struct {
	id         uint32
	frames     fifo
	prev, next *queue
}

// fifo is a queue of frames that reuses its array once drained.
type fifo struct {
	s    []http2.FrameWriteRequest
	head int
}

func (f *fifo) empty() bool { return f.head == len(f.s) }

func (f *fifo) push(wr http2.FrameWriteRequest) { f.s = append(f.s, wr) }

func (f *fifo) shift() http2.FrameWriteRequest {
	wr := f.s[f.head]
	f.s[f.head] = http2.FrameWriteRequest{}
	f.head++
	if f.head == len(f.s) {
		f.s, f.head = f.s[:0], 0
	}
	return wr
}

func (f *fifo) clear() {
	clear(f.s)
	f.s, f.head = f.s[:0], 0
}

// OpenStream does nothing: a stream takes a place in the ring only while
// it has frames queued.
func (ws *scheduler) OpenStream(uint32, http2.OpenStreamOptions) {}

// CloseStream drops what the stream still had queued: the server closes a
// stream only once nothing more of it may be sent.
func (ws *scheduler) CloseStream(id uint32) {
	if q := ws.streams[id]; q != nil {
		ws.remove(q)
	}
}

// AdjustStream ignores priorities.
func (ws *scheduler) AdjustStream(uint32, http2.PriorityParam) {}

func (ws *scheduler) Push(wr http2.FrameWriteRequest) {
	if !ofStream(&wr) {
		ws.control.push(wr)
		return
	}
	id := wr.StreamID()
	q := ws.streams[id]
	if q == nil {
		if n := len(ws.free); n > 0 {
			q, ws.free = ws.free[n-1], ws.free[:n-1]
		} else {
			q = new(queue)
		}
		q.id = id
		ws.streams[id] = q
		ws.link(q)
	}
	q.frames.push(wr)
}

func (ws *scheduler) Pop() (http2.FrameWriteRequest, bool) {
	if !ws.control.empty() {
		return ws.control.shift(), true
	}
	start := ws.ready
	if start == nil {
		return http2.FrameWriteRequest{}, false
	}
	q := start
	for {
		f := &q.frames.s[q.frames.head]
		consumed, rest, n := f.Consume(math.MaxInt32)
		switch n {
		case 1:
			q.frames.shift()
		case 2:
			*f = rest
		}
		if n > 0 {
			if q.frames.empty() {
				ws.remove(q)
			} else {
				ws.ready = q.next
			}
			return consumed, true
		}
		// Flow control holds this stream back: try the next one.
		q = q.next
		if q == start {
			return http2.FrameWriteRequest{}, false
		}
	}
}

// link puts q at the tail of the ring, just before its head.
func (ws *scheduler) link(q *queue) {
	if ws.ready == nil {
		q.prev, q.next = q, q
		ws.ready = q
		return
	}
	q.prev, q.next = ws.ready.prev, ws.ready
	q.prev.next, q.next.prev = q, q
}

// remove takes q out of the ring and the map and keeps it for reuse.
func (ws *scheduler) remove(q *queue) {
	if q.next == q {
		ws.ready = nil
	} else {
		q.prev.next, q.next.prev = q.next, q.prev
		if ws.ready == q {
			ws.ready = q.next
		}
	}
	q.prev, q.next = nil, nil
	delete(ws.streams, q.id)
	q.frames.clear()
	if len(ws.free) < maxFree {
		ws.free = append(ws.free, q)
	}
}
