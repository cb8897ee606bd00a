package mockllm

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitgw/strait/internal/rawsock"
)

// lconn is one connection of the lean engine. Only the loop touches it.
type lconn struct {
	e      *engine
	fd     int
	remote string
	fr     *http2.Framer
	in     []byte // received, not yet parsed: in[inOff:]
	inOff  int
	out    []byte // frames to write: out[outOff:]
	outOff int

	streams     map[uint32]*lstream
	maxClientID uint32 // the highest stream the client opened
	settled     bool   // the client's SETTINGS, which must come first, arrived
	dec         *hpack.Decoder
	hb          headerBlock

	peerWin      int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame int   // the client's SETTINGS_MAX_FRAME_SIZE
	sendWin      int64 // the connection's send window
	recvWin      int64 // what the client may still send on the connection
	recvUnacked  int64 // read and not yet given back
	blocked      []*lstream

	goneAway        bool // GOAWAY sent: no new streams
	peerGoneAway    bool
	closeAfterFlush bool // close once out is written
	dead            bool
	lastActive      time.Time
}

// receive reads what the socket holds and handles every whole frame of
// it. It reports whether anything was read.
func (c *lconn) receive(now time.Time) bool {
	if c.dead {
		return false
	}
	got := false
	var rerr error
	for {
		n, full, err := rawsock.ReadOnce(c.fd, &c.in, &c.inOff)
		got = got || n > 0
		if err != nil {
			rerr = err
			break
		}
		if !full || len(c.in)-c.inOff > maxUnparsed {
			break
		}
	}
	if got {
		c.process(now)
	}
	if rerr != nil && !c.dead {
		c.fail()
	}
	return got
}

// process handles every whole frame received. It is where a client's
// bytes meet the engine, and what FuzzLeanConn drives.
func (c *lconn) process(now time.Time) {
	if c.closeAfterFlush {
		// After a GOAWAY for an error nothing more is read.
		c.in, c.inOff = c.in[:0], 0
		return
	}
	c.lastActive = now
	for !c.dead && !c.closeAfterFlush && frameReady(c.in[c.inOff:]) {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.readError(err)
			continue
		}
		c.handle(f, now)
	}
	if !c.closeAfterFlush && len(c.in)-c.inOff > maxUnparsed {
		c.goAway(http2.ErrCodeProtocol, []byte("header block too large"))
	}
}

// frameReady reports whether b starts with a whole frame, and for a header
// block, with all of its CONTINUATION frames. A frame too large to accept
// is ready at once: the framer rejects it from its header.
func frameReady(b []byte) bool {
	for {
		if len(b) < 9 {
			return false
		}
		size := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if size > maxReadFrame {
			return true
		}
		n := 9 + size
		if len(b) < n {
			return false
		}
		switch http2.FrameType(b[3]) {
		case http2.FrameHeaders, http2.FrameContinuation:
			if http2.Flags(b[4]).Has(http2.FlagHeadersEndHeaders) {
				return true
			}
		default:
			return true
		}
		b = b[n:]
	}
}

// readError acts on a frame the framer refused.
func (c *lconn) readError(err error) {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		if se.StreamID%2 == 1 && se.StreamID > c.maxClientID {
			c.maxClientID = se.StreamID // a HEADERS frame refused: the ID is used
		}
		if st := c.streams[se.StreamID]; st != nil {
			c.reset(st, se.Code)
		} else {
			_ = c.fr.WriteRSTStream(se.StreamID, se.Code)
		}
	case errors.As(err, &ce):
		c.goAway(http2.ErrCode(ce), nil)
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.goAway(http2.ErrCodeFrameSize, nil)
	default:
		c.goAway(http2.ErrCodeProtocol, nil)
	}
}

// goAway sends GOAWAY once. With an error code the connection then
// closes as soon as the frame is out, its streams cancelled; with
// NO_ERROR (Shutdown, idle) it takes no new stream and closes once the
// streams it has are answered.
func (c *lconn) goAway(code http2.ErrCode, debug []byte) {
	if !c.goneAway {
		c.goneAway = true
		_ = c.fr.WriteGoAway(c.maxClientID, code, debug)
		if code != http2.ErrCodeNo {
			c.e.s.log.Debug("lean HTTP/2: closing a connection", "remote", c.remote, "code", code.String(), "detail", string(debug))
		}
	}
	if code != http2.ErrCodeNo {
		c.cancelStreams()
		c.closeAfterFlush = true
	} else if len(c.streams) == 0 {
		c.closeAfterFlush = true
	}
}

