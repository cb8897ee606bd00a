package llmload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/rawsock"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The h2c mode's client. A load generator that spends as much CPU per
// request as the gateway it measures hides the gateway. Measured here, what
// a request costs a Go client is mostly not work but wake-ups: a goroutine
// or thread that sleeps and is woken costs tens of microseconds of CPU on a
// busy virtual machine, and net/http's HTTP/2 client wakes several per
// request (the request's goroutine, its timer, the connection's reader and
// writer). So h2c does not go through net/http, and nothing waits per
// request: one goroutine runs the schedule and, every pollEvery while
// requests are in flight, reads whatever every connection has received
// without blocking, answers it, sends every request due, and writes each
// connection's frames in one system call. Every request's header block is
// the same bytes (encoded once, without HPACK's dynamic table, so it needs
// no per-connection state), and timeouts are a look at the oldest streams
// instead of a timer each. It still behaves as a client must: it keeps to
// the server's stream limit, frame size and flow-control windows, answers
// SETTINGS and PING, and honours RST_STREAM and GOAWAY.
//
// The price is resolution: a request goes out up to pollEvery after its
// intended time and an answer is seen up to pollEvery after it arrived;
// both delays are in the latency recorded, which is measured from the
// intended time as always.

// pollEvery is how often the client looks at its connections while
// requests are in flight.
const pollEvery = 2 * time.Millisecond

const (
	// recvWindow is the receive window advertised for the connection and
	// for each stream: large, so that answers never wait for a
	// WINDOW_UPDATE. The connection's is topped up as data is read.
	recvWindow = 1 << 30
	// recvRefill is how much read data is acknowledged at once.
	recvRefill = 1 << 24
	// errBodyBytes is how much of a failed answer's body is kept as its
	// detail.
	errBodyBytes = 4096
	// maxStreamID is the last client stream ID; past it, a new connection.
	maxStreamID = 1<<31 - 1
	// maxBatch is the most requests one connection takes at one wake;
	// more go to the next connection.
	maxBatch = 64
)

// pending is a request handed to a connection and not yet sent.
type pending struct {
	intended time.Time
	measured bool
	probe    chan outcome // the probe request: its outcome goes here, uncounted
}

// h2Client is the h2c mode's client: Conns slots, each holding a
// connection (and, after a GOAWAY, the old one until its streams finish).
// Only the goroutine driving it touches it, but for the dials, which hand
// their connection over through dialed.
type h2Client struct {
	r         *run
	addr      string
	block     []byte // the header block, the same for every request
	body      []byte
	stream    bool
	anthropic bool
	timeout   time.Duration
	dialer    net.Dialer

	slots  []*h2Slot
	next   int       // the slot the next request goes to
	conns  []*h2Conn // every open connection
	free   []*h2Stream
	dialed chan dialResult
	dials  sync.WaitGroup
	closed bool
}

// h2Slot is one of the --conns connections, redialled after a GOAWAY or a
// failure.
type h2Slot struct {
	queue   []pending // handed over, not yet sent
	qhead   int
	cur     *h2Conn // where new streams go; nil when none
	dialing bool
	retryAt time.Time
	dialErr error
}

type dialResult struct {
	s   *h2Slot
	c   *h2Conn
	err error
}

