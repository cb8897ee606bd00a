package h2server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/h2frames"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stream is one request: its handler's goroutine reads its body and
// writes its response; the connection's reader feeds the body and the
// windows. It is the handler's http.ResponseWriter.
type stream struct {
	c      *conn
	id     uint32
	req    *http.Request
	ctx    context.Context
	cancel context.CancelFunc
	body   body
	head   bool // a HEAD request: the response has no body
	// expectContinue: the client waits for 100 Continue before its body
	// (RFC 9110, 10.1.1), sent when the handler first reads it.
	expectContinue bool

	// Under c.mu.
	cond        sync.Cond // signalled when the body grows or ends, or the stream ends
	buf         []byte    // body received, not yet read: buf[bufOff:]
	bufOff      int
	declared    int64 // content-length, or -1
	received    int64
	recvWin     int64
	recvUnacked int64
	sendWin     int64
	remoteEnded bool  // END_STREAM received (or the body's end otherwise known)
	bodyClosed  bool  // the handler closed the body: what arrives is dropped
	err         error // why the stream ended early: reset by either side, or the connection
	readDL      time.Time
	readTimer   *time.Timer
	writeDL     time.Time
	writeWaitDL time.Time // when the write waiting for window gives up

	// The handler's own (its goroutine's).
	header      http.Header
	status      int
	wroteHeader bool
	sentHeaders bool
	clen        int64 // the content-length the handler set, or -1
	written     int64

	// Under c.wmu.
	ended bool // END_STREAM or RST_STREAM sent
}

func (st *stream) aborted() bool { return st.err != nil }

// abortLocked ends the stream early, under c.mu.
func (st *stream) abortLocked(err error) {
	if st.err == nil {
		st.err = err
	}
	st.cond.Broadcast()
	st.cancel()
}

// resetByPeer acts on the client's RST_STREAM, under c.mu.
func (st *stream) resetByPeer(code http2.ErrCode) {
	st.abortLocked(http2.StreamError{StreamID: st.id, Code: code, Cause: errors.New("reset by the client")})
	st.remoteEnded = true
	st.c.flow.Broadcast()
}

// abortWrite resets a stream whose write gave up (its deadline passed,
// or its context ended), so that the client does not take what was
// written for the whole answer.
func (st *stream) abortWrite(err error) {
	c := st.c
	c.mu.Lock()
	already := st.err != nil
	st.abortLocked(err)
	c.flow.Broadcast()
	c.mu.Unlock()
	if !already {
		st.sendRST(http2.ErrCodeCancel)
	}
}

// sendRST sends RST_STREAM unless the stream has ended on the wire.
func (st *stream) sendRST(code http2.ErrCode) {
	c := st.c
	c.wmu.Lock()
	if !st.ended {
		st.ended = true
		c.wbuf = h2frames.AppendRSTStream(c.wbuf[:0], st.id, code)
		_ = c.writeLocked()
	}
	c.wmu.Unlock()
}

// run runs the handler and ends the stream.
func (st *stream) run() {
	defer st.c.handlers.Done()
	st.clen = -1
	panicked := true
	defer func() {
		if panicked {
			v := recover()
			if v != http.ErrAbortHandler {
				st.c.log.Error("HTTP/2: a handler panicked", "remote", st.c.remote, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			st.sendRST(http2.ErrCodeInternal)
		}
		st.finish()
	}()
	st.c.s.Handler.ServeHTTP(st, st.req)
	panicked = false
	st.endResponse()
}

// endResponse ends the response once the handler has returned.
func (st *stream) endResponse() {
	c := st.c
	c.mu.Lock()
	aborted := st.aborted()
	c.mu.Unlock()
	if aborted {
		return
	}
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	switch {
	case !st.sentHeaders:
		if st.clen < 0 && st.bodyAllowed() && !st.head {
			st.header.Set("Content-Length", "0") // as x/net says of an empty body
			st.clen = 0
		}
		_ = st.writeHeaders(nil, true)
	case st.clen >= 0 && st.written < st.clen && !st.head:
		// Less than the handler promised: the client must not take a
		// short body for a whole one.
		st.sendRST(http2.ErrCodeInternal)
		return
	default:
		trailers := st.trailers()
		maxFrame := c.maxFrame()
		c.wmu.Lock()
		if !st.ended {
			st.ended = true
			if len(trailers) > 0 {
				b := c.henc.Begin(c.hbuf[:0])
				for _, f := range trailers {
					b = h2frames.AppendField(b, f.Name, f.Value, false)
				}
				c.hbuf = b
				c.wbuf = h2frames.AppendHeaderBlock(c.wbuf[:0], st.id, b, true, maxFrame)
			} else {
				c.wbuf = h2frames.AppendData(c.wbuf[:0], st.id, nil, true)
			}
			_ = c.writeLocked()
		}
		c.wmu.Unlock()
	}
}

// trailers returns the response's trailer fields: those the handler
// declared in its Trailer header and set, and those it set with
// http.TrailerPrefix, as net/http sends them.
func (st *stream) trailers() []hpack.HeaderField {
	var out []hpack.HeaderField
	add := func(k string, vs []string) {
		if !httpguts.ValidHeaderFieldName(k) || !validResponseField(k) {
			return
		}
		name := lowerKey(k)
		for _, v := range vs {
			if httpguts.ValidHeaderFieldValue(v) {
				out = append(out, hpack.HeaderField{Name: name, Value: v})
			}
		}
	}
	for _, decl := range st.header["Trailer"] {
		for _, k := range strings.Split(decl, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if vs := st.header[k]; len(vs) > 0 {
				add(k, vs)
			}
		}
	}
	for k, vs := range st.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			add(http.CanonicalHeaderKey(name), vs)
		}
	}
	return out
}

