package h1server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is a request's http.ResponseWriter. The head and body are
// gathered in one pooled buffer and written when the handler returns, on
// Flush, or once flushAt bytes wait, so a JSON answer leaves in one
// write, after the handler has done its accounting (as with net/http's
// server, a client that has its answer sees the request's logs and
// metrics recorded).
type response struct {
	c    *conn
	req  *http.Request
	body *body

	hdr         http.Header
	status      int
	wroteHeader bool // the status is decided
	sentHead    bool // the status line and header are written
	head        bool // a HEAD request: no body is sent
	cl          int64
	written     int64
	chunked     bool
	closeAfter  bool
	done        bool  // finished: writes fail
	err         error // a write failed: the rest fail too
	buf         *[]byte
}

var responses = sync.Pool{New: func() any { return new(response) }}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxKept is the largest buffer that goes back to the pool.
const maxKept = 64 << 10

// flushAt is how much unsent body a response gathers before writing it
// without being asked.
const flushAt = 32 << 10

func newResponse(c *conn, req *http.Request, b *body) *response {
	w := responses.Get().(*response)
	*w = response{c: c, req: req, body: b, cl: -1, head: req.Method == http.MethodHead}
	return w
}

// release gives the response back; the handler must have returned.
func (w *response) release() {
	w.dropBuf()
	*w = response{}
	responses.Put(w)
}

func (w *response) dropBuf() {
	if w.buf != nil {
		if cap(*w.buf) <= maxKept {
			*w.buf = (*w.buf)[:0]
			bufs.Put(w.buf)
		}
		w.buf = nil
	}
}

func (w *response) buffer() *[]byte {
	if w.buf == nil {
		w.buf = bufs.Get().(*[]byte)
	}
	return w.buf
}

var errFinished = errors.New("h1server: the handler has returned")

// Header implements http.ResponseWriter.
func (w *response) Header() http.Header {
	if w.hdr == nil {
		w.hdr = make(http.Header, 4)
	}
	return w.hdr
}

// WriteHeader implements http.ResponseWriter. Informational (1xx)
// answers other than 100 Continue's are not sent.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader || w.done {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return
	}
	w.wroteHeader = true
	w.status = code
	h := w.Header()
	if v, ok := h["Content-Length"]; ok {
		n, err := int64(-1), error(nil)
		if len(v) == 1 {
			n, err = strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
		}
		if err == nil && n >= 0 {
			w.cl = n
		} else {
			delete(h, "Content-Length")
		}
	}
	if !w.bodyAllowed() {
		delete(h, "Content-Length")
		w.cl = -1
	}
}

func (w *response) bodyAllowed() bool {
	return w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

// Write implements http.ResponseWriter.
func (w *response) Write(p []byte) (int, error) {
	if w.done {
		return 0, errFinished
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.head {
		return len(p), nil
	}
	b := w.buffer()
	if !w.sentHead && len(*b) == 0 {
		// Room for the head in front, so head and body leave together.
		*b = append(*b, make([]byte, headRoom)...)
	}
	*b = append(*b, p...)
	if len(*b) >= flushAt {
		w.send(false)
	}
	return len(p), nil // if the write failed, the next one says so
}

// WriteString writes s as Write would.
func (w *response) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush implements http.Flusher.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError writes what the handler wrote so far, the head first if it
// is not out yet.
func (w *response) FlushError() error {
	if w.done {
		return errFinished
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err == nil {
		w.send(false)
	}
	return w.err
}

// SetReadDeadline bounds the reads of the request body.
func (w *response) SetReadDeadline(t time.Time) error { return w.c.nc.SetReadDeadline(t) }

// SetWriteDeadline bounds the response's writes; WriteTimeout bounds each
// of them anyway.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.writeDL = t
	return w.c.nc.SetWriteDeadline(t)
}

// headRoom is the space kept in front of a response's first body bytes
// for its head; a bigger head is written in front by a copy.
const headRoom = 512

// send writes the head if it is not out and the gathered body: all of it
// if last (the body is complete), else as one chunk (or raw, if the
// length is known or the connection closes after it).
func (w *response) send(last bool) {
	if w.err != nil {
		return
	}
	b := w.buffer()
	var out []byte
	if !w.sentHead {
		body := []byte(nil)
		if len(*b) >= headRoom {
			body = (*b)[headRoom:]
		}
		h := w.appendHead(w.c.scratch[:0], last, body)
		w.c.scratch = h[:0]
		if len(h) <= headRoom && len(*b) >= headRoom {
			start := headRoom - len(h)
			copy((*b)[start:], h)
			out = (*b)[start:]
		} else {
			out = append(h, body...)
		}
		if w.chunked && len(body) > 0 {
			out = w.chunkIn(out, len(out)-len(body))
		}
		w.sentHead = true
		if w.body != nil {
			w.body.headSent = true
		}
	} else {
		out = *b
		if w.chunked && len(out) > 0 {
			out = w.chunkIn(out, 0)
		}
	}
	if last && w.chunked {
		out = append(out, "0\r\n"...)
		out = w.appendTrailers(out)
		out = append(out, "\r\n"...)
	}
	if len(out) > 0 {
		w.c.setWriteDeadline()
		if _, err := w.c.nc.Write(out); err != nil {
			w.err = err
			w.closeAfter = true
		}
	}
	*b = (*b)[:0]
}

// chunkIn frames out[at:] as one chunk.
func (w *response) chunkIn(out []byte, at int) []byte {
	n := len(out) - at
	var size [20]byte
	sz := strconv.AppendInt(size[:0], int64(n), 16)
	sz = append(sz, '\r', '\n')
	out = append(out, sz...) // grow by the prefix
	copy(out[at+len(sz):], out[at:at+n])
	copy(out[at:], sz)
	return append(out, '\r', '\n')
}

// appendHead appends the status line and header, deciding the framing:
// the declared length, else the gathered body's if it is complete, else
// chunked (HTTP/1.1) or to the connection's close (HTTP/1.0).
func (w *response) appendHead(dst []byte, complete bool, body []byte) []byte {
	h := w.Header()
	delete(h, "Transfer-Encoding")
	if w.shouldClose() {
		w.closeAfter = true
	}
	if w.bodyAllowed() {
		if _, ok := h["Content-Type"]; !ok && len(body) > 0 {
			h.Set("Content-Type", http.DetectContentType(body))
		}
		switch {
		case w.cl >= 0:
		case complete && (!w.head || w.written > 0):
			w.cl = w.written
			h["Content-Length"] = []string{strconv.FormatInt(w.written, 10)}
		case complete:
		case w.req.ProtoAtLeast(1, 1):
			w.chunked = !w.head
			if w.chunked {
				h["Transfer-Encoding"] = []string{"chunked"}
			}
		default:
			w.closeAfter = true
		}
	}
	if w.closeAfter {
		h["Connection"] = []string{"close"}
	}
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(w.status), 10)
	dst = append(dst, ' ')
	if t := http.StatusText(w.status); t != "" {
		dst = append(dst, t...)
	} else {
		dst = append(dst, "status code "...)
		dst = strconv.AppendInt(dst, int64(w.status), 10)
	}
	dst = append(dst, "\r\n"...)
	if _, ok := h["Date"]; !ok {
		dst = appendDate(dst)
	}
	keys := make([]string, 0, 16)
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			dst = appendField(dst, k, h[k])
		}
	}
	return append(dst, "\r\n"...)
}