// flush writes what the socket takes of the connection's frames.
func (c *lconn) flush() {
	if c.dead {
		return
	}
	if c.outOff < len(c.out) {
		n, err := rawsock.WriteNow(c.fd, c.out[c.outOff:])
		if err != nil {
			c.fail()
			return
		}
		if c.outOff += n; c.outOff == len(c.out) {
			c.out, c.outOff = c.out[:0], 0
			if cap(c.out) > 1<<20 {
				c.out = nil // a burst's buffer is not kept for good
			}
		} else if c.outOff > len(c.out)/2 {
			k := copy(c.out, c.out[c.outOff:])
			c.out, c.outOff = c.out[:k], 0
		}
		if len(c.out)-c.outOff > maxUnsent {
			c.e.s.log.Debug("lean HTTP/2: closing a connection whose client does not read", "remote", c.remote)
			c.fail()
			return
		}
	}
	if c.closeAfterFlush && c.outOff == len(c.out) {
		c.fail()
	}
}

// fail ends the connection: every stream on it is cancelled, and the loop
// closes its socket.
func (c *lconn) fail() {
	c.cancelStreams()
	c.dead = true
}

func (c *lconn) cancelStreams() {
	for _, st := range c.streams {
		c.closeStream(st)
	}
}

// handle acts on one frame from the client.
func (c *lconn) handle(f http2.Frame, now time.Time) {
	if !c.settled {
		if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
			c.goAway(http2.ErrCodeProtocol, []byte("the connection must begin with SETTINGS"))
			return
		}
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			c.settings(f)
		}
	case *http2.HeadersFrame:
		if f.HeadersEnded() {
			c.headerBlock(f.StreamID, f.StreamEnded(), f.HeaderBlockFragment(), now)
			return
		}
		c.hb.stream, c.hb.ended = f.StreamID, f.StreamEnded()
		c.hb.buf = append(c.hb.buf[:0], f.HeaderBlockFragment()...)
	case *http2.ContinuationFrame:
		// The framer makes sure it follows its HEADERS.
		if c.hb.buf = append(c.hb.buf, f.HeaderBlockFragment()...); len(c.hb.buf) > 2*maxHeaderList {
			c.goAway(http2.ErrCodeProtocol, []byte("header block too large"))
			return
		}
		if f.HeadersEnded() {
			c.headerBlock(c.hb.stream, c.hb.ended, c.hb.buf, now)
			if cap(c.hb.buf) > 64<<10 {
				c.hb.buf = nil
			}
		}
	case *http2.DataFrame:
		c.data(f, now)
	case *http2.WindowUpdateFrame:
		inc := int64(f.Increment)
		if f.StreamID == 0 {
			if c.sendWin += inc; c.sendWin > 1<<31-1 {
				c.goAway(http2.ErrCodeFlowControl, []byte("connection window overflow"))
				return
			}
		} else if st := c.streams[f.StreamID]; st != nil {
			if st.sendWin += inc; st.sendWin > 1<<31-1 {
				c.reset(st, http2.ErrCodeFlowControl)
				return
			}
		} else if c.idle(f.StreamID) {
			c.goAway(http2.ErrCodeProtocol, []byte("WINDOW_UPDATE on an idle stream"))
			return
		}
		c.resume()
	case *http2.PingFrame:
		if !f.IsAck() {
			_ = c.fr.WritePing(true, f.Data)
		}
	case *http2.RSTStreamFrame:
		if st := c.streams[f.StreamID]; st != nil {
			c.closeStream(st)
		} else if c.idle(f.StreamID) {
			c.goAway(http2.ErrCodeProtocol, []byte("RST_STREAM on an idle stream"))
		}
	case *http2.GoAwayFrame:
		c.peerGoneAway = true
		if len(c.streams) == 0 {
			c.closeAfterFlush = true
		}
	case *http2.PushPromiseFrame:
		c.goAway(http2.ErrCodeProtocol, []byte("clients cannot push"))
	}
	// PRIORITY and unknown frame types are ignored.
}

// idle reports whether id names a stream the client has not opened yet.
func (c *lconn) idle(id uint32) bool { return id > c.maxClientID }

// settings applies the client's SETTINGS and acknowledges them.
func (c *lconn) settings(f *http2.SettingsFrame) {
	c.settled = true
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = int(s.Val)
		case http2.SettingInitialWindowSize:
			// Open streams' windows move by the change (RFC 9113, 6.9.2).
			d := int64(s.Val) - c.peerWin
			c.peerWin = int64(s.Val)
			for _, st := range c.streams {
				if st.sendWin += d; st.sendWin > 1<<31-1 {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		}
		return nil
	})
	if err != nil {
		code := http2.ErrCodeProtocol
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			code = http2.ErrCode(ce)
		}
		c.goAway(code, []byte("bad SETTINGS"))
		return
	}
	_ = c.fr.WriteSettingsAck()
	c.resume()
}