// finish removes the stream once its handler has returned; a client
// still sending its body is told to stop.
func (st *stream) finish() {
	c := st.c
	c.mu.Lock()
	stillSending := !st.remoteEnded && st.err == nil
	if st.err == nil {
		st.err = errHandlerDone
	}
	unread := int64(len(st.buf) - st.bufOff)
	putBodyBuf(st.buf)
	st.buf, st.bufOff = nil, 0
	if st.readTimer != nil {
		st.readTimer.Stop()
	}
	delete(c.streams, st.id)
	drainDone := c.closeWhenIdle && len(c.streams) == 0
	if len(c.streams) == 0 && c.idleTimer != nil {
		c.idleSince = time.Now()
		c.idleTimer.Reset(orDefault(c.s.IdleTimeout, DefaultIdleTimeout))
	}
	c.flow.Broadcast()
	c.mu.Unlock()
	st.cancel()
	if stillSending {
		// The answer is complete (or reset): the client may stop sending
		// its body (RFC 9113, 8.1), whether or not END_STREAM went out.
		_ = c.writeFrames(func(b []byte) []byte { return h2frames.AppendRSTStream(b, st.id, http2.ErrCodeNo) })
	}
	_ = c.giveBack(nil, unread)
	if drainDone {
		c.closeGracefully()
	}
}

var errHandlerDone = errors.New("h2server: the handler has returned")

// Header implements http.ResponseWriter.
func (st *stream) Header() http.Header {
	if st.header == nil {
		st.header = make(http.Header)
	}
	return st.header
}

// WriteHeader implements http.ResponseWriter. Informational (1xx)
// answers are not sent.
func (st *stream) WriteHeader(code int) {
	if st.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return
	}
	st.wroteHeader = true
	st.status = code
	if st.header == nil {
		st.header = make(http.Header)
	}
	if v := st.header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			st.clen = n
		} else {
			st.header.Del("Content-Length")
		}
	}
}

func (st *stream) bodyAllowed() bool {
	return st.status != http.StatusNoContent && st.status != http.StatusNotModified
}

// Write implements http.ResponseWriter. It blocks while the client's
// flow-control windows are shut, until they open, the stream or
// connection ends, the request's context is done, or the write deadline
// (or WriteTimeout) passes.
func (st *stream) Write(p []byte) (int, error) {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	if !st.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if st.head {
		return len(p), nil
	}
	if st.clen >= 0 && st.written+int64(len(p)) > st.clen {
		return 0, http.ErrContentLength
	}
	done := 0
	if !st.sentHeaders {
		if _, ok := st.header["Content-Type"]; !ok && len(p) > 0 {
			st.header.Set("Content-Type", http.DetectContentType(p))
		}
		// The headers and the first DATA frame leave in one write when
		// the windows let the data go at once, as they do for most
		// answers; otherwise the headers go ahead of the wait.
		if n := st.takeWindow(len(p)); n > 0 {
			st.written += int64(n)
			last := st.clen >= 0 && st.written == st.clen
			if err := st.writeHeaders(p[:n], last); err != nil {
				return 0, err
			}
			p = p[n:]
			done = n
		} else if err := st.writeHeaders(nil, false); err != nil {
			return 0, err
		}
	}
	for len(p) > 0 {
		n, err := st.awaitWindow(len(p))
		if err != nil {
			st.abortWrite(err)
			return done, err
		}
		st.written += int64(n)
		last := st.clen >= 0 && st.written == st.clen
		if err := st.writeData(p[:n], last); err != nil {
			return done, err
		}
		p = p[n:]
		done += n
	}
	return done, nil
}

// WriteString writes s as Write would.
func (st *stream) WriteString(s string) (int, error) { return st.Write([]byte(s)) }

