package mockllm

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitgw/strait/internal/rawsock"
)

// The lean engine serves prior-knowledge cleartext HTTP/2, the way load
// generators reach the mock. A mock that costs as much CPU per request as
// the gateway in front of it hides the gateway, and with x/net's server
// most of a request's cost is not the answer but the machinery around it:
// a goroutine per stream, frames handed between the connection's reader,
// its serve loop, the handler and the writers, a timer and a parked
// goroutine per request for the latency, and the collector scanning all
// those stacks. So the engine, like the benchmark generator's h2c client,
// drives every connection from one goroutine: while anything is in flight
// it wakes every pollEvery, reads whatever each socket holds without
// blocking (the sockets are outside the runtime's poller), handles the
// frames, sends what has fallen due, and writes each connection's frames in
// one system call; when nothing is, it blocks in epoll until a socket has
// input. A chat completion or message answered without an injected fault,
// as JSON or as a stream, never leaves the loop: its latency and its
// stream's deltas are deadlines in one heap, one entry for the answers
// started in the same poll with the same schedule. Everything else
// (other paths, errors, faults, rate-limit windows) runs the ordinary
// handler on a goroutine of its own behind a small ResponseWriter whose
// output the loop sends, so behaviour is the same whatever the options.
//
// The price is resolution: a request is seen up to pollEvery after it
// arrives and an answer leaves up to pollEvery after it is due.

// pollEvery is how often the engine looks at its connections while
// anything is in flight.
const pollEvery = 2 * time.Millisecond

const (
	// streamWindow is the receive window advertised for each stream:
	// request bodies larger than it wait for WINDOW_UPDATEs, sent as the
	// body is read.
	streamWindow = 1 << 20
	// connWindow is the connection's receive window, topped up once
	// connRefill bytes were read.
	connWindow = 1 << 30
	connRefill = 1 << 24
	// maxHeaderList bounds a request's header list, as net/http's
	// DefaultMaxHeaderBytes does; a bigger one gets a 431.
	maxHeaderList = 1 << 20
	// maxReadFrame is the frame size the engine accepts: HTTP/2's
	// default, which it does not raise.
	maxReadFrame = 16384
	// maxUnparsed bounds the bytes held waiting for the end of a frame
	// (a header block can span many CONTINUATION frames).
	maxUnparsed = 2*maxHeaderList + 64<<10
	// maxUnsent bounds the bytes queued for a client that does not read.
	maxUnsent = 64 << 20
	// leanIdle closes a connection with no stream open for this long, as
	// net/http's IdleTimeout does.
	leanIdle = 5 * time.Minute
)

// engine is the lean HTTP/2 server of one Server.
type engine struct {
	s    *Server
	poll *rawsock.Poller

	mu       sync.Mutex // guards what other goroutines hand the loop
	incoming []incoming // new connections
	events   []leanEvent
	mode     int           // stopNone, stopDrain or stopNow
	drained  chan struct{} // closed once draining left no connection
	done     chan struct{} // closed when the loop has returned
	handlers sync.WaitGroup

	// How many requests the loop answered itself, and how many it ran
	// the handler for: tests look.
	answeredNative, answeredByHandler atomic.Int64

	// The loop's own.
	conns   map[int]*lconn
	timers  timerHeap
	date    []byte // the Date header, for dateSec
	dateSec int64
	spare   []leanEvent
	hdr     []byte  // scratch for header blocks
	last    *cohort // the cohort answers started now join, if theirs
}

const (
	stopNone = iota
	stopDrain
	stopNow
)

func newEngine(s *Server) (*engine, error) {
	p, err := rawsock.NewPoller()
	if err != nil {
		return nil, err
	}
	e := &engine{s: s, poll: p, conns: map[int]*lconn{}, drained: make(chan struct{}), done: make(chan struct{})}
	go e.run()
	return e, nil
}

// incoming is a connection handed to the loop: its socket, detached.
type incoming struct {
	fd     int
	remote string
}

