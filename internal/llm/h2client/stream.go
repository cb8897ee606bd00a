package h2client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"

	"github.com/straitgw/strait/internal/h2frames"
	"golang.org/x/net/http2"
)

// stream is one request and its response. Its state is under its
// connection's mu.
type stream struct {
	c   *conn
	id  uint32
	req *http.Request
	// ready is signalled when the response's headers, data, its end or
	// an error arrive, if waiting.
	ready   sync.Cond
	waiting bool

	sendWindow int32
	// sent is set once the request's last frame is written.
	sent bool
	// resp is allocated when the headers come, not with the stream: a
	// request in flight waits for its answer without it.
	resp   *http.Response
	buf    []byte  // response data received and not yet read
	off    int     // read position in buf
	pooled *[]byte // buf's pool entry, if it came from the pool
	ended  bool    // END_STREAM received
	err    error   // why the stream failed
	closed bool    // removed from the connection
	// recvWindow is what the server may still send on the stream;
	// consumed is data read and not yet given back.
	recvWindow int
	consumed   int
	// stop ends the context.AfterFunc that cancels the stream.
	stop func() bool
}

// fail ends s with err unless it has ended already; c.mu is held.
func (s *stream) fail(err error) {
	if s.err == nil && !(s.ended && s.off == len(s.buf) && s.resp != nil) {
		s.err = err
	}
	s.c.flow.Broadcast() // its body may be waiting for a window
	if s.waiting {
		s.ready.Signal()
	}
}

// roundTrip sends req on a stream reserved on c.
func (c *conn) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	s := &stream{c: c, req: req, recvWindow: streamWindow}
	s.ready.L = &c.mu
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	// writeHeaders returns with the write lock held: the body's first
	// frames join the HEADERS in one write.
	if err := c.writeHeaders(s, body == nil); err != nil {
		closeBody(req)
		return nil, err
	}
	// From here the stream is on the connection: the context's end
	// resets it, and wakes the body's writer if it waits for a window.
	s.stop = context.AfterFunc(ctx, func() { s.cancel(context.Cause(ctx)) })
	var err error
	if body == nil {
		err = c.flushLocked()
		c.wmu.Unlock()
	} else {
		err = c.writeBody(s, body)
		body.Close()
	}
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	if err != nil {
		s.cancel(err)
	}
	c.mu.Lock()
	if err == nil {
		s.sent = true
		if s.ended && !s.closed {
			c.closeStream(s)
		}
	}
	for s.resp == nil && s.err == nil {
		s.waiting = true
		s.ready.Wait()
		s.waiting = false
	}
	if s.err != nil && (s.resp == nil || s.off == len(s.buf)) {
		// A failure before the answer, or one that left nothing to read.
		err := s.err
		resp := s.resp
		c.closeStream(s)
		c.unlock()
		s.stop()
		if resp == nil {
			return nil, err
		}
		resp.Body = errBody{err}
		return resp, nil
	}
	resp := s.resp
	c.unlock()
	return resp, nil
}