func newH2Client(r *run) (*h2Client, error) {
	u, err := url.Parse(r.w.URL)
	if err != nil {
		return nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	h := &h2Client{
		r: r, addr: addr, body: r.body, stream: r.w.Stream, anthropic: r.w.Dialect == Anthropic,
		timeout: r.w.Timeout, dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		dialed: make(chan dialResult, r.w.Conns),
	}
	h.block = headerBlock(r.w, u.Host, strings.TrimRight(u.Path, "/")+r.path, len(r.body))
	h.slots = make([]*h2Slot, r.w.Conns)
	for i := range h.slots {
		h.slots[i] = &h2Slot{}
	}
	return h, nil
}

// headerBlock encodes a request's header fields as HPACK literals without
// indexing: the same bytes are valid on any connection, at any time.
func headerBlock(w Workload, authority, path string, bodyLen int) []byte {
	fields := [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", authority}, {":path", path},
		{"content-type", "application/json"}, {"content-length", strconv.Itoa(bodyLen)},
	}
	if w.Dialect == Anthropic {
		fields = append(fields, [2]string{"anthropic-version", "2023-06-01"})
		if w.APIKey != "" {
			fields = append(fields, [2]string{"x-api-key", w.APIKey})
		}
	} else if w.APIKey != "" {
		fields = append(fields, [2]string{"authorization", "Bearer " + w.APIKey})
	}
	if w.Stream {
		fields = append(fields, [2]string{"accept", "text/event-stream"})
	}
	var b []byte
	for _, f := range fields {
		b = append(b, 0x00) // literal header field without indexing, new name
		b = appendHpackString(b, f[0])
		b = appendHpackString(b, f[1])
	}
	return b
}

// appendHpackString appends s as an HPACK string literal, not Huffman-coded.
func appendHpackString(b []byte, s string) []byte {
	// The length is an integer with a 7-bit prefix (RFC 7541, 5.1).
	const prefix = 1<<7 - 1
	n := uint64(len(s))
	if n < prefix {
		b = append(b, byte(n))
	} else {
		b = append(b, prefix)
		for n -= prefix; n >= 128; n >>= 7 {
			b = append(b, byte(n&0x7f|0x80))
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// add hands a request to the next connection; a batch of up to maxBatch
// goes to one connection, so that it is one write.
func (h *h2Client) add(p pending) {
	s := h.slots[h.next]
	s.queue = append(s.queue, p)
	if s.queued() >= maxBatch {
		h.nextSlot()
	}
}

// nextSlot moves on to the next connection: called at the end of a batch.
func (h *h2Client) nextSlot() { h.next = (h.next + 1) % len(h.slots) }

// busy reports whether any request waits or is in flight.
func (h *h2Client) busy() bool {
	for _, s := range h.slots {
		if s.queued() > 0 || s.dialing {
			return true
		}
	}
	for _, c := range h.conns {
		if c.active > 0 {
			return true
		}
	}
	return false
}

// tick does one round: it takes dialled connections, reads and answers
// what every connection received, sends queued requests, times out old
// streams and writes every connection's frames.
func (h *h2Client) tick(now time.Time) {
	for more := true; more; {
		select {
		case d := <-h.dialed:
			h.takeDial(d)
		default:
			more = false
		}
	}
	for _, s := range h.slots {
		if s.queued() > 0 && s.cur == nil && !s.dialing {
			if now.Before(s.retryAt) {
				s.failQueue(h.r, outcome{kind: transportKind(context.Background(), s.dialErr), detail: s.dialErr.Error()})
			} else {
				h.startDial(s)
			}
		}
	}
	for _, c := range h.conns {
		c.receive()
	}
	for _, s := range h.slots {
		if s.cur != nil {
			s.cur.sendQueued(now)
		}
	}
	for _, c := range h.conns {
		c.sweep(now)
		c.flush()
		if c.closing && !c.dead {
			c.dead = true
			c.closeSock()
		}
	}
	kept := h.conns[:0]
	for _, c := range h.conns {
		if !c.dead {
			kept = append(kept, c)
		}
	}
	clear(h.conns[len(kept):])
	h.conns = kept
}

func (h *h2Client) startDial(s *h2Slot) {
	s.dialing = true
	h.dials.Add(1)
	go func() {
		defer h.dials.Done()
		c, err := h.connect(s)
		h.dialed <- dialResult{s, c, err}
	}()
}

func (h *h2Client) takeDial(d dialResult) {
	s := d.s
	s.dialing = false
	if d.err != nil {
		// Do not redial for every request while the server is down.
		s.retryAt, s.dialErr = time.Now().Add(100*time.Millisecond), d.err
		s.failQueue(h.r, outcome{kind: transportKind(context.Background(), d.err), detail: d.err.Error()})
		return
	}
	if h.closed {
		d.c.closeSock()
		return
	}
	s.cur = d.c
	h.conns = append(h.conns, d.c)
}

// close ends the client once nothing drives it any more: streams still
// open end as "canceled", queued requests are dropped unsent.
func (h *h2Client) close() {
	if h.closed {
		return
	}
	h.closed = true
	h.dials.Wait()
	close(h.dialed)
	for d := range h.dialed {
		if d.c != nil {
			d.c.closeSock()
		}
	}
	for _, s := range h.slots {
		s.dropQueue(h.r)
	}
	for _, c := range h.conns {
		if !c.dead {
			c.fail(errClosed)
		}
	}
	h.conns = nil
}

var errClosed = errors.New("the run ended before the answer")

// queued is how many requests wait to be sent.
func (s *h2Slot) queued() int { return len(s.queue) - s.qhead }

func (s *h2Slot) popQueue(n int) {
	s.qhead += n
	if s.qhead == len(s.queue) {
		s.queue, s.qhead = s.queue[:0], 0
	} else if s.qhead > 1024 && s.qhead > len(s.queue)/2 {
		k := copy(s.queue, s.queue[s.qhead:])
		s.queue, s.qhead = s.queue[:k], 0
	}
}

// dropQueue forgets the queued requests at shutdown: never sent.
func (s *h2Slot) dropQueue(r *run) {
	for _, p := range s.queue[s.qhead:] {
		if p.probe != nil {
			p.probe <- outcome{kind: "canceled", detail: errClosed.Error()}
		} else {
			r.inflight.Add(-1)
		}
	}
	s.popQueue(s.queued())
}

// failQueue ends every queued request with o: they were attempted, and
// could not be sent (the connection could not be opened).
func (s *h2Slot) failQueue(r *run, o outcome) {
	now := time.Now()
	for _, p := range s.queue[s.qhead:] {
		r.countSent(p)
		r.deliver(p, o, now)
	}
	s.popQueue(s.queued())
}

// h2Conn is one HTTP/2 connection.
type h2Conn struct {
	h    *h2Client
	slot *h2Slot
	nc   net.Conn // for the handshake only
	fd   int      // the socket after it, -1 once closed
	fr   *http2.Framer
	dec  *hpack.Decoder
	hdr  struct { // the header block being decoded
		stream uint32
		ended  bool // its HEADERS frame ended the stream
		status string
	}
	in     []byte // received, not yet parsed: in[inOff:]
	inOff  int
	live   bool   // past the handshake: the framer reads from in
	out    []byte // frames to write: out[outOff:]
	outOff int

	streams map[uint32]*h2Stream
	order   []*h2Stream // sent and not yet swept, oldest first
	ohead   int
	blocked []*h2Stream // request bodies waiting for send window
	// finalled are streams whose answer was complete at the last tick
	// but that the server had not ended.
	finalled []*h2Stream

	nextID     uint32
	active     int
	maxStreams uint32 // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	maxFrame   int    // the server's SETTINGS_MAX_FRAME_SIZE
	initWin    int64  // the server's SETTINGS_INITIAL_WINDOW_SIZE
	sendWin    int64  // the connection's send window
	unacked    int64  // data read and not yet given back as window
	goaway     bool   // draining: no new streams
	closing    bool   // drained: close once its frames are written
	dead       bool
}

// closeSock closes the connection's socket, once.
func (c *h2Conn) closeSock() {
	if c.fd >= 0 {
		rawsock.Close(c.fd)
		c.fd = -1
	}
}

// frameIO is the framer's side of a connection: it writes into out and,
// after the handshake, reads from what receive took in.
type frameIO struct{ c *h2Conn }

func (f frameIO) Write(p []byte) (int, error) {
	f.c.out = append(f.c.out, p...)
	return len(p), nil
}

func (f frameIO) Read(p []byte) (int, error) {
	c := f.c
	if !c.live {
		return c.nc.Read(p)
	}
	n := copy(p, c.in[c.inOff:])
	c.inOff += n
	if n == 0 {
		return 0, io.ErrUnexpectedEOF // receive hands the framer whole frames only
	}
	return n, nil
}

// connect dials, sends the connection preface with our settings and reads
// the server's SETTINGS, so that its limits are known before any request.
func (h *h2Client) connect(s *h2Slot) (*h2Conn, error) {
	nc, err := h.dialer.Dial("tcp", h.addr)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*h2Conn, error) {
		nc.Close()
		return nil, err
	}
	c := &h2Conn{
		h: h, slot: s, nc: nc, fd: -1, streams: map[uint32]*h2Stream{}, nextID: 1,
		maxStreams: math.MaxUint32, maxFrame: 16384, initWin: 65535, sendWin: 65535,
		in: make([]byte, 0, 64<<10),
	}
	c.fr = http2.NewFramer(frameIO{c}, frameIO{c})
	// Header blocks are decoded here rather than by the framer, so that
	// only :status is taken from them and nothing else allocated.
	c.dec = hpack.NewDecoder(4096, c.onField)
	c.dec.SetMaxStringLength(1 << 20)
	c.out = append(c.out, http2.ClientPreface...)
	c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow})
	c.fr.WriteWindowUpdate(0, recvWindow-65535)
	if _, err := nc.Write(c.out); err != nil {
		return fail(err)
	}
	c.out = c.out[:0]
	// The framer reads exactly one frame from the socket here, nothing
	// beyond it: the rest is left for receive.
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := c.fr.ReadFrame()
	if err != nil {
		return fail(fmt.Errorf("reading the server's HTTP/2 settings: %w", err))
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fail(fmt.Errorf("the server did not start with HTTP/2 SETTINGS (got %v): is it an h2c endpoint?", f.Header().Type))
	}
	if c.fd, err = rawsock.Detach(nc); err != nil {
		return fail(fmt.Errorf("--h2c needs non-blocking socket access (use HTTP/1.1 here): %w", err))
	}
	c.settings(sf)
	c.live = true
	return c, nil
}

// receive reads what the connection has received, without waiting, and
// handles every whole frame of it.
func (c *h2Conn) receive() {
	if c.dead {
		return
	}
	for i, st := range c.finalled {
		if !st.done {
			c.reset(st, st.fin, st.finAt)
		}
		c.finalled[i] = nil
	}
	c.finalled = c.finalled[:0]
	var rerr error
	got := false
	for {
		n, full, err := rawsock.ReadOnce(c.fd, &c.in, &c.inOff)
		got = got || n > 0
		if err != nil {
			rerr = err
			break
		}
		if !full {
			break // drained, most likely; the next tick looks again
		}
	}
	if got {
		now := time.Now()
		for !c.dead && frameReady(c.in[c.inOff:]) {
			f, err := c.fr.ReadFrame()
			if err != nil {
				var se http2.StreamError
				if errors.As(err, &se) {
					if st := c.streams[se.StreamID]; st != nil {
						c.reset(st, outcome{status: st.status, kind: "protocol error", detail: se.Error()}, now)
					}
					continue
				}
				c.fail(err)
				return
			}
			if err := c.handle(f, now); err != nil {
				c.fail(err)
				return
			}
		}
	}
	if rerr != nil && !c.dead {
		c.fail(rerr)
	}
}

// frameReady reports whether b starts with a whole frame, and for a header
// block, with all of its CONTINUATION frames.
func frameReady(b []byte) bool {
	for {
		if len(b) < 9 {
			return false
		}
		n := 9 + (int(b[0])<<16 | int(b[1])<<8 | int(b[2]))
		if len(b) < n {
			return false
		}
		switch http2.FrameType(b[3]) {
		case http2.FrameHeaders, http2.FramePushPromise, http2.FrameContinuation:
			if http2.Flags(b[4]).Has(http2.FlagHeadersEndHeaders) {
				return true
			}
		default:
			return true
		}
		b = b[n:]
	}
}

// flush writes the connection's frames, as much as the socket takes now;
// the rest waits for the next tick.
func (c *h2Conn) flush() {
	if c.dead || len(c.out) == 0 {
		return
	}
	n, err := rawsock.WriteNow(c.fd, c.out[c.outOff:])
	if err != nil {
		c.fail(err)
		return
	}
	if c.outOff += n; c.outOff == len(c.out) {
		c.out, c.outOff = c.out[:0], 0
	} else if c.outOff > len(c.out)/2 {
		// Move the rest to the front now and then, not at every
		// partial write.
		k := copy(c.out, c.out[c.outOff:])
		c.out, c.outOff = c.out[:k], 0
	}
}

// settings applies the server's SETTINGS and acknowledges them.
func (c *h2Conn) settings(f *http2.SettingsFrame) {
	f.ForeachSetting(func(st http2.Setting) error {
		switch st.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = st.Val
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(st.Val)
		case http2.SettingInitialWindowSize:
			// Open streams' windows move by the change (RFC 9113, 6.9.2).
			d := int64(st.Val) - c.initWin
			c.initWin = int64(st.Val)
			for _, s := range c.streams {
				s.sendWin += d
			}
		}
		return nil
	})
	c.fr.WriteSettingsAck()
	c.resumeBlocked()
}

