package mockllm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
)

// lstream is one request on a lean connection. Only the loop touches it.
type lstream struct {
	c  *lconn
	id uint32

	// The request.
	reqHead
	body                 []byte
	start                time.Time
	bodyDone             bool // END_STREAM received
	dispatched           bool // handed to an answer
	recvWin, recvUnacked int64

	// The answer.
	sendWin   int64
	pending   []byte // answer bytes waiting for send window
	endQueued bool   // END_STREAM follows pending
	blocked   bool   // on c.blocked
	closed    bool

	nat    *native            // a plain answer given by the loop: &natv, until complete
	natv   native             // (in the stream, not allocated apart: a tick reads both)
	cancel context.CancelFunc // a request answered by a handler
}

// native is a chat completion or message answered by the loop itself.
type native struct {
	d         Dialect
	n         uint64
	req       request
	rep       reply
	start     time.Time
	deadline  time.Time
	sc        *script // a stream's rendered events
	deltas, i int     // a stream's deltas, and the next one due
	// sc's buf and ends, here so that a tick reads the stream and the
	// bytes it sends, not the script too: it runs for every stream in
	// flight every few deltas, and each memory line it reads is a miss.
	buf    []byte
	ends   []int
	inline [16]int
}

// drawnFault is the context key under which the lean engine hands the
// handler a fault it already drew, so that a request is drawn for once.
type drawnFault struct{}

// dispatch answers a request whose headers (and body, unless it is too
// big to read) arrived: in the loop if it is a plain chat completion or
// message, by the handler otherwise.
func (st *lstream) dispatch(now time.Time) {
	st.dispatched = true
	s := st.c.e.s
	r := st.request()
	d, generation := OpenAI, false
	switch st.url.Path {
	case "/v1/chat/completions":
		generation = true
	case "/v1/messages":
		d, generation = Anthropic, true
	}
	if generation && st.bodyDone && len(r.Header[upgradeMarker]) == 0 {
		if req, f, faulted, ok := s.admit(r, st.body, d); ok {
			if faulted {
				st.runHandler(r, &f)
			} else {
				st.answer(r, d, &req, now)
			}
			return
		}
	}
	st.runHandler(r, nil)
}

// request is the stream's request as net/http would hand it to a handler.
func (st *lstream) request() *http.Request {
	cl := st.contentLength
	if st.bodyDone {
		cl = int64(len(st.body))
	}
	var body io.ReadCloser = http.NoBody
	if len(st.body) > 0 {
		body = io.NopCloser(bytes.NewReader(st.body))
	}
	host := st.authority
	if host == "" {
		host = st.header.Get("Host")
	}
	return &http.Request{
		Method: st.method, URL: st.url, Proto: "HTTP/2.0", ProtoMajor: 2, Header: st.header,
		Body: body, ContentLength: cl, Host: host, RemoteAddr: st.c.remote, RequestURI: st.path,
	}
}

// endBody takes the end of the request body.
func (st *lstream) endBody(now time.Time) {
	st.bodyDone = true
	if !st.dispatched {
		st.dispatch(now)
	}
}

// answer starts the loop's own answer, as Server.answer would give it
// past its checks.
func (st *lstream) answer(r *http.Request, d Dialect, req *request, now time.Time) {
	s := st.c.e.s
	st.c.e.answeredNative.Add(1)
	s.requests.Add(1)
	n := s.seq.Add(1)
	s.record(r, st.body)
	st.body = nil
	st.natv = native{d: d, n: n, req: *req, start: now}
	nat := &st.natv
	nat.rep = s.plan(&nat.req)
	nat.deadline = now.Add(s.latency())
	st.nat = nat
	if req.stream {
		st.openStream(now)
		return
	}
	st.c.e.join(st) // the JSON is rendered when due, as json does
}

// tick acts on the stream's deadline.
func (st *lstream) tick(now time.Time) {
	switch nat := st.nat; {
	case nat == nil:
	case nat.req.stream:
		st.nextEvent(now)
	default:
		st.sendJSON(now)
	}
}