// writeHeaders assigns s its ID and puts its HEADERS in c.wbuf. It
// returns with the write lock held, unless it fails.
func (c *conn) writeHeaders(s *stream, endStream bool) error {
	req := s.req
	c.wmu.Lock()
	c.mu.Lock()
	if c.err != nil || c.werr != nil {
		err := c.err
		if err == nil {
			err = &ConnError{Addr: c.addr, Err: c.werr}
		}
		if err == errClosedIdle {
			err = &ConnError{Addr: c.addr, Err: err}
		}
		// The connection ended between being picked and being used:
		// nothing was sent, so the request may go on another.
		err = &errRetry{err: err, c: c}
		c.release()
		c.unlock()
		c.wmu.Unlock()
		return err
	}
	if c.goingAway {
		c.release()
		c.unlock()
		c.wmu.Unlock()
		return &errRetry{err: &ConnError{Addr: c.addr, Err: errors.New("the server is going away")}, c: c}
	}
	s.id = c.nextID
	c.nextID += 2
	s.sendWindow = c.initWindow
	c.streams[s.id] = s
	maxFrame := c.maxFrame
	c.mu.Unlock()

	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	scheme := "http"
	if c.t.opt.TLS != nil {
		scheme = "https"
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	b := c.henc.Begin(c.hbuf[:0])
	b = h2frames.AppendField(b, ":method", method, false)
	b = h2frames.AppendField(b, ":scheme", scheme, false)
	b = h2frames.AppendField(b, ":authority", host, false)
	b = h2frames.AppendField(b, ":path", req.URL.RequestURI(), false)
	for k, vs := range req.Header {
		name, ok := fieldName(k)
		if !ok {
			continue
		}
		for _, v := range vs {
			if name == "te" && v != "trailers" {
				continue
			}
			b = h2frames.AppendField(b, name, v, name == "authorization" || name == "x-api-key")
		}
	}
	if !endStream && req.ContentLength > 0 {
		var n [20]byte
		b = h2frames.AppendField(b, "content-length", string(strconv.AppendInt(n[:0], req.ContentLength, 10)), false)
	}
	c.hbuf = b
	c.wbuf = h2frames.AppendHeaderBlock(c.wbuf[:0], s.id, b, endStream, maxFrame)
	return nil
}

// flushLocked writes c.wbuf; wmu is held.
func (c *conn) flushLocked() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.wmu.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	if cap(c.wbuf) > maxKeptWriteBuf {
		c.wbuf = nil // a large body passed; do not keep its room
	}
	if err != nil {
		c.werr = err
		go c.fail(fmt.Errorf("write: %w", err), http2.ErrCodeNo)
		return &ConnError{Addr: c.addr, Err: err}
	}
	return nil
}

const (
	// maxDataFrame bounds a DATA frame the client writes, whatever the
	// server allows, so that the write buffer stays small.
	maxDataFrame = 64 << 10
	// maxKeptWriteBuf is the largest write buffer a connection keeps
	// between writes.
	maxKeptWriteBuf = 256 << 10
)

// writeBody sends body as DATA frames within the windows, the last with
// END_STREAM. The frames follow the HEADERS in c.wbuf, written at once
// when the body fits the windows. Called with wmu held (writeHeaders
// left it so); it is released while waiting for a window, and at the end.
func (c *conn) writeBody(s *stream, body io.Reader) error {
	locked := true
	defer func() {
		if locked {
			c.wmu.Unlock()
		}
	}()
	var eof bool
	for !eof {
		// Wait for room in both windows.
		c.mu.Lock()
		for s.err == nil && !s.ended && c.err == nil && (s.sendWindow <= 0 || c.sendWindow <= 0) {
			if len(c.wbuf) > 0 || c.wmu.Owed() {
				c.mu.Unlock()
				if err := c.flushLocked(); err != nil {
					return err
				}
				// What is queued goes out before this waits.
				c.wmu.Unlock()
				c.wmu.Lock()
				c.mu.Lock()
				continue
			}
			c.wmu.Unlock() // nothing is owed
			locked = false
			c.flow.Wait()
			c.mu.Unlock()
			c.wmu.Lock()
			locked = true
			c.mu.Lock()
		}
		if err := s.err; err != nil {
			c.mu.Unlock()
			return err
		}
		if err := c.err; err != nil {
			c.mu.Unlock()
			return err
		}
		if s.ended {
			// The server answered before reading the whole request: the
			// rest is not wanted.
			c.mu.Unlock()
			c.write2RST(s.id)
			return nil
		}
		n := min(int(s.sendWindow), int(c.sendWindow), c.maxFrame, maxDataFrame)
		c.mu.Unlock()
		if lr, ok := body.(interface{ Len() int }); ok {
			n = min(n, max(lr.Len(), 0)) // room for what is left, not for a whole frame
		}

		at := len(c.wbuf)
		c.wbuf = h2frames.AppendHeader(c.wbuf, 0, http2.FrameData, 0, s.id)
		start := len(c.wbuf)
		c.wbuf = grow(c.wbuf, n)
		got, err := readFull(body, c.wbuf[start:start+n])
		c.wbuf = c.wbuf[:start+got]
		if err == io.EOF {
			eof = true
		} else if err != nil {
			c.wbuf = c.wbuf[:at]
			c.flushLocked()
			c.write2RST(s.id)
			return fmt.Errorf("reading the request body: %w", err)
		}
		h2frames.PutLength(c.wbuf, at, got)
		if eof {
			c.wbuf[at+4] |= byte(http2.FlagDataEndStream)
		}
		c.mu.Lock()
		s.sendWindow -= int32(got)
		c.sendWindow -= int64(got)
		c.mu.Unlock()
	}
	return c.flushLocked()
}