// headerBlock decodes a whole header block and acts on it.
func (c *lconn) headerBlock(id uint32, ended bool, block []byte, now time.Time) {
	fields, err := c.fields(block)
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		c.goAway(http2.ErrCode(ce), []byte("bad header block"))
	case errors.Is(err, errBadField):
		c.readError(http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol, Cause: err})
	default:
		c.headers(id, ended, fields, errors.Is(err, errHeaderList), now)
	}
}

// headers opens a stream, or ends one's body with trailers.
func (c *lconn) headers(id uint32, ended bool, fields []hpack.HeaderField, truncated bool, now time.Time) {
	if id%2 == 0 {
		c.goAway(http2.ErrCodeProtocol, []byte("even stream ID from a client"))
		return
	}
	if st := c.streams[id]; st != nil {
		// Trailers: they end the body, and are not kept.
		if st.bodyDone {
			c.goAway(http2.ErrCodeStreamClosed, []byte("HEADERS on a half-closed stream"))
			return
		}
		if !ended {
			c.goAway(http2.ErrCodeProtocol, []byte("trailers without END_STREAM"))
			return
		}
		st.endBody(now)
		return
	}
	if id <= c.maxClientID {
		c.goAway(http2.ErrCodeProtocol, []byte("HEADERS on a closed stream"))
		return
	}
	c.maxClientID = id
	if c.goneAway || c.peerGoneAway {
		return // past our GOAWAY: not processed
	}
	if len(c.streams) >= c.e.s.opt.MaxConcurrentStreams {
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		return
	}
	st := &lstream{c: c, id: id, sendWin: c.peerWin, recvWin: streamWindow, reqHead: reqHead{contentLength: -1}, start: now}
	c.streams[id] = st
	st.bodyDone = ended
	if truncated {
		st.respondStatus(http.StatusRequestHeaderFieldsTooLarge, now)
		return
	}
	head, ok := c.head(fields)
	if !ok {
		c.reset(st, http2.ErrCodeProtocol)
		return
	}
	st.reqHead = head
	switch {
	case st.bodyDone:
		st.dispatch(now)
	case st.contentLength > c.e.s.opt.MaxBodyBytes:
		st.dispatch(now) // answered 413 without reading the body
	}
}

// hopHeaders are the connection-specific fields HTTP/2 forbids (RFC 9113,
// 8.2.2).
var hopHeaders = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true, "upgrade": true}

// reqHead is a request's head: its pseudo-header fields, its header and
// its declared length.
type reqHead struct {
	method, path, scheme, authority string
	url                             *url.URL
	header                          http.Header // shared by the requests of one cached block: read only
	contentLength                   int64       // -1: not declared
}

// head reads a request's header fields, or takes them from the last
// request if its header block was the same bytes, and reports whether
// they make a well-formed request.
func (c *lconn) head(fields []hpack.HeaderField) (reqHead, bool) {
	hb := &c.hb
	cached := len(fields) > 0 && len(hb.lastFields) > 0 && &fields[0] == &hb.lastFields[0]
	if cached && hb.lastHead != nil {
		return *hb.lastHead, true
	}
	h, ok := readHead(fields)
	if ok && cached {
		hb.lastHead = &h
	}
	return h, ok
}