// add hands a connection that sent the HTTP/2 preface to the loop. It
// reports false, leaving nc as it was, if nc is not a socket the loop can
// take over (a listener of the caller's may hand out anything).
func (e *engine) add(nc net.Conn) bool {
	remote := nc.RemoteAddr().String()
	fd, err := rawsock.Detach(nc)
	if err != nil {
		e.s.log.Debug("lean HTTP/2: cannot take the connection over; net/http serves it", "err", err)
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mode != stopNone {
		rawsock.Close(fd)
		return true
	}
	e.incoming = append(e.incoming, incoming{fd, remote})
	e.poll.Wake()
	return true
}

// post hands the loop what a handler wrote. Waking the loop under mu keeps
// the wake from reaching a poller the loop closed on its way out.
func (e *engine) post(ev leanEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mode == stopNow {
		return
	}
	e.events = append(e.events, ev)
	if e.poll != nil { // nil only in FuzzLeanConn
		e.poll.Wake()
	}
}

// drain stops new streams on every connection and closes each once its
// streams are answered.
func (e *engine) drain() {
	e.mu.Lock()
	if e.mode == stopNone {
		e.mode = stopDrain
	}
	e.mu.Unlock()
	e.poll.Wake()
}

// wait waits until draining left no connection, or ctx ends.
func (e *engine) wait(ctx context.Context) error {
	select {
	case <-e.drained:
		return nil
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close drops every connection, ends the loop and waits for it and for
// the handlers still running (their requests are cancelled).
func (e *engine) close() {
	e.mu.Lock()
	e.mode = stopNow
	e.mu.Unlock()
	e.poll.Wake()
	<-e.done
	e.handlers.Wait()
}

func (e *engine) run() {
	defer close(e.done)
	defer e.poll.Close()
	drainedClosed := false
	for {
		now := time.Now()
		e.mu.Lock()
		mode := e.mode
		incoming := e.incoming
		e.incoming = nil
		events := e.events
		e.events = e.spare[:0]
		e.mu.Unlock()
		for _, in := range incoming {
			if mode == stopNone {
				e.open(in, now)
			} else {
				rawsock.Close(in.fd)
			}
		}
		if mode == stopNow {
			e.stop()
			return
		}
		busy := e.round(now, events)
		clear(events)
		e.spare = events[:0]
		if mode == stopDrain {
			for _, c := range e.conns {
				c.goAway(http2.ErrCodeNo, nil)
			}
		}
		e.flushAll()
		if mode == stopDrain && len(e.conns) == 0 && !drainedClosed {
			drainedClosed = true
			close(e.drained)
		}
		if busy || e.unsent() {
			rawsock.Sleep(pollEvery)
			continue
		}
		timeout := -1
		if at, ok := e.timers.next(); ok {
			timeout = int(max(time.Until(at)/time.Millisecond, 1))
		}
		if look := int(leanIdle / time.Millisecond / 10); len(e.conns) > 0 && (timeout < 0 || timeout > look) {
			timeout = look // idle connections close after leanIdle: look now and then
		}
		// What becomes readable is read by the next round.
		_, _ = e.poll.Wait(timeout)
	}
}

// round reads every readable connection, handles its frames and the
// handlers' output, and sends what fell due. It reports whether the loop
// should keep polling rather than block.
func (e *engine) round(now time.Time, events []leanEvent) bool {
	ready, _ := e.poll.Wait(0)
	got := false
	for _, fd := range ready {
		if c := e.conns[fd]; c != nil {
			got = c.receive(now) || got
		}
	}
	for i := range events {
		e.apply(&events[i], now)
	}
	e.fire(now)
	busy := got
	for fd, c := range e.conns {
		if c.dead {
			e.drop(fd, c)
			continue
		}
		if len(c.streams) == 0 && now.Sub(c.lastActive) > leanIdle {
			c.goAway(http2.ErrCodeNo, nil)
			c.closeAfterFlush = true
		}
	}
	if e.timers.due(now.Add(pollEvery)) {
		busy = true
	}
	return busy
}

// flushAll writes what each connection has queued.
func (e *engine) flushAll() {
	for fd, c := range e.conns {
		c.flush()
		if c.dead {
			e.drop(fd, c)
		}
	}
}

// unsent reports whether a connection has bytes the socket did not take.
func (e *engine) unsent() bool {
	for _, c := range e.conns {
		if c.outOff < len(c.out) {
			return true
		}
	}
	return false
}

func (e *engine) open(in incoming, now time.Time) {
	if err := e.poll.Add(in.fd); err != nil {
		e.s.log.Debug("lean HTTP/2: cannot watch the connection", "err", err)
		rawsock.Close(in.fd)
		return
	}
	e.conns[in.fd] = e.newConn(in, now)
}

// newConn returns a connection with the server's preface queued: its
// SETTINGS and the connection window's first top-up.
func (e *engine) newConn(in incoming, now time.Time) *lconn {
	c := &lconn{e: e, fd: in.fd, remote: in.remote, streams: map[uint32]*lstream{}, peerWin: 65535, sendWin: 65535,
		peerMaxFrame: 16384, recvWin: 65535, lastActive: now, in: make([]byte, 0, 16<<10)}
	c.fr = http2.NewFramer(frameOut{c}, frameIn{c})
	c.fr.SetMaxReadFrameSize(maxReadFrame)
	c.dec = hpack.NewDecoder(4096, nil)
	c.dec.SetMaxStringLength(maxHeaderList)
	c.fr.SetReuseFrames()
	_ = c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(e.s.opt.MaxConcurrentStreams)},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList},
	)
	_ = c.fr.WriteWindowUpdate(0, connWindow-65535)
	c.recvWin = connWindow
	return c
}

