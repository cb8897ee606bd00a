package h2client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/h2frames"
	"github.com/straitgw/strait/internal/writebatch"
	"golang.org/x/net/http2"
)

const (
	// assumedMaxStreams is the stream limit assumed of a server until its
	// SETTINGS say otherwise, and of one that sets none.
	assumedMaxStreams = 100
	// maxStreamsCap bounds the streams used on one connection whatever
	// the server allows.
	maxStreamsCap = 1000
	// streamWindow is the receive window advertised for each stream: an
	// answer larger than it waits for its reader to catch up, so a body
	// nobody reads holds at most this much.
	streamWindow = 4 << 20
	// connWindow is the connection's receive window: large, so that one
	// slow stream never holds up the others.
	connWindow = 1 << 30
	// maxHeaderListSize bounds a response's decoded header list.
	maxHeaderListSize = 1 << 20
	// maxReadFrameSize is the largest frame accepted (and advertised).
	maxReadFrameSize = 1 << 20
	// maxStreamID is the last stream ID a client may use.
	maxStreamID = 1<<31 - 1
	// maxWindow is the largest flow-control window HTTP/2 allows.
	maxWindow = 1<<31 - 1
)

// ConnError is a connection's failure: every stream on it fails with it.
type ConnError struct {
	// Addr is the server's address.
	Addr string
	// Err is what went wrong.
	Err error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("HTTP/2 connection to %s: %v", e.Addr, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// errClosedIdle is the error of a connection closed because it was idle.
var errClosedIdle = errors.New("closed while idle")

// conn is one HTTP/2 connection.
type conn struct {
	t    *Transport
	nc   net.Conn
	addr string

	// fr and hb are the reader's (and newConn's, before the reader
	// starts).
	fr *http2.Framer
	hb headerBlock

	// wmu serialises writes; the HPACK encoder and the write buffer are
	// under it. It is taken before mu, never while mu is held.
	wmu  writebatch.Locked // over nc; its Unlock writes a batch the holder began
	wbuf []byte
	henc h2frames.HeaderEncoder
	hbuf []byte // a header block being written
	werr error

	// mu guards the state below and every stream's.
	mu sync.Mutex
	// flow is broadcast when send windows grow or the connection fails.
	flow    sync.Cond
	streams map[uint32]*stream
	nextID  uint32
	active  int // streams open or reserved
	// The server's settings.
	maxStreams uint32
	initWindow int32
	maxFrame   int
	sendWindow int64 // the connection's send window
	// recvWindow is what the server may still send on the connection;
	// consumed is data read (or dropped) and not yet given back by
	// WINDOW_UPDATE.
	recvWindow int
	consumed   int
	// freed is set when a stream ends on a connection waiters may want.
	freed      bool
	goingAway  bool
	lastStream uint32 // the GOAWAY's last stream ID
	err        error  // set once the connection has failed
	idleSince  time.Time
	idleTimer  *time.Timer
}

// newConn writes the client preface and reads the server's first
// SETTINGS within ctx's deadline, then starts the connection's reader.
func newConn(t *Transport, nc net.Conn, ctx context.Context) (*conn, error) {
	c := &conn{
		t:          t,
		nc:         nc,
		addr:       t.opt.Addr,
		streams:    make(map[uint32]*stream),
		nextID:     1,
		maxStreams: assumedMaxStreams,
		initWindow: 65535,
		maxFrame:   16384,
		sendWindow: 65535,
		recvWindow: connWindow,
	}
	c.flow.L = &c.mu
	c.wmu.Init(nc) // the gateway batches h2c connections (*writebatch.Conn)
	c.fr = http2.NewFramer(nil, nc)
	c.fr.SetMaxReadFrameSize(maxReadFrameSize)
	// A DATA frame is handled (its bytes copied out) before the next is
	// read, so one frame value serves them all.
	c.fr.SetReuseFrames()
	c.hb.dec = h2frames.NewHeaderDecoder(4096, maxHeaderListSize)

	b := append([]byte(nil), http2.ClientPreface...)
	b = h2frames.AppendSettings(b,
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: maxReadFrameSize},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderListSize},
	)
	b = h2frames.AppendWindowUpdate(b, 0, connWindow-65535)
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := nc.Write(b); err != nil {
		return nil, c.setupErr(ctx, err)
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return nil, c.setupErr(ctx, err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return nil, &ConnError{Addr: c.addr, Err: fmt.Errorf("the server's first frame is %v, not SETTINGS: it does not speak HTTP/2 (h2c with prior knowledge)", f.Header().Type)}
	}
	if !stop() {
		return nil, c.setupErr(ctx, ctx.Err())
	}
	nc.SetDeadline(time.Time{})
	if err := c.applySettings(sf); err != nil {
		return nil, &ConnError{Addr: c.addr, Err: err}
	}
	if _, err := nc.Write(h2frames.AppendSettingsAck(nil)); err != nil {
		return nil, c.setupErr(ctx, err)
	}
	c.idleSince = time.Now()
	c.idleTimer = time.AfterFunc(t.opt.IdleConnTimeout, c.idleCheck)
	go c.readLoop()
	return c, nil
}

// setupErr names what failed while setting a connection up.
func (c *conn) setupErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &net.OpError{Op: "dial", Net: "tcp", Addr: c.nc.RemoteAddr(), Err: fmt.Errorf("no HTTP/2 SETTINGS from %s within the connect timeout", c.addr)}
		}
		return context.Cause(ctx)
	}
	var fe http2.ConnectionError
	if errors.As(err, &fe) || errors.Is(err, http2.ErrFrameTooLarge) {
		return &ConnError{Addr: c.addr, Err: fmt.Errorf("the server's first frame is not HTTP/2 SETTINGS (%v): it does not speak HTTP/2 (h2c with prior knowledge)", err)}
	}
	return &ConnError{Addr: c.addr, Err: err}
}