// h2Stream is one request on a connection.
type h2Stream struct {
	id       uint32
	p        pending
	sentAt   time.Time
	sendWin  int64
	bodyOff  int
	recv     int64 // data read since the stream's window was last topped up
	status   int
	done     bool
	errBody  []byte
	first    time.Time
	scan     sseScan
	finalled bool // the dialect's final event (or an error event) was seen
	fin      outcome
	finAt    time.Time
}

func (h *h2Client) newStream() *h2Stream {
	if n := len(h.free); n > 0 {
		st := h.free[n-1]
		h.free = h.free[:n-1]
		errBody := st.errBody[:0]
		st.scan.reset()
		*st = h2Stream{errBody: errBody, scan: st.scan}
		return st
	}
	return &h2Stream{}
}

// sendQueued opens streams for queued requests while the server's stream
// limit allows.
func (c *h2Conn) sendQueued(now time.Time) {
	s := c.slot
	n := 0
	for s.qhead+n < len(s.queue) && uint32(c.active) < c.maxStreams && !c.goaway && !c.dead {
		if c.nextID > maxStreamID {
			c.drain()
			break
		}
		c.open(s.queue[s.qhead+n], now)
		n++
	}
	s.popQueue(n)
}

func (c *h2Conn) open(p pending, now time.Time) {
	h := c.h
	st := h.newStream()
	st.id, st.p, st.sentAt, st.sendWin = c.nextID, p, now, c.initWin
	c.nextID += 2
	block := h.block
	first := block[:min(len(block), c.maxFrame)]
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: first,
		EndStream: len(h.body) == 0, EndHeaders: len(first) == len(block)})
	for block = block[len(first):]; len(block) > 0; {
		n := min(len(block), c.maxFrame)
		c.fr.WriteContinuation(st.id, n == len(block), block[:n])
		block = block[n:]
	}
	c.streams[st.id] = st
	c.order = append(c.order, st)
	c.active++
	if !c.sendBody(st) {
		c.blocked = append(c.blocked, st)
	}
	h.r.countSent(p)
}