// sendJSON sends a JSON answer: the bytes and headers json sends.
func (st *lstream) sendJSON(now time.Time) {
	e, s, nat := st.c.e, st.c.e.s, st.nat
	sc := s.getScript()
	defer s.putScript(sc)
	if nat.d == Anthropic {
		sc.buf = s.anthropicJSON(sc.buf, nat.n, nat.req.model, &nat.rep)
	} else {
		sc.buf = s.openaiJSON(sc.buf, nat.n, nat.req.model, &nat.rep)
	}
	b := appendStatus(e.hdr[:0], http.StatusOK)
	b = appendField(b, "content-type", hdrJSON[0])
	b = appendField(b, idHeader(nat.d), s.appendRequestID(sc.scratch[:0], nat.n))
	b = appendField(b, "content-length", strconv.AppendInt(sc.tmp[:0], int64(len(sc.buf)), 10))
	b = appendField(b, "date", e.dateHeader(now))
	e.hdr = b
	s.bill(nat.rep.inputTokens, nat.rep.outputTokens)
	s.counts[nat.d][0][http.StatusOK].Add(1)
	st.nat = nil // answered: no longer counted as given up if the stream ends
	st.writeHead(b, false)
	st.send(sc.buf, true)
}

// openStream sends a stream's headers, opening events and first delta,
// as stream does, and schedules the next delta.
func (st *lstream) openStream(now time.Time) {
	e, s, nat := st.c.e, st.c.e.s, st.nat
	sc := s.getScript()
	nat.sc = sc
	if nat.d == Anthropic {
		s.anthropicStream(sc, nat.n, nat.req.model, &nat.rep, s.opt.Deltas)
	} else {
		s.openaiStream(sc, nat.n, nat.req.model, &nat.rep, nat.req.includeUsage, s.opt.Deltas)
	}
	nat.deltas = len(sc.ends) - 2
	nat.buf, nat.ends = sc.buf, sc.ends
	if len(sc.ends) <= len(nat.inline) {
		nat.ends = nat.inline[:copy(nat.inline[:], sc.ends)]
	}
	b := appendStatus(e.hdr[:0], http.StatusOK)
	b = appendField(b, "cache-control", hdrNoCache[0])
	b = appendField(b, "content-type", hdrSSE[0])
	b = appendField(b, idHeader(nat.d), s.appendRequestID(sc.scratch[:0], nat.n))
	b = appendField(b, "date", e.dateHeader(now))
	e.hdr = b
	st.writeHead(b, false)
	first := nat.segment(0)
	if nat.deltas > 0 {
		first = sc.buf[:sc.ends[1]] // the opening and the first delta at once
	}
	st.send(first, false)
	nat.i = 1
	e.join(st)
}

// due is when the answer's next part is: delta i, or the closing events
// once no delta is left (the whole answer, for JSON).
func (nat *native) due() time.Time {
	if nat.req.stream && nat.i < nat.deltas {
		return nat.at(nat.i)
	}
	return nat.deadline
}

// nextEvent sends what is due of a stream.
func (st *lstream) nextEvent(time.Time) {
	s, nat := st.c.e.s, st.nat
	if nat.i < nat.deltas {
		st.send(nat.segment(nat.i+1), false)
		nat.i++
		return
	}
	if nat.d == Anthropic || nat.req.includeUsage {
		s.bill(nat.rep.inputTokens, nat.rep.outputTokens)
	}
	s.counts[nat.d][1][http.StatusOK].Add(1)
	st.nat = nil
	st.send(nat.segment(nat.deltas+1), true)
	nat.release(s)
}

// release gives a stream's script back.
func (nat *native) release(s *Server) {
	if nat.sc != nil {
		s.putScript(nat.sc)
		nat.sc, nat.buf, nat.ends = nil, nil, nil
	}
}

// segment returns a stream's segment i: 0 the opening events, 1 to deltas
// the deltas, deltas+1 the closing events.
func (nat *native) segment(i int) []byte {
	from := 0
	if i > 0 {
		from = nat.ends[i-1]
	}
	return nat.buf[from:nat.ends[i]]
}

// at is when delta i is due, as in stream.
func (nat *native) at(i int) time.Time {
	return nat.start.Add(time.Duration(int64(nat.deadline.Sub(nat.start)) * int64(i) / int64(max(nat.deltas, 1))))
}

// gone counts an answer whose client went away before it was complete,
// as json and stream count theirs.
func (nat *native) gone(s *Server) {
	if !nat.req.stream {
		s.counts[nat.d][0][0].Add(1)
		return
	}
	if nat.d == Anthropic {
		s.bill(nat.rep.inputTokens, 1) // what message_start reported
	}
	s.counts[nat.d][1][http.StatusOK].Add(1)
	nat.release(s)
}

func idHeader(d Dialect) string {
	if d == Anthropic {
		return "request-id"
	}
	return "x-request-id"
}

