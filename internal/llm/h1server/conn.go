package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/straitgw/strait/internal/writebatch"
)

// conn is one client connection. Its goroutine (ServeConn's) reads each
// request and runs the handler; the watcher, on another, may cancel the
// request in flight; Shutdown and Close, on others, end it.
type conn struct {
	s       *Server
	id      uint64
	nc      net.Conn
	rc      syscall.RawConn // the socket, for the watcher; nil if none
	remote  string
	log     *slog.Logger
	watched bool

	// Read side, the connection goroutine's own.
	head    []byte        // bytes a sniffing listener read first, read again first
	br      *bufio.Reader // nil while waiting for a request: none is held then
	limit   int64         // bytes the reader may still take (the header's bound)
	first   [1]byte       // a request's first byte, read before br is taken
	hasByte bool
	scratch []byte    // where a response's head is put together
	writeDL time.Time // the write deadline last set (setWriteDeadline)

	mu     sync.Mutex
	state  int                     // idle (waiting for a request) or active
	cancel context.CancelCauseFunc // the request in flight's
	gone   bool                    // the client closed its side, or reset
	dead   bool                    // closed by Shutdown or Close
	// hijacked: the handler took the connection (Hijack); it is the
	// handler's to read, write and close.
	hijacked bool
}

const (
	stateIdle = iota
	stateActive
)

// errClientGone is the cause of a request's cancellation when its client
// closes the connection before the answer is complete.
var errClientGone = errors.New("the client closed the connection")

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String(), log: s.log()}
	if r, ok := nc.(writebatch.Replayer); ok {
		// A sniffing listener's connection: read the one beneath, its
		// bytes first (they are ours now).
		c.nc, c.head = r.Replayed()
	}
	wb, ok := c.nc.(*writebatch.Conn)
	if !ok {
		// Its reads and writes as raw system calls, each answer in one
		// write (writebatch.NewDirect); a socket waiting for its next
		// request holds no read buffer.
		wb = writebatch.NewDirect(c.nc)
		c.nc = wb
	}
	c.rc = wb.RawConn()
	return c
}

// Read serves the bufio.Reader: the replayed bytes, the first byte, then
// the socket, never past limit.
func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.hasByte {
		c.hasByte = false
		p[0] = c.first[0]
		return 1, nil
	}
	if c.limit <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	var n int
	var err error
	if len(c.head) > 0 {
		n = copy(p, c.head)
		c.head = c.head[n:]
	} else {
		n, err = c.nc.Read(p)
	}
	c.limit -= int64(n)
	return n, err
}

var errHeaderTooLarge = errors.New("h1server: request header too large")

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// takeReader gives the connection a pooled reader for a request that has
// begun.
func (c *conn) takeReader() {
	if c.br == nil {
		c.br = readers.Get().(*bufio.Reader)
		c.br.Reset(c)
	}
}

// dropReader gives the reader back if it holds nothing: a connection
// waiting for its next request, or for its answer, holds no buffer.
func (c *conn) dropReader() {
	if c.br != nil && c.br.Buffered() == 0 {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
}

// serve reads and answers requests until the connection ends.
func (c *conn) serve() error {
	defer c.close()
	for n := 0; ; n++ {
		c.dropReader()
		if !c.awaitRequest(n == 0) {
			return nil
		}
		if !c.setActive() {
			return nil
		}
		c.takeReader()
		c.limit = int64(c.s.maxHeaderBytes()) + 4096
		req, err := http.ReadRequest(c.br)
		if err != nil {
			c.badRequest(err)
			return err
		}
		c.limit = math.MaxInt64
		// ReadHeaderTimeout bounds the header, not the body: as with
		// net/http, a handler bounds its body's reading itself.
		_ = c.nc.SetReadDeadline(time.Time{})
		if !c.serveRequest(req) {
			return nil
		}
		if !c.setIdle() {
			return nil
		}
	}
}

// awaitRequest waits for a request's first byte, holding no buffer. The
// first request is due within ReadHeaderTimeout, the next ones within
// IdleTimeout.
func (c *conn) awaitRequest(first bool) bool {
	if c.br != nil || len(c.head) > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(orDefault(c.s.ReadHeaderTimeout, DefaultReadHeaderTimeout)))
		return true // pipelined: it is here
	}
	wait := orDefault(c.s.IdleTimeout, DefaultIdleTimeout)
	if first {
		wait = orDefault(c.s.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(wait))
	if c.closing() {
		// Shutdown found the connection idle before the deadline above
		// was set, which would have undone its own.
		return false
	}
	for {
		n, err := c.nc.Read(c.first[:])
		if n == 1 {
			c.hasByte = true
			_ = c.nc.SetReadDeadline(time.Now().Add(orDefault(c.s.ReadHeaderTimeout, DefaultReadHeaderTimeout)))
			return true
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !c.closing() {
				c.log.Debug("HTTP/1.1: connection ended while waiting for a request", "remote", c.remote, "err", err)
			}
			return false
		}
	}
}

