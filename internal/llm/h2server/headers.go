package h2server

import (
	"context"
	"errors"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/straitgw/strait/internal/h2frames"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock is a request header block being received. A block in one
// frame (nearly all are) is decoded from the frame; one continued over
// CONTINUATION frames is gathered in raw first, bounded by fragment.
type headerBlock struct {
	active    bool
	id        uint32
	endStream bool
	frames    int
	raw       int    // bytes of the block received
	max       int    // MaxHeaderBytes
	rawBuf    []byte // the fragments of a block that spans frames

	fields  []hpack.HeaderField
	size    int  // the decoded list's size, RFC 7541 section 4.1
	big     bool // past max: the request is answered 431
	bad     string
	regular bool // a regular field was seen: no pseudo-header may follow
}

// emit is the HPACK decoder's: it checks each field as it is decoded and
// keeps it while the list is within bounds.
func (hb *headerBlock) emit(f hpack.HeaderField) {
	if hb.bad != "" {
		return
	}
	if hb.size += int(f.Size()); hb.size > hb.max {
		hb.big = true
	}
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		hb.bad = "invalid value of field " + strconv.Quote(f.Name)
		return
	}
	if strings.HasPrefix(f.Name, ":") {
		if hb.regular {
			hb.bad = "pseudo-header field after a regular field"
			return
		}
		switch f.Name {
		case ":method", ":path", ":scheme", ":authority":
		default:
			hb.bad = "unknown pseudo-header field " + strconv.Quote(f.Name)
			return
		}
		for _, g := range hb.fields {
			if g.Name == f.Name {
				hb.bad = "pseudo-header field " + f.Name + " twice"
				return
			}
		}
	} else {
		hb.regular = true
		if !h2frames.ValidFieldName(f.Name) {
			hb.bad = "invalid field name " + strconv.Quote(f.Name)
			return
		}
		switch f.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			hb.bad = "connection-specific field " + f.Name
			return
		case "te":
			if f.Value != "trailers" {
				hb.bad = "te other than trailers"
				return
			}
		}
	}
	if !hb.big {
		hb.fields = append(hb.fields, f)
	}
}