// sendBody writes as much of the request body as the windows allow and
// reports whether all of it is out.
func (c *h2Conn) sendBody(st *h2Stream) bool {
	body := c.h.body
	for st.bodyOff < len(body) {
		n := int(min(int64(len(body)-st.bodyOff), int64(c.maxFrame), c.sendWin, st.sendWin))
		if n <= 0 {
			return false
		}
		end := st.bodyOff+n == len(body)
		c.fr.WriteData(st.id, end, body[st.bodyOff:st.bodyOff+n])
		st.bodyOff += n
		c.sendWin -= int64(n)
		st.sendWin -= int64(n)
	}
	return true
}

// resumeBlocked sends what the windows now allow of waiting bodies.
func (c *h2Conn) resumeBlocked() {
	kept := c.blocked[:0]
	for _, st := range c.blocked {
		if st.done || c.sendBody(st) {
			continue
		}
		kept = append(kept, st)
	}
	clear(c.blocked[len(kept):])
	c.blocked = kept
}

// drain stops new streams on c; later requests go to a new connection. c
// closes once its last stream ends.
func (c *h2Conn) drain() {
	c.goaway = true
	if c.slot.cur == c {
		c.slot.cur = nil
	}
	if c.active == 0 {
		c.closing = true
	}
}

// finish ends a stream with its outcome.
func (c *h2Conn) finish(st *h2Stream, o outcome, at time.Time) {
	if st.done {
		return
	}
	st.done = true
	delete(c.streams, st.id)
	c.active--
	if st.bodyOff < len(c.h.body) {
		c.resumeBlocked() // drops it from the blocked list
	}
	o.firstEvent = st.first
	c.h.r.deliver(st.p, o, at)
	if c.goaway && c.active == 0 {
		c.closing = true
	}
}

