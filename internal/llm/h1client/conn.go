package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/straitgw/strait/internal/writebatch"
)

// conn is one connection, used by one request at a time.
type conn struct {
	t  *Transport
	wb *writebatch.Conn // the socket: direct writes, pooled read buffer
	nc net.Conn         // what requests go through: wb, or TLS over it
	// br reads the answer; taken from readers for each request.
	br *bufio.Reader
	// headLeft is what the response's head may still take of
	// MaxHeaderBytes while it is read; -1 once it has been.
	headLeft int
	// first is the answer's first byte, read before the reader was
	// taken; hasFirst while the reader has yet to read it.
	first    [1]byte
	hasFirst bool
	idleAt   time.Time
}

func newConn(t *Transport, nc net.Conn) *conn {
	wb := writebatch.NewDirect(nc)
	return &conn{t: t, wb: wb, nc: wb, headLeft: -1}
}

// readers hold a request's read buffer, given back when its connection
// goes idle.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// Read is the bufio.Reader's source: the connection, within what is left
// of the head's bound while the head is read.
func (c *conn) Read(p []byte) (int, error) {
	if c.hasFirst && len(p) > 0 {
		c.hasFirst = false
		p[0] = c.first[0]
		if c.headLeft > 0 {
			c.headLeft--
		}
		return 1, nil
	}
	if c.headLeft < 0 {
		return c.nc.Read(p)
	}
	if c.headLeft == 0 {
		return 0, errHeadTooLarge
	}
	if len(p) > c.headLeft {
		p = p[:c.headLeft]
	}
	n, err := c.nc.Read(p)
	c.headLeft -= n
	return n, err
}

var errHeadTooLarge = errors.New("the response's status line and headers exceed the client's limit")

// max1xx bounds the informational answers (100 Continue, 103 Early
// Hints) read before the final one.
const max1xx = 5

// send writes msg, a whole request. stop ends the context's hold on the
// connection; it is receive's to call.
func (c *conn) send(ctx context.Context, msg []byte) (stop func() bool, err error) {
	// A context that ends stops whatever read or write is in progress.
	stop = context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	_, err = c.nc.Write(msg)
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	if err != nil {
		stop()
		c.close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &writeError{fmt.Errorf("h1client: writing the request to %s: %w", c.t.opt.Addr, err)}
	}
	return stop, nil
}

// receive reads the answer's head to req.
func (c *conn) receive(ctx context.Context, req *http.Request, stop func() bool) (*http.Response, error) {
	// The wait for the answer holds no buffer: one byte is read first
	// (the socket's pooled buffer is taken only once bytes come), then
	// the reader is taken. Nothing at all is told apart from a head cut
	// short, which ReadResponse reports as io.ErrUnexpectedEOF too.
	_, err := io.ReadFull(c.nc, c.first[:])
	var resp *http.Response
	if err == nil {
		c.hasFirst = true
		c.br = readers.Get().(*bufio.Reader)
		c.br.Reset(c)
		c.headLeft = c.t.opt.MaxHeaderBytes
	}
	for n := 0; err == nil; n++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n == max1xx {
			err = fmt.Errorf("more than %d informational (1xx) responses", max1xx)
			break
		}
	}
	c.headLeft = -1
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		err = errors.New("101 Switching Protocols to a request that asked for no upgrade")
	}
	if err != nil {
		stop()
		c.close()
		return nil, c.readErr(ctx, err, true)
	}
	b := &body{c: c, ctx: ctx, r: resp.Body, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.finish(true, nil)
	} else {
		resp.Body = b
	}
	return resp, nil
}

// readErr names a failed read of the answer: the context's cause if it
// ended, else what went wrong with the connection.
func (c *conn) readErr(ctx context.Context, err error, head bool) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	what := "the response body"
	if head {
		what = "the response"
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("h1client: %s closed the connection before answering: %w", c.t.opt.Addr, io.ErrUnexpectedEOF)
		}
		if errors.Is(err, errHeadTooLarge) {
			return fmt.Errorf("h1client: reading the response from %s: its status line and headers exceed %d bytes", c.t.opt.Addr, c.t.opt.MaxHeaderBytes)
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("h1client: %s closed the connection in the middle of %s: %w", c.t.opt.Addr, what, err)
	}
	return fmt.Errorf("h1client: reading %s from %s: %w", what, c.t.opt.Addr, err)
}