// applySettings takes the server's settings. c.mu must not be held; the
// encoder's table size is changed under wmu.
func (c *conn) applySettings(sf *http2.SettingsFrame) error {
	c.mu.Lock()
	err := sf.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return fmt.Errorf("invalid SETTINGS: %v", err)
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = min(s.Val, maxStreamsCap)
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - int64(c.initWindow)
			for _, st := range c.streams {
				w := int64(st.sendWindow) + delta
				if w > maxWindow {
					return fmt.Errorf("%w: SETTINGS_INITIAL_WINDOW_SIZE", errWindowOverflow)
				}
				st.sendWindow = int32(w)
			}
			c.initWindow = int32(s.Val)
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(s.Val)
		}
		// SETTINGS_HEADER_TABLE_SIZE needs nothing: the encoder keeps
		// no dynamic table (h2frames.HeaderEncoder).
		return nil
	})
	c.flow.Broadcast()
	c.mu.Unlock()
	return err
}

// reserve takes a stream on c if it has room. t.mu is held.
func (c *conn) reserve() bool {
	c.mu.Lock()
	ok := c.err == nil && !c.goingAway && c.active < int(c.maxStreams) && c.nextID+2*uint32(c.active) < maxStreamID
	if ok {
		c.active++
	}
	c.mu.Unlock()
	return ok
}

// release gives back a stream taken by reserve; c.mu is held. It
// reports whether the pool should be told (c was full).
func (c *conn) release() (wasFull bool) {
	wasFull = c.active >= int(c.maxStreams)
	c.active--
	if c.active == 0 {
		c.idleSince = time.Now()
		if c.goingAway && c.err == nil {
			c.err = errClosedIdle
			go c.nc.Close()
		} else if c.idleTimer != nil {
			c.idleTimer.Reset(c.t.opt.IdleConnTimeout)
		}
	}
	return wasFull || c.goingAway
}

// idleCheck closes c if it has been idle for the idle timeout.
func (c *conn) idleCheck() {
	c.closeIfIdle(c.t.opt.IdleConnTimeout)
}

// closeIfIdle closes c if it carries no stream and has carried none for
// at least d.
func (c *conn) closeIfIdle(d time.Duration) {
	c.t.mu.Lock()
	c.mu.Lock()
	if c.err != nil || c.active > 0 {
		c.mu.Unlock()
		c.t.mu.Unlock()
		return
	}
	if idle := time.Since(c.idleSince); idle < d {
		c.idleTimer.Reset(d - idle)
		c.mu.Unlock()
		c.t.mu.Unlock()
		return
	}
	c.err = errClosedIdle
	c.mu.Unlock()
	c.t.mu.Unlock()
	c.t.remove(c)
	c.wmu.Lock()
	c.wmu.Write(h2frames.AppendGoAway(nil, 0, http2.ErrCodeNo, ""))
	c.wmu.Unlock()
	c.nc.Close()
}