// reset ends a stream from our side with RST_STREAM(CANCEL).
func (c *h2Conn) reset(st *h2Stream, o outcome, at time.Time) {
	c.fr.WriteRSTStream(st.id, http2.ErrCodeCancel)
	c.finish(st, o, at)
}

// sweep times out the oldest streams: they were sent in order and share
// one timeout, so only the head of the list needs looking at.
func (c *h2Conn) sweep(now time.Time) {
	timeout := c.h.timeout
	for c.ohead < len(c.order) {
		st := c.order[c.ohead]
		if !st.done {
			if now.Sub(st.sentAt) < timeout {
				break
			}
			c.reset(st, outcome{status: st.status, kind: "timeout",
				detail: fmt.Sprintf("no complete answer within --timeout %v", timeout)}, now)
		}
		c.order[c.ohead] = nil
		c.ohead++
		c.h.free = append(c.h.free, st)
	}
	if c.ohead == len(c.order) {
		c.order, c.ohead = c.order[:0], 0
	} else if c.ohead > 1024 && c.ohead > len(c.order)/2 {
		k := copy(c.order, c.order[c.ohead:])
		clear(c.order[k:])
		c.order, c.ohead = c.order[:k], 0
	}
}

// fail ends the connection and every stream on it.
func (c *h2Conn) fail(err error) {
	c.dead = true
	c.closeSock()
	if c.slot.cur == c {
		c.slot.cur = nil
	}
	o := outcome{kind: transportKind(context.Background(), err), detail: err.Error()}
	switch {
	case err == errClosed:
		o.kind = "canceled"
	case errors.Is(err, io.EOF):
		o.kind = "connection reset"
	}
	now := time.Now()
	for _, st := range c.streams {
		o.status = st.status
		c.finish(st, o, now)
	}
}