// headers starts a header block.
func (c *conn) headers(f *http2.HeadersFrame) error {
	if f.StreamID%2 == 0 {
		return c.goAway(http2.ErrCodeProtocol, "even stream ID from a client")
	}
	hb := &c.hb
	hb.active, hb.id, hb.endStream = true, f.StreamID, f.StreamEnded()
	hb.frames, hb.raw, hb.size, hb.big, hb.bad, hb.regular = 1, 0, 0, false, "", false
	hb.fields = hb.fields[:0]
	return c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// continuation continues a header block; the framer has checked that it
// follows its HEADERS on the same stream.
func (c *conn) continuation(f *http2.ContinuationFrame) error {
	if !c.hb.active {
		return c.goAway(http2.ErrCodeProtocol, "CONTINUATION without HEADERS")
	}
	c.hb.frames++
	return c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// fragment takes part of a header block, and decodes and acts on the
// block when it is whole.
func (c *conn) fragment(p []byte, end bool) error {
	hb := &c.hb
	hb.raw += len(p)
	if hb.frames > maxBlockFrames || hb.raw > 2*hb.max+1024 {
		return c.goAway(http2.ErrCodeProtocol, "header block too large")
	}
	if !end || hb.frames > 1 {
		hb.rawBuf = append(hb.rawBuf, p...)
		if !end {
			return nil
		}
		p = hb.rawBuf
	}
	hb.active = false
	err := c.dec.Decode(p, hb.emit)
	if cap(hb.rawBuf) > 64<<10 {
		hb.rawBuf = nil
	}
	hb.rawBuf = hb.rawBuf[:0]
	if err != nil {
		return c.goAway(http2.ErrCodeCompression, "header block does not decode")
	}
	err = c.block()
	if cap(hb.fields) > 64 {
		hb.fields = nil
	}
	return err
}

// block acts on a whole header block: a new stream, or trailers.
func (c *conn) block() error {
	hb := &c.hb
	id := hb.id
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		// Trailers: they end the body, and are not kept.
		var err error
		switch {
		case st.remoteEnded:
			err = http2.ConnectionError(http2.ErrCodeStreamClosed)
		case !hb.endStream:
			err = http2.ConnectionError(http2.ErrCodeProtocol)
		default:
			if !st.aborted() && st.declared >= 0 && st.received != st.declared {
				c.mu.Unlock()
				return c.resetStream(st, http2.ErrCodeProtocol)
			}
			st.remoteEnded = true
			st.cond.Broadcast()
		}
		c.mu.Unlock()
		if err != nil {
			return c.goAway(http2.ErrCode(err.(http2.ConnectionError)), "bad trailers")
		}
		return nil
	}
	if id <= c.maxClientID {
		c.mu.Unlock()
		return c.goAway(http2.ErrCodeStreamClosed, "HEADERS on a closed stream")
	}
	c.maxClientID = id
	if c.goneAway || c.closed {
		c.mu.Unlock()
		return nil // past GOAWAY: not processed
	}
	full := len(c.streams) >= c.s.maxStreams()
	c.mu.Unlock()
	now := time.Now()
	c.floods.opened.add(now, c.fwindow)
	switch {
	case full:
		return c.refuse(id, http2.ErrCodeRefusedStream)
	case hb.bad != "":
		c.log.Debug("HTTP/2: a malformed request", "remote", c.remote, "detail", hb.bad)
		return c.refuse(id, http2.ErrCodeProtocol)
	case hb.big:
		return c.tooLarge(id, hb.endStream)
	}
	st, err := c.newStream(id, hb.fields, hb.endStream)
	if err != nil {
		c.log.Debug("HTTP/2: a malformed request", "remote", c.remote, "detail", err.Error())
		return c.refuse(id, http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		st.cancel()
		return nil
	}
	c.streams[id] = st
	if c.ctx.Err() != nil {
		st.cancel() // cancelStreams has run, or is waiting for c.mu
	}
	c.mu.Unlock()
	c.handlers.Add(1)
	go st.run()
	return nil
}

// tooLarge answers a request whose header list is past MaxHeaderBytes
// with 431, as net/http does, without running the handler.
func (c *conn) tooLarge(id uint32, ended bool) error {
	c.wmu.Lock()
	c.hbuf = h2frames.AppendStatus(c.henc.Begin(c.hbuf[:0]), http.StatusRequestHeaderFieldsTooLarge)
	c.wbuf = h2frames.AppendHeaderBlock(c.wbuf[:0], id, c.hbuf, true, c.maxFrame())
	if !ended {
		c.wbuf = h2frames.AppendRSTStream(c.wbuf, id, http2.ErrCodeNo)
	}
	err := c.writeLocked()
	c.wmu.Unlock()
	return err
}

// maxFrame is the largest frame the client accepts.
func (c *conn) maxFrame() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peerMaxFrm
}

var errMissingPseudo = errors.New("a required pseudo-header field is missing")

// newStream builds a stream and its request from a header list.
func (c *conn) newStream(id uint32, fields []hpack.HeaderField, ended bool) (*stream, error) {
	var method, path, scheme, authority string
	n := 0
	for _, f := range fields {
		switch f.Name {
		case ":method":
			method = f.Value
		case ":path":
			path = f.Value
		case ":scheme":
			scheme = f.Value
		case ":authority":
			authority = f.Value
		default:
			n++
		}
	}
	if method == "" || scheme == "" || path == "" {
		return nil, errMissingPseudo
	}
	if method == "CONNECT" {
		return nil, errors.New("CONNECT is not served")
	}
	var u *url.URL
	var err error
	if path == "*" {
		if method != "OPTIONS" {
			return nil, errors.New(`":path" * is only for OPTIONS`)
		}
		u = &url.URL{Path: "*"}
	} else if u, err = url.ParseRequestURI(path); err != nil {
		return nil, errors.New("invalid :path")
	}
	h := make(http.Header, n)
	// One backing array for every value: most names come once.
	vals := make([]string, n)
	nv := 0
	var cookies []string
	declared := int64(-1)
	for _, f := range fields {
		if f.Name[0] == ':' {
			continue
		}
		switch f.Name {
		case "cookie":
			cookies = append(cookies, f.Value) // joined below (RFC 9113, 8.2.3)
			continue
		case "content-length":
			v, err := strconv.ParseUint(f.Value, 10, 63)
			if err != nil || declared >= 0 && int64(v) != declared {
				return nil, errors.New("invalid content-length")
			}
			declared = int64(v)
		case "host":
			// Request.Host holds it, as net/http's servers leave it out
			// of Header.
			if authority == "" {
				authority = f.Value
			}
			continue
		}
		k := canonicalKey(f.Name)
		if prev, ok := h[k]; ok {
			h[k] = append(prev, f.Value)
		} else {
			vals[nv] = f.Value
			h[k] = vals[nv : nv+1 : nv+1]
			nv++
		}
	}
	if !httpguts.ValidHostHeader(authority) {
		return nil, errors.New("invalid :authority or host")
	}
	if len(cookies) > 0 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if ended && declared > 0 {
		return nil, errors.New("content-length without a body")
	}
	st := &stream{c: c, id: id, sendWin: 0, recvWin: streamWindow, declared: declared, remoteEnded: ended}
	st.cond.L = &c.mu
	c.mu.Lock()
	st.sendWin = c.peerWin
	c.mu.Unlock()
	st.ctx, st.cancel = context.WithCancel(c.streamCtx)
	// A value, not a pointer: WithContext copies it to the heap, and this
	// one stays on the stack.
	req := http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     h,
		Host:       authority,
		RemoteAddr: c.remote,
		RequestURI: path,
	}
	switch {
	case ended:
		req.Body = http.NoBody
		req.ContentLength = 0
	default:
		st.body.st = st
		req.Body = &st.body
		req.ContentLength = declared
	}
	st.expectContinue = !ended && strings.EqualFold(h.Get("Expect"), "100-continue")
	st.req = req.WithContext(st.ctx)
	st.head = method == http.MethodHead
	return st, nil
}

// commonKeys are the canonical forms of the fields clients send most,
// found without allocating.
var commonKeys = map[string]string{}

func init() {
	for _, k := range []string{"accept", "accept-encoding", "accept-language", "anthropic-beta",
		"anthropic-version", "authorization", "cache-control", "content-length", "content-type",
		"host", "openai-organization", "openai-project", "origin", "referer", "user-agent",
		"x-api-key", "x-request-id", "x-stainless-arch", "x-stainless-async", "x-stainless-lang",
		"x-stainless-os", "x-stainless-package-version", "x-stainless-retry-count",
		"x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-timeout",
		"x-stainless-helper-method", "x-stainless-read-timeout", "traceparent", "tracestate",
		"idempotency-key", "strait-trace"} {
		commonKeys[k] = textproto.CanonicalMIMEHeaderKey(k)
	}
}

func canonicalKey(name string) string {
	if k, ok := commonKeys[name]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}