// write2RST appends an RST_STREAM(CANCEL) for id and writes it; wmu is
// held.
func (c *conn) write2RST(id uint32) {
	c.wbuf = h2frames.AppendRSTStream(c.wbuf, id, http2.ErrCodeCancel)
	c.flushLocked()
}

// grow extends b by n bytes of room.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// readFull reads into p until it is full or the reader ends; io.EOF is
// returned with the last bytes, when the reader has no more.
func readFull(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	if lr, ok := r.(interface{ Len() int }); ok && lr.Len() == 0 {
		return n, io.EOF
	}
	return n, nil
}

// fieldName returns the HTTP/2 name of header k, or false for headers
// HTTP/2 does not carry.
func fieldName(k string) (string, bool) {
	switch k {
	case "Content-Type":
		return "content-type", true
	case "Authorization":
		return "authorization", true
	case "Accept":
		return "accept", true
	case "User-Agent":
		return "user-agent", true
	case "Accept-Encoding":
		return "accept-encoding", true
	case "X-Api-Key":
		return "x-api-key", true
	}
	name := strings.ToLower(k)
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "content-length":
		return "", false
	}
	return name, true
}

// cancel fails s with err (the request's context ended, or its body
// was closed early) and resets it if it is still open.
func (s *stream) cancel(err error) {
	c := s.c
	c.mu.Lock()
	if s.closed {
		if s.err == nil && (s.off < len(s.buf) || !s.ended) {
			s.err = err
		}
		c.mu.Unlock()
		return
	}
	s.fail(err)
	c.closeStream(s)
	id := s.id
	c.unlock()
	c.write(func(b []byte) []byte { return h2frames.AppendRSTStream(b, id, http2.ErrCodeCancel) })
}

// onHeaders takes a HEADERS block for s; c.mu is held. An error is a
// stream error.
func (s *stream) onHeaders(f *decodedBlock) error {
	if f.truncated {
		return fmt.Errorf("the response's header list is larger than %d bytes", maxHeaderListSize)
	}
	if s.resp != nil {
		if !f.ended {
			return errors.New("trailers without END_STREAM")
		}
		s.end()
		return nil
	}
	status := f.status()
	if len(status) != 3 || status[0] < '1' || status[0] > '5' {
		return fmt.Errorf("invalid :status %q", status)
	}
	code, err := strconv.Atoi(status)
	if err != nil {
		return fmt.Errorf("invalid :status %q", status)
	}
	if code < 200 {
		if code == 101 {
			return errors.New(":status 101 is not allowed in HTTP/2")
		}
		if f.ended {
			return fmt.Errorf("informational :status %d ends the stream", code)
		}
		return nil // 1xx: the real answer follows
	}
	regular := f.fields[len(f.fields)-f.regularCount():]
	h := make(http.Header, len(regular))
	resp := &http.Response{
		Status:        statusLine(status, code),
		StatusCode:    code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		ContentLength: -1,
		Request:       s.req,
		Body:          (*body)(s),
	}
	// One backing array for every value: most names come once.
	vals := make([]string, len(regular))
	for i, hf := range regular {
		k := canonicalName(hf.Name)
		if prev, ok := h[k]; ok {
			h[k] = append(prev, hf.Value)
		} else {
			vals[i] = hf.Value
			h[k] = vals[i : i+1 : i+1]
		}
		if k == "Content-Length" {
			if n, err := strconv.ParseInt(hf.Value, 10, 64); err == nil && n >= 0 {
				resp.ContentLength = n
			}
		}
	}
	s.resp = resp
	if f.ended {
		s.end()
	}
	if s.waiting {
		s.ready.Signal()
	}
	return nil
}

// canonicalName is http.CanonicalHeaderKey without its allocation for
// the names providers send on every answer.
func canonicalName(name string) string {
	switch name {
	case "content-type":
		return "Content-Type"
	case "content-length":
		return "Content-Length"
	case "date":
		return "Date"
	case "server":
		return "Server"
	case "x-request-id":
		return "X-Request-Id"
	case "request-id":
		return "Request-Id"
	case "cache-control":
		return "Cache-Control"
	}
	return http.CanonicalHeaderKey(name)
}