// handle acts on one frame from the server, received at now. An error
// ends the connection.
func (c *h2Conn) handle(f http2.Frame, now time.Time) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		n := int64(f.Header().Length) // padding counts against the window too
		if c.unacked += n; c.unacked >= recvRefill {
			c.fr.WriteWindowUpdate(0, uint32(c.unacked))
			c.unacked = 0
		}
		st := c.streams[f.StreamID]
		if st == nil {
			return nil // a stream we reset or timed out
		}
		if st.recv += n; st.recv >= recvWindow/2 && !f.StreamEnded() {
			c.fr.WriteWindowUpdate(st.id, uint32(st.recv))
			st.recv = 0
		}
		c.data(st, f.Data(), f.StreamEnded(), now)
		if f.StreamEnded() {
			c.endStream(st, now)
		}
	case *http2.HeadersFrame:
		c.hdr.stream, c.hdr.ended, c.hdr.status = f.StreamID, f.StreamEnded(), ""
		c.dec.SetEmitEnabled(true)
		if _, err := c.dec.Write(f.HeaderBlockFragment()); err != nil {
			return fmt.Errorf("decoding response headers: %w", err)
		}
		if f.HeadersEnded() {
			return c.headersDone(now)
		}
	case *http2.ContinuationFrame:
		if _, err := c.dec.Write(f.HeaderBlockFragment()); err != nil {
			return fmt.Errorf("decoding response headers: %w", err)
		}
		if f.HeadersEnded() {
			return c.headersDone(now)
		}
	case *http2.RSTStreamFrame:
		if st := c.streams[f.StreamID]; st != nil {
			c.finish(st, outcome{status: st.status, kind: "stream reset " + f.ErrCode.String(),
				detail: "the server reset the stream: " + f.ErrCode.String()}, now)
		}
	case *http2.SettingsFrame:
		if !f.IsAck() {
			c.settings(f)
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.sendWin += int64(f.Increment)
		} else if st := c.streams[f.StreamID]; st != nil {
			st.sendWin += int64(f.Increment)
		}
		if len(c.blocked) > 0 {
			c.resumeBlocked()
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			c.fr.WritePing(true, f.Data)
		}
	case *http2.GoAwayFrame:
		// Streams above the last one the server will process were not
		// processed: they fail as a real client's would, and later
		// requests go to a new connection.
		for id, st := range c.streams {
			if id > f.LastStreamID {
				c.finish(st, outcome{status: st.status, kind: "connection reset",
					detail: fmt.Sprintf("the server sent GOAWAY (%v) before stream %d", f.ErrCode, id)}, now)
			}
		}
		c.drain()
	case *http2.PushPromiseFrame:
		return errors.New("the server pushed a stream, which the client disabled")
	}
	return nil
}