// Flush implements http.Flusher: frames are written as the handler
// writes them, so there is nothing to flush but the headers.
func (st *stream) Flush() { _ = st.FlushError() }

// FlushError sends the response's headers if they are not sent yet.
func (st *stream) FlushError() error {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	if !st.sentHeaders {
		return st.writeHeaders(nil, false)
	}
	return nil
}

// SetReadDeadline bounds the reads of the request body: past it they
// fail with an error for which os.IsTimeout holds. A body that has all
// come (a JSON request's, most often, by the time its handler runs)
// never waits, so no timer is armed to wake its reader.
func (st *stream) SetReadDeadline(t time.Time) error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st.readDL = t
	if st.readTimer != nil {
		st.readTimer.Stop()
		st.readTimer = nil
	}
	if !t.IsZero() && !st.remoteEnded {
		st.readTimer = time.AfterFunc(time.Until(t), func() {
			c.mu.Lock()
			st.cond.Broadcast()
			c.mu.Unlock()
		})
	}
	return nil
}

// SetWriteDeadline bounds the time a write may wait for the client's
// flow-control window.
func (st *stream) SetWriteDeadline(t time.Time) error {
	st.c.mu.Lock()
	st.writeDL = t
	st.c.mu.Unlock()
	return nil
}

// takeWindow takes up to want bytes from the windows if they are open
// now, and returns how many; it does not wait. 0 also when the stream
// cannot be written: awaitWindow says why.
func (st *stream) takeWindow(want int) int {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.unwritable() != nil {
		return 0
	}
	return st.take(want)
}

// unwritable says why the stream can no longer be written, or is nil;
// c.mu is held.
func (st *stream) unwritable() error {
	switch {
	case st.err != nil:
		return st.err
	case st.c.closed:
		return errConnClosed
	}
	return st.ctx.Err()
}

// take takes up to want bytes from the open windows, within the frame
// size, and returns how many (0 while either is shut); c.mu is held.
func (st *stream) take(want int) int {
	c := st.c
	n := max(min(int64(want), int64(c.peerMaxFrm), st.sendWin, c.sendWin), 0)
	st.sendWin -= n
	c.sendWin -= n
	return int(n)
}

// awaitWindow waits until up to want bytes may be sent, takes them from
// the windows and returns how many.
func (st *stream) awaitWindow(want int) (int, error) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var stop func() bool
	var timer *time.Timer
	defer func() {
		if stop != nil {
			stop()
			timer.Stop()
		}
	}()
	for {
		if err := st.unwritable(); err != nil {
			return 0, err
		}
		if n := st.take(want); n > 0 {
			return n, nil
		}
		dl := time.Now().Add(c.wtimeout)
		if !st.writeDL.IsZero() && st.writeDL.Before(dl) {
			dl = st.writeDL
		}
		if stop == nil {
			wake := func() { c.mu.Lock(); c.flow.Broadcast(); c.mu.Unlock() }
			stop = context.AfterFunc(st.ctx, wake)
			timer = time.AfterFunc(time.Until(dl), wake)
			st.writeWaitDL = dl
		} else if !time.Now().Before(st.writeWaitDL) {
			return 0, os.ErrDeadlineExceeded
		}
		c.flow.Wait()
	}
}

// writeHeaders sends the response's HEADERS and, unless data is nil, its
// first DATA frame with them in one batch; end ends the stream with the
// last frame sent.
func (st *stream) writeHeaders(data []byte, end bool) error {
	c := st.c
	maxFrame := c.maxFrame()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	st.sentHeaders = true
	if st.ended {
		return st.endedErr()
	}
	c.wbuf = st.appendHeaders(c.wbuf[:0], end && data == nil, maxFrame)
	if data != nil {
		c.wbuf = h2frames.AppendData(c.wbuf, st.id, data, end)
	}
	if end {
		st.ended = true
	}
	return c.writeLocked()
}

// appendHeaders appends the response's HEADERS (and CONTINUATIONs) to
// b; wmu is held, for the encoder and c.hbuf.
func (st *stream) appendHeaders(dst []byte, endStream bool, maxFrame int) []byte {
	c := st.c
	b := h2frames.AppendStatus(c.henc.Begin(c.hbuf[:0]), st.status)
	for k, vs := range st.header {
		if !validResponseField(k) {
			continue
		}
		name := lowerKey(k)
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				continue
			}
			b = h2frames.AppendField(b, name, v, false)
		}
	}
	dst = h2frames.AppendHeaderBlock(dst, st.id, b, endStream, maxFrame)
	c.hbuf = b
	if cap(c.hbuf) > 64<<10 {
		c.hbuf = nil // a large header block passed; do not keep its room
	}
	return dst
}