// appendField appends k's lines, one per value, with line breaks in the
// values made spaces, as net/http does: a value cannot start a field of
// its own. An invalid name is left out.
func appendField(dst []byte, k string, vs []string) []byte {
	if !httpguts.ValidHeaderFieldName(k) {
		return dst
	}
	for _, v := range vs {
		dst = append(dst, k...)
		dst = append(dst, ": "...)
		v = strings.TrimSpace(v)
		for i := 0; i < len(v); i++ {
			switch ch := v[i]; ch {
			case '\r', '\n':
				dst = append(dst, ' ')
			default:
				dst = append(dst, ch)
			}
		}
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// appendTrailers appends the trailer fields of a chunked answer: those
// the handler declared in its Trailer header and set, and those it set
// with http.TrailerPrefix, as net/http sends them.
func (w *response) appendTrailers(dst []byte) []byte {
	for _, decl := range w.hdr["Trailer"] {
		for k := range strings.SplitSeq(decl, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			dst = appendField(dst, k, w.hdr[k])
		}
	}
	for k, vs := range w.hdr {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			dst = appendField(dst, http.CanonicalHeaderKey(name), vs)
		}
	}
	return dst
}

// shouldClose reports whether the connection closes after this answer.
func (w *response) shouldClose() bool {
	if w.closeAfter || w.req.Close || !w.req.ProtoAtLeast(1, 1) {
		return true
	}
	if httpguts.HeaderValuesContainsToken(w.hdr["Connection"], "close") {
		return true
	}
	if w.body != nil && !w.body.eof && w.body.cl > maxDrain {
		return true // an unread body too large to drain
	}
	if w.body != nil && w.body.sendContinue {
		// The client waits for a "100 Continue" that cannot follow this
		// head: its body may never come (as net/http, close).
		return true
	}
	return w.c.s.shuttingDown()
}

var dateCache struct {
	sync.Mutex
	sec  int64
	line []byte // "Date: ...\r\n"
}

func appendDate(dst []byte) []byte {
	now := time.Now()
	dateCache.Lock()
	defer dateCache.Unlock()
	if s := now.Unix(); s != dateCache.sec {
		dateCache.sec = s
		dateCache.line = append(dateCache.line[:0], "Date: "...)
		dateCache.line = now.UTC().AppendFormat(dateCache.line, http.TimeFormat)
		dateCache.line = append(dateCache.line, "\r\n"...)
	}
	return append(dst, dateCache.line...)
}

// finish ends the response once the handler has returned.
func (w *response) finish() {
	if w.done {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err == nil && (!w.sentHead || w.chunked || (w.buf != nil && len(*w.buf) > 0)) {
		w.send(true)
	}
	if w.cl >= 0 && w.written < w.cl && !w.head {
		// The handler wrote less than it announced: the client cannot
		// find the end of this answer, so the connection ends it.
		w.c.log.Debug("HTTP/1.1: the handler wrote less than its Content-Length", "remote", w.c.remote, "declared", w.cl, "written", w.written)
		w.closeAfter = true
	}
	w.done = true
}

// abandon ends a response whose handler panicked: what was not sent is
// dropped and the connection closes.
func (w *response) abandon() {
	w.done = true
	w.closeAfter = true
}