// readHead takes the request's header fields and reports whether they
// make a well-formed request.
func readHead(fields []hpack.HeaderField) (st reqHead, ok bool) {
	st.contentLength = -1
	h := make(http.Header, len(fields))
	vals := make([]string, len(fields)) // one array for every field's value
	var cookies []string
	for i, f := range fields {
		switch f.Name {
		case ":method":
			st.method = f.Value
		case ":path":
			st.path = f.Value
		case ":scheme":
			st.scheme = f.Value
		case ":authority":
			st.authority = f.Value
		case ":protocol":
			return st, false // no extended CONNECT: SETTINGS_ENABLE_CONNECT_PROTOCOL is not sent
		case "content-length":
			n, err := strconv.ParseInt(f.Value, 10, 64)
			if err != nil || n < 0 || (st.contentLength >= 0 && n != st.contentLength) {
				return st, false
			}
			st.contentLength = n
			addValue(h, "Content-Length", f.Value, vals, i)
		case "te":
			if f.Value != "trailers" {
				return st, false
			}
			addValue(h, "Te", f.Value, vals, i)
		case "cookie":
			cookies = append(cookies, f.Value)
		default:
			if hopHeaders[f.Name] {
				return st, false
			}
			addValue(h, http.CanonicalHeaderKey(f.Name), f.Value, vals, i)
		}
	}
	if len(cookies) > 0 {
		// RFC 9113, 8.2.3: split cookie fields are joined for HTTP/1.1
		// semantics.
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if st.method == "" || st.scheme == "" || st.path == "" || st.method == http.MethodConnect {
		return st, false
	}
	if plainPath(st.path) {
		st.url = &url.URL{Path: st.path} // what ParseRequestURI returns for it, without its work
	} else {
		u, err := url.ParseRequestURI(st.path)
		if err != nil {
			return st, false
		}
		st.url = u
	}
	st.header = h
	return st, true
}

// addValue adds a value to h, its slice cut from vals at i so that a
// request's values share one allocation.
func addValue(h http.Header, k, v string, vals []string, i int) {
	if old, ok := h[k]; ok {
		h[k] = append(old, v)
		return
	}
	vals[i] = v
	h[k] = vals[i : i+1 : i+1]
}

// data takes a DATA frame: flow control, then the request body.
func (c *lconn) data(f *http2.DataFrame, now time.Time) {
	n := int64(f.Length) // padding counts too
	if n > c.recvWin {
		c.goAway(http2.ErrCodeFlowControl, []byte("DATA beyond the connection window"))
		return
	}
	c.recvWin -= n
	if c.recvUnacked += n; c.recvUnacked >= connRefill {
		_ = c.fr.WriteWindowUpdate(0, uint32(c.recvUnacked))
		c.recvWin += c.recvUnacked
		c.recvUnacked = 0
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if c.idle(f.StreamID) {
			c.goAway(http2.ErrCodeProtocol, []byte("DATA on an idle stream"))
		}
		return // a stream already closed or reset: ignored, its window given back above
	}
	if st.bodyDone {
		c.reset(st, http2.ErrCodeStreamClosed)
		return
	}
	if n > st.recvWin {
		c.reset(st, http2.ErrCodeFlowControl)
		return
	}
	st.recvWin -= n
	if !st.dispatched {
		st.body = append(st.body, f.Data()...)
		if st.contentLength >= 0 && int64(len(st.body)) > st.contentLength {
			c.reset(st, http2.ErrCodeProtocol)
			return
		}
	}
	if f.StreamEnded() {
		if !st.dispatched && st.contentLength >= 0 && int64(len(st.body)) != st.contentLength {
			c.reset(st, http2.ErrCodeProtocol)
			return
		}
		st.endBody(now)
		return
	}
	if st.recvUnacked += n; st.recvUnacked >= streamWindow/2 {
		_ = c.fr.WriteWindowUpdate(st.id, uint32(st.recvUnacked))
		st.recvWin += st.recvUnacked
		st.recvUnacked = 0
	}
	if !st.dispatched && int64(len(st.body)) > c.e.s.opt.MaxBodyBytes {
		st.dispatch(now) // too big: answered 413 from what was read
	}
}

// reset ends a stream from the server's side with RST_STREAM.
func (c *lconn) reset(st *lstream, code http2.ErrCode) {
	if !st.closed {
		_ = c.fr.WriteRSTStream(st.id, code)
	}
	c.closeStream(st)
}

// closeStream forgets a stream: answered, reset by either side, or on a
// connection that ended. A request still being answered is cancelled.
func (c *lconn) closeStream(st *lstream) {
	if st.closed {
		return
	}
	st.closed = true
	delete(c.streams, st.id)
	st.pending = nil
	st.body = nil
	if st.nat != nil {
		st.nat.gone(c.e.s)
		st.nat = nil
	}
	if st.cancel != nil {
		st.cancel()
	}
	if c.goneAway && len(c.streams) == 0 {
		c.closeAfterFlush = true
	}
	if c.peerGoneAway && len(c.streams) == 0 {
		c.closeAfterFlush = true
	}
}

// resume sends what the windows now allow of blocked answers.
func (c *lconn) resume() {
	if len(c.blocked) == 0 {
		return
	}
	// send puts a stream that is still blocked back on the list.
	list := c.blocked
	c.blocked = nil
	for _, st := range list {
		st.blocked = false
		if !st.closed {
			st.send(nil, st.endQueued)
		}
	}
}

// plainPath reports whether p is an absolute path of letters, digits and
// "/-._" only: no query, escape or dot segment for url.ParseRequestURI to
// make anything of.
func plainPath(p string) bool {
	if p == "" || p[0] != '/' || strings.Contains(p, "/.") {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch b := p[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '/', b == '-', b == '.', b == '_':
		default:
			return false
		}
	}
	return true
}