// respondStatus answers with a bare status.
func (st *lstream) respondStatus(status int, now time.Time) {
	e := st.c.e
	b := appendStatus(e.hdr[:0], status)
	b = appendField(b, "date", e.dateHeader(now))
	e.hdr = b
	st.dispatched = true
	st.writeHead(b, true)
}

// writeHead sends a header block, split to the client's frame size.
func (st *lstream) writeHead(block []byte, end bool) {
	c := st.c
	first := block[:min(len(block), c.peerMaxFrame)]
	flags := http2.Flags(0)
	if end {
		flags |= http2.FlagHeadersEndStream
	}
	if len(first) == len(block) {
		flags |= http2.FlagHeadersEndHeaders
	}
	c.writeFrame(http2.FrameHeaders, flags, st.id, first)
	for block = block[len(first):]; len(block) > 0; {
		n := min(len(block), c.peerMaxFrame)
		flags = 0
		if n == len(block) {
			flags = http2.FlagContinuationEndHeaders
		}
		c.writeFrame(http2.FrameContinuation, flags, st.id, block[:n])
		block = block[n:]
	}
	if end {
		st.answered()
	}
}

// send sends answer bytes as far as the send windows allow and keeps the
// rest until they open; end ends the stream after them.
func (st *lstream) send(data []byte, end bool) {
	if st.closed {
		return
	}
	c := st.c
	if len(st.pending) > 0 {
		st.pending = append(st.pending, data...)
		data = st.pending
	}
	sent := 0
	for sent < len(data) {
		n := int(min(int64(len(data)-sent), int64(c.peerMaxFrame), c.sendWin, st.sendWin))
		if n <= 0 {
			break
		}
		flags := http2.Flags(0)
		if end && sent+n == len(data) {
			flags = http2.FlagDataEndStream
		}
		c.writeFrame(http2.FrameData, flags, st.id, data[sent:sent+n])
		sent += n
		c.sendWin -= int64(n)
		st.sendWin -= int64(n)
	}
	if rest := data[sent:]; len(rest) > 0 {
		if len(st.pending) > 0 {
			st.pending = st.pending[:copy(st.pending, rest)]
		} else {
			st.pending = append([]byte(nil), rest...)
		}
		st.endQueued = st.endQueued || end
		if !st.blocked {
			st.blocked = true
			c.blocked = append(c.blocked, st)
		}
		return
	}
	st.pending = st.pending[:0]
	if end {
		if len(data) == 0 {
			c.writeFrame(http2.FrameData, http2.FlagDataEndStream, st.id, nil)
		}
		st.answered()
	}
}

// writeFrame queues a frame of the answer. The framer would copy the
// payload twice, into a frame of its own and then into out; answers are
// most of what the engine writes, so their frames go straight into out.
func (c *lconn) writeFrame(t http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	n := len(payload)
	c.out = append(c.out, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags), byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	c.out = append(c.out, payload...)
}

// answered closes a stream whose answer is complete. If the request's
// body is still coming, the rest is not wanted: RST_STREAM(NO_ERROR), as
// x/net's server sends.
func (st *lstream) answered() {
	if !st.bodyDone {
		_ = st.c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
	}
	st.nat = nil
	st.c.closeStream(st)
}

// HPACK, written without the dynamic table: every header block stands
// alone, so the engine keeps no encoder state per connection.

// appendStatus appends :status, indexed when it is 200.
func appendStatus(b []byte, status int) []byte {
	if status == http.StatusOK {
		return append(b, 0x88) // static table entry 8
	}
	b = append(b, 0x08) // literal without indexing, name :status from the static table
	return appendHpackString(b, strconv.AppendInt(nil, int64(status), 10))
}

// appendField appends a literal field without indexing, with a new name.
func appendField[V string | []byte](b []byte, name string, value V) []byte {
	b = append(b, 0x00)
	b = appendHpackString(b, name)
	return appendHpackString(b, value)
}