// drop forgets a dead connection.
func (e *engine) drop(fd int, c *lconn) {
	if c.fd >= 0 {
		e.poll.Remove(c.fd)
		rawsock.Close(c.fd)
		c.fd = -1
	}
	delete(e.conns, fd)
}

// stop ends every connection at once: Close.
func (e *engine) stop() {
	for fd, c := range e.conns {
		c.goAway(http2.ErrCodeNo, nil)
		c.flush()
		c.fail()
		e.drop(fd, c)
	}
	e.mu.Lock()
	e.events = nil // for streams that are all closed now
	e.mu.Unlock()
}

// fire acts on every deadline that has passed.
func (e *engine) fire(now time.Time) {
	for {
		t, ok := e.timers.pop(now)
		if !ok {
			return
		}
		co := t.co
		live := co.streams[:0]
		for _, st := range co.streams {
			if st.closed || st.nat == nil {
				continue
			}
			st.tick(now)
			if st.nat != nil {
				live = append(live, st)
			}
		}
		clear(co.streams[len(live):])
		co.streams = live
		if len(live) > 0 {
			e.timers.push(timer{at: live[0].nat.due().UnixNano(), co: co})
		} else if e.last == co {
			e.last = nil
		}
	}
}

// cohort is the plain answers started in one round with the same
// schedule: the same latency and, for streams, as many deltas. Each part
// of their answers falls due at the same moment, so they share one timer
// instead of pushing one per stream per delta: without jitter, every
// answer started in a round is in one cohort.
type cohort struct {
	start, deadline time.Time
	deltas          int
	stream          bool
	streams         []*lstream
}

// join puts a plain answer in the cohort of its schedule.
func (e *engine) join(st *lstream) {
	nat := st.nat
	co := e.last
	if co == nil || !co.start.Equal(nat.start) || !co.deadline.Equal(nat.deadline) || co.deltas != nat.deltas || co.stream != nat.req.stream {
		co = &cohort{start: nat.start, deadline: nat.deadline, deltas: nat.deltas, stream: nat.req.stream}
		e.last = co
		e.timers.push(timer{at: nat.due().UnixNano(), co: co})
	}
	co.streams = append(co.streams, st)
}

// dateHeader returns the Date header's value for now, formatted once a
// second.
func (e *engine) dateHeader(now time.Time) []byte {
	if sec := now.Unix(); sec != e.dateSec || e.date == nil {
		e.dateSec = sec
		e.date = now.UTC().AppendFormat(e.date[:0], "Mon, 02 Jan 2006 15:04:05 GMT")
	}
	return e.date
}

// frameOut is where a connection's framer writes: its queue of bytes to
// send.
type frameOut struct{ c *lconn }

func (f frameOut) Write(p []byte) (int, error) {
	f.c.out = append(f.c.out, p...)
	return len(p), nil
}

// frameIn is where its framer reads: what receive took in, whole frames
// only.
type frameIn struct{ c *lconn }

func (f frameIn) Read(p []byte) (int, error) {
	c := f.c
	n := copy(p, c.in[c.inOff:])
	c.inOff += n
	if n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	return n, nil
}

// timer is a cohort's next deadline.
type timer struct {
	at int64 // UnixNano
	co *cohort
}

// timerHeap is a min-heap of deadlines: one per cohort of answers waiting
// out their latency or their streams' next delta.
type timerHeap []timer

func (h *timerHeap) push(t timer) {
	*h = append(*h, t)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].at <= a[i].at {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// pop removes and returns the earliest deadline if it is not after now.
func (h *timerHeap) pop(now time.Time) (timer, bool) {
	a := *h
	if len(a) == 0 || a[0].at > now.UnixNano() {
		return timer{}, false
	}
	t := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a[last] = timer{}
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l].at < a[m].at {
			m = l
		}
		if r < len(a) && a[r].at < a[m].at {
			m = r
		}
		if m == i {
			break
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
	*h = a
	return t, true
}

func (h timerHeap) next() (time.Time, bool) {
	if len(h) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, h[0].at), true
}

// due reports whether a deadline falls before t.
func (h timerHeap) due(t time.Time) bool {
	return len(h) > 0 && h[0].at <= t.UnixNano()
}

var errStreamGone = errors.New("mockllm: the client reset the stream or closed the connection")