// setActive marks a request begun; false if the connection was closed
// meanwhile. A request that began is answered even during Shutdown (with
// "Connection: close").
func (c *conn) setActive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = stateActive
	return !c.dead
}

// setIdle marks the connection waiting for its next request; false if it
// is to close instead (Shutdown).
func (c *conn) setIdle() bool {
	shutdown := c.s.shuttingDown()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = stateIdle
	return !c.dead && !shutdown && !c.gone
}

func (c *conn) isHijacked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hijacked
}

// closing reports whether Shutdown or Close is ending the connection.
func (c *conn) closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// closeIfIdle closes the connection if it waits for a request (Shutdown);
// an active one closes after its answer.
func (c *conn) closeIfIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateIdle && !c.dead {
		c.dead = true
		// The connection goroutine is in Read or about to be: a past
		// deadline ends it without racing with its use of the socket.
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// abort closes the connection now and cancels its request (Close).
func (c *conn) abort(cause error) {
	c.mu.Lock()
	c.dead = true
	cancel := c.cancel
	hijacked := c.hijacked
	c.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	if !hijacked {
		c.nc.Close()
	}
}

// hangUp is the watcher's report that the client closed its side or
// reset the connection: the request in flight, if any, is cancelled.
func (c *conn) hangUp() {
	c.mu.Lock()
	c.gone = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel(errClientGone)
	}
}

func (c *conn) close() {
	c.mu.Lock()
	c.dead = true
	hijacked := c.hijacked
	c.mu.Unlock()
	if hijacked {
		return
	}
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
	c.nc.Close()
}

// badRequest answers a request that could not be read, if it was a
// request at all, and logs why.
func (c *conn) badRequest(err error) {
	switch {
	case errors.Is(err, errHeaderTooLarge), c.limit <= 0:
		// The bound cuts a line short, which ReadRequest may take for a
		// malformed one: a request that reached the bound is too large
		// (net/http's hitReadLimit).
		c.log.Debug("HTTP/1.1: request header too large", "remote", c.remote, "limit", c.s.maxHeaderBytes())
		c.writeError(http.StatusRequestHeaderFieldsTooLarge, "request header fields too large")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// Gone before the request was whole: nobody to answer.
	case isTimeout(err):
		c.log.Debug("HTTP/1.1: request header not read in time", "remote", c.remote, "err", err)
	case strings.HasPrefix(err.Error(), "unsupported transfer encoding:"), strings.HasPrefix(err.Error(), "too many transfer encodings:"):
		// net/http's unsupportedTEError, both of its kinds.
		c.log.Debug("HTTP/1.1: bad request", "remote", c.remote, "err", err)
		c.writeError(http.StatusNotImplemented, "unsupported transfer encoding")
	default:
		c.log.Debug("HTTP/1.1: bad request", "remote", c.remote, "err", err)
		c.writeError(http.StatusBadRequest, "malformed request") // the detail, which quotes the request, is logged only
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// writeError answers with a plain-text error and "Connection: close", as
// net/http's server does for a request it cannot read.
func (c *conn) writeError(code int, msg string) {
	msg = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
	body := fmt.Sprintf("%d %s: %s", code, http.StatusText(code), msg)
	out := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
	c.setWriteDeadline()
	_, _ = io.WriteString(c.nc, out)
}

// setWriteDeadline bounds the next write by WriteTimeout. The deadline is
// moved only once half of it has passed, so that a stream's many small
// writes do not each move a timer in the runtime's heap: a write is
// bounded by at most WriteTimeout and at least half of it.
func (c *conn) setWriteDeadline() {
	d := orDefault(c.s.WriteTimeout, DefaultWriteTimeout)
	now := time.Now()
	if c.writeDL.Sub(now) >= d/2 {
		return
	}
	c.writeDL = now.Add(d)
	_ = c.nc.SetWriteDeadline(c.writeDL)
}

// check makes the checks net/http's server makes on a request beyond its
// parsing (those ReadRequest does not make itself), and returns the
// status and reason to refuse it with, or 0.
func check(req *http.Request) (int, string) {
	if req.ProtoMajor != 1 {
		return http.StatusHTTPVersionNotSupported, "unsupported protocol version"
	}
	// ReadRequest took the Host header out (into req.Host) and refused
	// more than one.
	if req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != http.MethodConnect {
		return http.StatusBadRequest, "missing required Host header"
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return http.StatusBadRequest, "malformed Host header"
	}
	// Values need no check here: ReadRequest's reader (net/textproto)
	// refuses a request with an invalid one, answered 400 as a
	// malformed request. It lets a space inside a name through.
	for k := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return http.StatusBadRequest, "invalid header name"
		}
	}
	if req.Method == http.MethodConnect {
		return http.StatusMethodNotAllowed, "CONNECT is not served"
	}
	return 0, ""
}