// onField takes a decoded response header field: only :status, which
// comes first, matters; the rest is decoded (the table must follow the
// server's) without being handed over.
func (c *h2Conn) onField(f hpack.HeaderField) {
	if f.Name == ":status" {
		c.hdr.status = f.Value
		c.dec.SetEmitEnabled(false)
	}
}

// headersDone acts on a whole response header block.
func (c *h2Conn) headersDone(now time.Time) error {
	if err := c.dec.Close(); err != nil {
		return fmt.Errorf("decoding response headers: %w", err)
	}
	st := c.streams[c.hdr.stream]
	if st == nil {
		return nil
	}
	if st.status == 0 {
		code, err := strconv.Atoi(c.hdr.status)
		if err != nil || code < 100 || code > 999 {
			c.reset(st, outcome{kind: "protocol error", detail: fmt.Sprintf("bad :status %q", c.hdr.status)}, now)
			return nil
		}
		if code >= 200 {
			st.status = code
		}
	}
	if c.hdr.ended {
		c.endStream(st, now)
	}
	return nil
}

// data takes a DATA frame's payload.
func (c *h2Conn) data(st *h2Stream, b []byte, ended bool, now time.Time) {
	if st.status != 200 {
		if room := errBodyBytes - len(st.errBody); room > 0 {
			st.errBody = append(st.errBody, b[:min(room, len(b))]...)
		}
		return
	}
	if !c.h.stream || st.finalled {
		return
	}
	for len(b) > 0 {
		n, ok := st.scan.scan(b)
		b = b[n:]
		if !ok {
			continue
		}
		ev := st.scan.event()
		if ev.Comment {
			continue
		}
		if st.first.IsZero() {
			st.first = now
		}
		var o outcome
		switch {
		case c.h.anthropic && ev.named("message_stop"), !c.h.anthropic && ev.dataIs("[DONE]"):
			o = outcome{status: st.status}
		case c.h.anthropic && ev.named("error"),
			!c.h.anthropic && len(ev.Data) >= 8 && string(ev.Data[:8]) == `{"error"`:
			o = outcome{status: st.status, kind: "stream error", detail: string(ev.Data)}
		default:
			continue
		}
		// The answer is decided, at now. The server usually ends the
		// stream right after; if it has not by the next tick, the client
		// ends it, as one closing the body would.
		st.finalled = true
		st.fin, st.finAt = o, now
		if !ended {
			c.finalled = append(c.finalled, st)
		}
		return
	}
}

// endStream ends a stream the server finished.
func (c *h2Conn) endStream(st *h2Stream, now time.Time) {
	if st.done {
		return
	}
	if st.finalled {
		c.finish(st, st.fin, st.finAt)
		return
	}
	o := outcome{status: st.status}
	switch {
	case st.status != 200:
		o.kind = "http " + strconv.Itoa(st.status)
		o.detail = fmt.Sprintf("HTTP %d: %s", st.status, strings.TrimSpace(string(st.errBody)))
	case c.h.stream:
		o.kind, o.detail = "stream incomplete", "the stream ended without its final event"
	}
	c.finish(st, o, now)
}