// appendHpackString appends s as an HPACK string literal, not Huffman
// coded: its length is an integer with a 7-bit prefix (RFC 7541, 5.1).
func appendHpackString[V string | []byte](b []byte, s V) []byte {
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

// leanEvent is what a handler wrote, for the loop to send.
type leanEvent struct {
	st     *lstream
	status int         // non-zero: the answer's head comes first
	header http.Header // with it
	length int         // the Content-Length to add to the head; -1: none
	data   []byte
	end    bool
	reset  bool // the handler aborted: RST_STREAM(INTERNAL_ERROR)
}

// apply sends what a handler wrote.
func (e *engine) apply(ev *leanEvent, now time.Time) {
	st := ev.st
	if st.closed || st.c.dead {
		return
	}
	if ev.reset {
		st.c.reset(st, http2.ErrCodeInternal)
		return
	}
	if ev.status != 0 {
		e.hdr = appendHead(e.hdr[:0], ev, e.dateHeader(now))
		if ev.end && len(ev.data) == 0 {
			st.writeHead(e.hdr, true)
			return
		}
		st.writeHead(e.hdr, false)
	}
	if len(ev.data) > 0 || ev.end {
		st.send(ev.data, ev.end)
	}
}

// appendHead encodes a handler's answer head as x/net's server would send
// it: names in lower case, fields HTTP/2 forbids left out, Content-Type
// sniffed and Content-Length and Date added where the handler set none.
func appendHead(b []byte, ev *leanEvent, date []byte) []byte {
	b = appendStatus(b, ev.status)
	keys := make([]string, 0, len(ev.header))
	for k := range ev.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := strings.ToLower(k)
		if hopHeaders[name] || name == "te" {
			continue
		}
		for _, v := range ev.header[k] {
			b = appendField(b, name, v)
		}
	}
	if _, ok := ev.header["Content-Type"]; !ok && len(ev.data) > 0 {
		b = appendField(b, "content-type", http.DetectContentType(ev.data))
	}
	if _, ok := ev.header["Content-Length"]; !ok && ev.length >= 0 {
		b = appendField(b, "content-length", strconv.Itoa(ev.length))
	}
	if _, ok := ev.header["Date"]; !ok {
		b = appendField(b, "date", date)
	}
	return b
}

// runHandler answers the request with the ordinary handler, on a
// goroutine of its own; f, if set, is the fault the loop drew for it.
func (st *lstream) runHandler(r *http.Request, f *fault) {
	e := st.c.e
	e.answeredByHandler.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	if f != nil {
		ctx = context.WithValue(ctx, drawnFault{}, *f)
	}
	st.cancel = cancel
	r = r.WithContext(ctx)
	r.Header = r.Header.Clone() // the handler may change it; the engine's may be shared
	st.body = nil               // the handler reads its own reader of it
	w := &leanWriter{e: e, st: st, ctx: ctx, header: http.Header{}, head: r.Method == http.MethodHead}
	e.handlers.Add(1)
	go w.serve(r, cancel)
}

// leanWriter is the ResponseWriter of a handler run for the lean engine:
// what it writes goes to the loop as events.
type leanWriter struct {
	e        *engine
	st       *lstream // only carried, never read: it belongs to the loop
	ctx      context.Context
	header   http.Header
	snap     http.Header // the header as of WriteHeader
	status   int
	headSent bool
	flushed  bool
	head     bool // a HEAD request: no body
	buf      []byte
}

// flushAt is how much a handler buffers before it hands data over
// unasked.
const flushAt = 32 << 10

func (w *leanWriter) serve(r *http.Request, cancel context.CancelFunc) {
	defer w.e.handlers.Done()
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			// http.ErrAbortHandler is how the handler drops an answer;
			// anything else is a bug, reported, and the stream reset all
			// the same rather than the process stopped.
			if v != http.ErrAbortHandler {
				w.e.s.log.Error("mock provider: a handler panicked", "path", r.URL.Path, "panic", v)
			}
			w.e.post(leanEvent{st: w.st, reset: true})
			return
		}
		w.finish()
	}()
	w.e.s.ServeHTTP(w, r)
}

func (w *leanWriter) Header() http.Header { return w.header }

func (w *leanWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return // informational answers are not sent; only the first status counts
	}
	w.status = code
	w.snap = w.header.Clone()
}

func (w *leanWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.ctx.Err() != nil {
		return 0, errStreamGone
	}
	if w.head {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= flushAt {
		w.Flush()
	}
	return len(p), nil
}

// Flush hands what was written to the loop.
func (w *leanWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	ev := leanEvent{st: w.st, data: w.buf, length: -1}
	if !w.headSent {
		w.headSent = true
		ev.status, ev.header = w.status, w.snap
	}
	w.buf = nil
	w.flushed = true
	w.e.post(ev)
}

// finish hands the rest of the answer to the loop, ending the stream. An
// answer never flushed gets its Content-Length, as x/net gives it.
func (w *leanWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	ev := leanEvent{st: w.st, data: w.buf, length: -1, end: true}
	if !w.headSent {
		w.headSent = true
		ev.status, ev.header = w.status, w.snap
		if !w.flushed && !w.head {
			ev.length = len(w.buf)
		}
	}
	w.buf = nil
	w.e.post(ev)
}