// serveRequest answers one request; it reports whether the connection
// may carry another.
func (c *conn) serveRequest(req *http.Request) bool {
	if code, why := check(req); code != 0 {
		c.log.Debug("HTTP/1.1: bad request", "remote", c.remote, "why", why)
		c.writeError(code, why)
		return false
	}
	keep := !req.Close
	if e, ok := req.Header["Expect"]; ok {
		if len(e) != 1 || !strings.EqualFold(e[0], "100-continue") {
			c.writeError(http.StatusExpectationFailed, "unsupported Expect")
			return false
		}
	}
	req.RemoteAddr = c.remote
	ctx, cancel := context.WithCancelCause(c.s.baseContext())
	req = req.WithContext(ctx)
	b := &body{c: c, rc: req.Body, cl: req.ContentLength}
	// An HTTP/1.0 client's 100-continue is ignored (RFC 9110, 10.1.1).
	b.sendContinue = req.Header["Expect"] != nil && req.ContentLength != 0 && req.ProtoAtLeast(1, 1)
	if req.ContentLength == 0 {
		b.eof = true
	}
	req.Body = b
	c.mu.Lock()
	c.cancel = cancel
	gone := c.gone
	c.mu.Unlock()
	if gone {
		cancel(errClientGone)
	}
	w := newResponse(c, req, b)
	c.run(w, req)
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
	cancel(nil)
	if c.isHijacked() {
		w.release()
		return false
	}
	w.finish()
	if !b.drain() {
		keep = false
	}
	keep = keep && !w.closeAfter
	w.release()
	return keep
}

// run runs the handler; a panic is logged and ends the connection.
func (c *conn) run(w *response, req *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				c.log.Error("HTTP/1.1: a handler panicked", "remote", c.remote, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			w.abandon()
		}
	}()
	if _, ok := req.Header["Upgrade"]; ok && c.s.Upgrade != nil {
		c.s.Upgrade.ServeHTTP(w, req)
		return
	}
	c.s.Handler.ServeHTTP(w, req)
}

// maxDrain is how much of a request body the handler left unread is read
// and dropped to keep the connection (net/http's bound too); past it, the
// connection closes.
const maxDrain = 256 << 10

// body is a request's body: it sends "100 Continue" before the first
// read if the client waits for one, bounds what the connection reads
// after the handler, and lets the connection's reader go once read.
type body struct {
	c            *conn
	rc           io.ReadCloser
	cl           int64 // -1: chunked
	read         int64
	eof          bool
	err          error // a read failed: the connection cannot go on
	closed       bool
	sendContinue bool // the client waits for "100 Continue", not sent yet
	headSent     bool // the answer's head is out: "100 Continue" cannot follow it
}

var errBodyClosed = errors.New("http: invalid Read on closed Body")

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.sendContinue && !b.headSent {
		b.sendContinue = false
		b.c.setWriteDeadline()
		if _, err := io.WriteString(b.c.nc, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			b.err = err
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if err == nil && b.cl >= 0 && b.read == b.cl {
		err = io.EOF // read to its length: say so now, not on the next read
	}
	switch {
	case err == io.EOF:
		b.eof = true
		b.c.dropReader()
	case err != nil:
		b.err = err
	}
	return n, err
}

// Close implements io.Closer; what is left unread is the connection's to
// drain or close over.
func (b *body) Close() error {
	b.closed = true
	return nil
}

// drain reads what the handler left of the body, up to maxDrain, and
// reports whether the connection can carry another request.
func (b *body) drain() bool {
	if b.eof {
		return true
	}
	if b.err != nil || b.sendContinue {
		// A client waiting for "100 Continue" that was not sent has not
		// sent its body: the connection cannot be read on.
		return false
	}
	if b.cl > maxDrain {
		return false
	}
	_ = b.c.nc.SetReadDeadline(time.Now().Add(orDefault(b.c.s.ReadHeaderTimeout, DefaultReadHeaderTimeout)))
	n, err := io.CopyN(io.Discard, b.rc, maxDrain+1)
	b.read += n
	return errors.Is(err, io.EOF)
}