// writeData sends p (within the windows and the frame size) as one DATA
// frame.
func (st *stream) writeData(p []byte, endStream bool) error {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if st.ended {
		return st.endedErr()
	}
	if endStream {
		st.ended = true
	}
	c.wbuf = h2frames.AppendData(c.wbuf[:0], st.id, p, endStream)
	return c.writeLocked()
}

// writeContinue sends 100 Continue, unless the response has begun.
func (st *stream) writeContinue() {
	if st.sentHeaders {
		return
	}
	c := st.c
	maxFrame := c.maxFrame()
	c.wmu.Lock()
	if !st.ended {
		c.hbuf = h2frames.AppendStatus(c.henc.Begin(c.hbuf[:0]), http.StatusContinue)
		c.wbuf = h2frames.AppendHeaderBlock(c.wbuf[:0], st.id, c.hbuf, false, maxFrame)
		_ = c.writeLocked()
	}
	c.wmu.Unlock()
}

// endedErr is a write's error once the stream has ended on the wire.
func (st *stream) endedErr() error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.err != nil {
		return st.err
	}
	return errors.New("h2server: write after the response ended")
}

// validResponseField reports whether a handler's header field goes on
// the wire: HTTP/2 has no connection-specific fields, and those named
// with http.TrailerPrefix are trailers.
func validResponseField(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te":
		return false
	}
	return !strings.HasPrefix(k, http.TrailerPrefix) && httpguts.ValidHeaderFieldName(k)
}

// lowerCache maps the header names handlers use to their HTTP/2 (lower
// case) form, so that a response's names cost no allocation after the
// first: strings.ToLower allocates for every canonical name. Names come
// from handlers, not from clients, so the set is small; it is bounded all
// the same, and a name past the bound is lowered each time.
var (
	lowerCache sync.Map // string → string
	lowerCount atomic.Int32
)

const maxLowerCache = 1024

func lowerKey(k string) string {
	if l, ok := lowerCache.Load(k); ok {
		return l.(string)
	}
	l := strings.ToLower(k)
	if lowerCount.Load() < maxLowerCache {
		if _, loaded := lowerCache.LoadOrStore(k, l); !loaded {
			lowerCount.Add(1)
		}
	}
	return l
}

// body is a request's body, fed by the connection's reader.
type body struct{ st *stream }

// Read reads what the client has sent, waiting for more. Window is given
// back to the client as the handler reads.
func (b *body) Read(p []byte) (int, error) {
	st := b.st
	c := st.c
	if st.expectContinue {
		st.expectContinue = false
		st.writeContinue()
	}
	c.mu.Lock()
	for {
		if st.bodyClosed {
			c.mu.Unlock()
			return 0, errBodyClosed
		}
		if n := len(st.buf) - st.bufOff; n > 0 {
			k := copy(p, st.buf[st.bufOff:])
			st.bufOff += k
			if st.bufOff == len(st.buf) {
				if cap(st.buf) > 64<<10 || st.remoteEnded {
					putBodyBuf(st.buf)
					st.buf = nil
				} else {
					st.buf = st.buf[:0]
				}
				st.bufOff = 0
			}
			c.mu.Unlock()
			_ = c.giveBack(st, int64(k))
			return k, nil
		}
		switch {
		case st.remoteEnded && (st.err == nil || errors.Is(st.err, errHandlerDone)):
			c.mu.Unlock()
			return 0, io.EOF
		case st.err != nil:
			err := st.err
			c.mu.Unlock()
			return 0, err
		case c.closed:
			c.mu.Unlock()
			return 0, errConnClosed
		case !st.readDL.IsZero() && !time.Now().Before(st.readDL):
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		st.cond.Wait()
	}
}

// Close drops the body: what is buffered and what still arrives.
func (b *body) Close() error {
	st := b.st
	c := st.c
	c.mu.Lock()
	unread := int64(len(st.buf) - st.bufOff)
	putBodyBuf(st.buf)
	st.buf, st.bufOff = nil, 0
	st.bodyClosed = true
	c.mu.Unlock()
	return c.giveBack(nil, unread)
}

var errBodyClosed = errors.New("h2server: request body closed")

// Request bodies are buffered between the connection's reader and the
// handler; most are a few KiB and read once, so their buffers are reused
// rather than left to the collector. Larger ones are not kept.
const maxPooledBody = 16 << 10

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// getBodyBuf returns an empty buffer for a body whose first frame
// carries n bytes.
func getBodyBuf(n int) []byte {
	if n > maxPooledBody {
		return nil
	}
	return (*bodyBufs.Get().(*[]byte))[:0]
}

// putBodyBuf gives b back once nothing refers to it: the reader appends
// under c.mu, and Read copies out of it under c.mu.
func putBodyBuf(b []byte) {
	if cap(b) < 4<<10 || cap(b) > maxPooledBody {
		return
	}
	b = b[:0]
	bodyBufs.Put(&b)
}