// release makes c free for the next request.
func (c *conn) release() {
	c.br.Reset(nil)
	readers.Put(c.br)
	c.br = nil
	c.t.put(c)
}

// close closes c, freeing its slot. Its read buffer, if any, is left to
// the collector: a read may still be using it.
func (c *conn) close() {
	c.br = nil
	c.nc.Close()
	c.t.freeSlot()
}

// writeError marks a request that could not be written.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// body is a response's body. Read to its end, it gives its connection
// back to the pool; closed before, or failed, it closes the connection
// (an HTTP/1.1 connection cannot carry another answer until this one has
// been read whole).
type body struct {
	c    *conn
	ctx  context.Context
	r    io.ReadCloser
	stop func() bool
	keep bool // the connection may carry another request

	// mu guards over and err: Close may come while a Read is in progress.
	mu sync.Mutex
	// over is set by what ends the body: its Read at the end, a failed
	// Read, or Close; err is what Read returns from then on (nil: io.EOF).
	over bool
	err  error
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	over, oerr := b.over, b.err
	b.mu.Unlock()
	if over {
		if oerr != nil {
			return 0, oerr
		}
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		b.finish(true, nil)
		return n, io.EOF
	default:
		err = b.c.readErr(b.ctx, err, false)
		b.finish(false, err)
		return n, err
	}
}

// Close ends the body. Before its end, the connection is closed, which
// also ends a Read in progress.
func (b *body) Close() error {
	b.finish(false, errors.New("h1client: read on a closed response body"))
	return nil
}

// finish ends the body, once. Read to its end (ok), its connection goes
// back to the pool unless something stands against it: the server's
// Connection: close, a context that has ended, bytes beyond the answer.
// Otherwise the connection is closed, and err is what Read returns.
func (b *body) finish(ok bool, err error) {
	b.mu.Lock()
	if b.over {
		b.mu.Unlock()
		return
	}
	b.over, b.err = true, err
	b.mu.Unlock()
	stopped := b.stop()
	if ok && stopped && b.keep && b.c.br.Buffered() == 0 {
		b.c.release()
		return
	}
	b.c.close()
}

// bufs hold requests as they are written.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 64<<10 {
		return
	}
	*b = (*b)[:0]
	bufs.Put(b)
}

// appendRequest appends req, head and body, to *buf, reading the body to
// its end. Header names and values are checked: a request that would
// not be well-formed HTTP/1.1 is not sent.
func appendRequest(buf *[]byte, req *http.Request) (*[]byte, error) {
	if req.URL == nil {
		return buf, errors.New("h1client: request has no URL")
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if method == http.MethodConnect || !httpguts.ValidHeaderFieldName(method) {
		return buf, fmt.Errorf("h1client: method %q is not supported", method)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return buf, fmt.Errorf("h1client: host %q is not valid in a Host header", host)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	if req.ContentLength > 0 && !hasBody {
		return buf, fmt.Errorf("h1client: the request has a ContentLength of %d and no body", req.ContentLength)
	}
	var body []byte
	if hasBody && req.ContentLength <= 0 {
		// Of unknown length: read first, and sent with the length read.
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return buf, fmt.Errorf("h1client: reading the request body: %w", err)
		}
	}
	b := *buf
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue // this client's to write
		}
		if !httpguts.ValidHeaderFieldName(k) {
			*buf = b
			return buf, fmt.Errorf("h1client: header name %q is not valid", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				*buf = b
				return buf, fmt.Errorf("h1client: the value of header %s is not valid", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	n := int64(len(body))
	if req.ContentLength > 0 {
		n = req.ContentLength
	}
	if n > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	if body != nil || req.ContentLength <= 0 {
		b = append(b, body...)
		*buf = b
		return buf, nil
	}
	// Of known length: read straight into the message.
	at := len(b)
	b = slices.Grow(b, int(n))[:at+int(n)]
	*buf = b
	if _, err := io.ReadFull(req.Body, b[at:]); err != nil {
		return buf, fmt.Errorf("h1client: reading the request body (ContentLength %d): %w", n, err)
	}
	var one [1]byte
	if k, _ := req.Body.Read(one[:]); k > 0 {
		return buf, fmt.Errorf("h1client: the request body is longer than its ContentLength %d", n)
	}
	*buf = b
	return buf, nil
}