// fail ends the connection with err: its streams fail, it leaves the
// pool, and a GOAWAY with code goes to the server if code is not
// ErrCodeNo.
func (c *conn) fail(err error, code http2.ErrCode) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	cerr := &ConnError{Addr: c.addr, Err: err}
	c.err = cerr
	for id, s := range c.streams {
		s.fail(cerr)
		delete(c.streams, id)
	}
	c.flow.Broadcast()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.mu.Unlock()
	c.t.remove(c)
	if code != http2.ErrCodeNo {
		c.wmu.Lock()
		c.wmu.Write(h2frames.AppendGoAway(nil, 0, code, err.Error()))
		c.wmu.Unlock()
	}
	c.nc.Close()
}

// readLoop reads the server's frames until the connection ends.
func (c *conn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.streamError(se.StreamID, se.Code, fmt.Errorf("malformed response (%v)", se))
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				what := err.Error()
				if d := c.fr.ErrorDetail(); d != nil {
					what = d.Error()
				}
				c.fail(fmt.Errorf("protocol error: %s", what), http2.ErrCode(ce))
				return
			}
			if errors.Is(err, http2.ErrFrameTooLarge) {
				c.fail(fmt.Errorf("protocol error: the server sent a frame larger than %d bytes", maxReadFrameSize), http2.ErrCodeFrameSize)
				return
			}
			c.mu.Lock()
			quiet := c.err != nil
			c.mu.Unlock()
			if !quiet {
				if err == io.EOF {
					err = errors.New("the server closed the connection")
				}
				c.fail(err, http2.ErrCodeNo)
			}
			return
		}
		if err := c.handle(f); err != nil {
			var ce connErr
			if errors.As(err, &ce) {
				c.fail(fmt.Errorf("protocol error: %s", ce.msg), ce.code)
			} else {
				c.fail(err, http2.ErrCodeNo)
			}
			return
		}
	}
}

// connErr is a protocol error that ends the connection.
type connErr struct {
	code http2.ErrCode
	msg  string
}

func (e connErr) Error() string { return e.msg }

func protoErr(format string, args ...any) error {
	return connErr{code: http2.ErrCodeProtocol, msg: fmt.Sprintf(format, args...)}
}

// handle acts on one frame from the server.
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return c.onHeadersFrame(f)
	case *http2.ContinuationFrame:
		return c.onContinuation(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.applySettings(f); err != nil {
			if errors.Is(err, errWindowOverflow) {
				return connErr{code: http2.ErrCodeFlowControl, msg: err.Error()}
			}
			return protoErr("%v", err)
		}
		c.write(h2frames.AppendSettingsAck)
		c.t.streamFreed()
		return nil
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			c.write(func(b []byte) []byte { return h2frames.AppendPingAck(b, data) })
		}
		return nil
	case *http2.GoAwayFrame:
		c.onGoAway(f)
		return nil
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PushPromiseFrame:
		return protoErr("the server sent PUSH_PROMISE, which the client disabled")
	}
	return nil // PRIORITY and unknown frame types are ignored
}

var errWindowOverflow = errors.New("a flow-control window went past 2^31-1")