// statusLine is the Status of a response: "200 OK".
func statusLine(status string, code int) string {
	if code == http.StatusOK {
		return "200 OK"
	}
	return status + " " + http.StatusText(code)
}

// end marks the server's side of s ended; c.mu is held.
func (s *stream) end() {
	s.ended = true
	if s.sent {
		s.c.closeStream(s)
	}
	if s.waiting {
		s.ready.Signal()
	}
}

// onData takes a DATA frame for s; c.mu is held.
func (s *stream) onData(f *http2.DataFrame) error {
	if s.resp == nil {
		return errors.New("DATA before the response's HEADERS")
	}
	if s.ended {
		return errors.New("DATA after END_STREAM")
	}
	n := int(f.Length)
	if n > s.recvWindow {
		return connErr{code: http2.ErrCodeFlowControl, msg: fmt.Sprintf("the server sent more data than stream %d's window", s.id)}
	}
	s.recvWindow -= n
	s.consumed += n - len(f.Data()) // padding
	if s.off == len(s.buf) {
		s.buf, s.off = s.buf[:0], 0
	}
	if s.buf == nil && len(f.Data()) <= pooledBuf {
		s.pooled = bufPool.Get().(*[]byte)
		s.buf = (*s.pooled)[:0]
	}
	s.buf = append(s.buf, f.Data()...)
	if f.StreamEnded() {
		s.end()
	} else if s.waiting {
		s.ready.Signal()
	}
	return nil
}

// pooledBuf is the size of the pooled buffers a response's data is
// gathered in: most answers fit one, and it goes back at the body's end.
const pooledBuf = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, pooledBuf); return &b }}

// putBuf empties s's buffer and gives it back to the pool if it came
// from it; c.mu is held.
func (s *stream) putBuf() {
	if s.pooled != nil && cap(s.buf) == pooledBuf {
		*s.pooled = s.buf[:0]
		bufPool.Put(s.pooled)
	}
	s.pooled, s.buf, s.off = nil, nil, 0
}

// body is a stream seen as its response's body.
type body stream

func (b *body) Read(p []byte) (int, error) {
	s := (*stream)(b)
	c := s.c
	c.mu.Lock()
	for s.off == len(s.buf) && !s.ended && s.err == nil {
		s.waiting = true
		s.ready.Wait()
		s.waiting = false
	}
	if s.off < len(s.buf) {
		n := copy(p, s.buf[s.off:])
		s.off += n
		if s.off == len(s.buf) {
			// Drained: a stream's next event may be a while away, and
			// its buffer is better used meanwhile by another.
			s.putBuf()
		}
		s.consumed += n
		c.consumed += n
		var sIncr uint32
		if !s.ended && s.consumed >= streamWindow/2 {
			sIncr = uint32(s.consumed)
			s.recvWindow += s.consumed
			s.consumed = 0
		}
		cIncr := c.takeConnUpdate()
		id := s.id
		c.mu.Unlock()
		if sIncr > 0 || cIncr > 0 {
			c.write(func(b []byte) []byte {
				if sIncr > 0 {
					b = h2frames.AppendWindowUpdate(b, id, sIncr)
				}
				if cIncr > 0 {
					b = h2frames.AppendWindowUpdate(b, 0, cIncr)
				}
				return b
			})
		}
		return n, nil
	}
	err := s.err
	if err == nil {
		err = io.EOF
		s.putBuf()
	}
	c.mu.Unlock()
	s.stop()
	return 0, err
}

// Close frees the stream; before its end it resets it (CANCEL).
func (b *body) Close() error {
	s := (*stream)(b)
	s.stop()
	s.cancel(errBodyClosed)
	c := s.c
	c.mu.Lock()
	if n := len(s.buf) - s.off; n > 0 {
		c.consumed += n
	}
	s.putBuf()
	incr := c.takeConnUpdate()
	c.mu.Unlock()
	if incr > 0 {
		c.write(func(b []byte) []byte { return h2frames.AppendWindowUpdate(b, 0, incr) })
	}
	return nil
}

var errBodyClosed = errors.New("h2client: read on a closed response body")

// errBody is the body of a response whose stream failed with nothing
// left to read.
type errBody struct{ err error }

func (e errBody) Read([]byte) (int, error) { return 0, e.err }
func (e errBody) Close() error             { return nil }