// write appends frames with fn under the write lock and writes them.
func (c *conn) write(fn func([]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	c.wbuf = fn(c.wbuf[:0])
	_, err := c.wmu.Write(c.wbuf)
	if err != nil {
		c.werr = err
	}
	return err
}

// stream looks id up; c.mu is held. A stream the client never opened is
// a protocol error; one it has closed is nil.
func (c *conn) stream(id uint32, what string) (*stream, error) {
	if id%2 == 0 || id >= c.nextID {
		return nil, protoErr("%s on stream %d, which the client did not open", what, id)
	}
	return c.streams[id], nil
}

func (c *conn) onHeaders(f *decodedBlock) error {
	c.mu.Lock()
	s, err := c.stream(f.id, "HEADERS")
	if err != nil || s == nil {
		c.mu.Unlock()
		return err
	}
	serr := s.onHeaders(f)
	c.unlock()
	if serr != nil {
		c.streamError(f.id, http2.ErrCodeProtocol, serr)
	}
	return nil
}

func (c *conn) onData(f *http2.DataFrame) error {
	n := int(f.Length) // padding included: it counts against the windows
	c.mu.Lock()
	if n > c.recvWindow {
		c.mu.Unlock()
		return connErr{code: http2.ErrCodeFlowControl, msg: "the server sent more data than the connection's window"}
	}
	c.recvWindow -= n
	s, err := c.stream(f.StreamID, "DATA")
	if err != nil {
		c.mu.Unlock()
		return err
	}
	var serr error
	if s != nil {
		serr = s.onData(f)
	}
	// What no body will read goes back to the window now.
	if s == nil || serr != nil {
		c.consumed += n
	} else {
		c.consumed += n - len(f.Data())
	}
	incr := c.takeConnUpdate()
	c.unlock()
	if serr != nil {
		var ce connErr
		if errors.As(serr, &ce) {
			return serr
		}
		c.streamError(f.StreamID, http2.ErrCodeProtocol, serr)
	}
	if incr > 0 {
		c.write(func(b []byte) []byte { return h2frames.AppendWindowUpdate(b, 0, incr) })
	}
	return nil
}

// takeConnUpdate returns the increment of a connection WINDOW_UPDATE due,
// or 0: the window is given back in batches of half of it. c.mu is held.
func (c *conn) takeConnUpdate() uint32 {
	if c.consumed < connWindow/2 {
		return 0
	}
	incr := c.consumed
	c.recvWindow += incr
	c.consumed = 0
	return uint32(incr)
}

// unlock releases c.mu and tells the pool if a stream of a full
// connection ended meanwhile.
func (c *conn) unlock() {
	freed := c.freed
	c.freed = false
	c.mu.Unlock()
	if freed {
		c.t.streamFreed()
	}
}

func (c *conn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	s, err := c.stream(f.StreamID, "RST_STREAM")
	if err != nil || s == nil {
		c.mu.Unlock()
		return err
	}
	var serr error = fmt.Errorf("the server reset the stream (%v)", f.ErrCode)
	serr = &http2StreamErr{addr: c.addr, err: serr}
	if f.ErrCode == http2.ErrCodeRefusedStream && s.resp == nil {
		serr = &errRetry{err: serr, c: c}
	}
	s.fail(serr)
	c.closeStream(s)
	c.unlock()
	return nil
}

// http2StreamErr is one stream's failure.
type http2StreamErr struct {
	addr string
	err  error
}

func (e *http2StreamErr) Error() string {
	return fmt.Sprintf("HTTP/2 stream to %s: %v", e.addr, e.err)
}

func (e *http2StreamErr) Unwrap() error { return e.err }

// streamError resets stream id with code and fails it with err.
func (c *conn) streamError(id uint32, code http2.ErrCode, err error) {
	c.mu.Lock()
	s := c.streams[id]
	if s != nil {
		s.fail(&http2StreamErr{addr: c.addr, err: err})
		c.closeStream(s)
	}
	c.unlock()
	c.write(func(b []byte) []byte { return h2frames.AppendRSTStream(b, id, code) })
}

// closeStream removes s from c; c.mu is held.
func (c *conn) closeStream(s *stream) {
	if s.closed {
		return
	}
	s.closed = true
	delete(c.streams, s.id)
	if c.release() {
		c.freed = true
	}
}

func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	first := !c.goingAway
	c.goingAway = true
	c.lastStream = f.LastStreamID
	for id, s := range c.streams {
		if id > f.LastStreamID {
			s.fail(&errRetry{err: &http2StreamErr{addr: c.addr, err: fmt.Errorf("the server is going away (GOAWAY %v) and did not process the request", f.ErrCode)}, c: c})
			c.closeStream(s)
		}
	}
	if c.active == 0 && c.err == nil {
		c.err = errClosedIdle
		c.mu.Unlock()
		c.t.remove(c)
		c.nc.Close()
		return
	}
	c.unlock()
	if first {
		c.t.remove(c)
	}
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	if f.StreamID == 0 {
		w := c.sendWindow + int64(f.Increment)
		if w > maxWindow {
			c.mu.Unlock()
			return connErr{code: http2.ErrCodeFlowControl, msg: "WINDOW_UPDATE took the connection's window past 2^31-1"}
		}
		c.sendWindow = w
		c.flow.Broadcast()
		c.mu.Unlock()
		return nil
	}
	s, err := c.stream(f.StreamID, "WINDOW_UPDATE")
	if err != nil || s == nil {
		c.mu.Unlock()
		return err
	}
	w := int64(s.sendWindow) + int64(f.Increment)
	if w <= maxWindow {
		s.sendWindow = int32(w)
		c.flow.Broadcast()
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	c.streamError(f.StreamID, http2.ErrCodeFlowControl, errors.New("WINDOW_UPDATE took the stream's window past 2^31-1"))
	return nil
}
