package h2server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/h2frames"
	"github.com/straitgw/strait/internal/writebatch"
	"golang.org/x/net/http2"
)

const (
	// streamWindow is the receive window advertised for each stream: a
	// body its handler does not read holds at most this much.
	streamWindow = 1 << 20
	// connWindow is the connection's receive window, so that one slow
	// stream's body does not stall the others.
	connWindow = 16 << 20
	// maxReadFrame is the largest frame read: HTTP/2's default, which the
	// server does not raise.
	maxReadFrame = 16 << 10
	// maxBlockFrames bounds the frames of one header block: a flood of
	// small or empty CONTINUATION frames ends the connection.
	maxBlockFrames = 128
	// maxWindow is the largest flow-control window HTTP/2 allows.
	maxWindow = 1<<31 - 1
	// defaultFloodWindow is the period over which control frames and
	// resets are counted.
	defaultFloodWindow = 10 * time.Second
)

// Flood limits, per floodWindow. A client that goes past one is sent
// GOAWAY ENHANCE_YOUR_CALM: each of these frames costs the server work
// (an answer, a goroutine started and cancelled) and carries no request.
const (
	maxPings    = 1000
	maxSettings = 1000
	// Resets (the client's RST_STREAM, and streams refused or reset for
	// its errors) may be up to half the streams it opened, plus this;
	// rapid reset (CVE-2023-44487) resets every stream it opens.
	maxResetsBase = 1000
	// WINDOW_UPDATE frames may be a few per stream opened, plus this.
	maxWindowUpdatesBase = 10000
	// Empty DATA frames (on open or closed streams), PRIORITY and unknown
	// frame types may be one per stream opened, plus this.
	maxIdleFramesBase = 1000
)

// counter counts events over a fixed window.
type counter struct {
	n     int
	start time.Time
}

// add counts one event at now and returns the count in the window.
func (k *counter) add(now time.Time, window time.Duration) int {
	if now.Sub(k.start) > window {
		k.n, k.start = 0, now
	}
	k.n++
	return k.n
}

// conn is one HTTP/2 connection.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	log    *slog.Logger
	ctx    context.Context // ends with the connection, or with BaseContext
	cancel context.CancelFunc
	// streamCtx is the parent of the streams' contexts: ctx's values
	// without its cancellation. A stream's context registered as a child
	// of ctx would be one entry more in a map of thousands, inserted and
	// deleted per request; instead the connection cancels its open
	// streams itself when ctx ends (cancelStreams).
	streamCtx context.Context

	// The reader's own state.
	fr      *http2.Framer
	dec     *h2frames.HeaderDecoder
	hb      headerBlock
	floods  struct{ pings, settings, resets, windowUpdates, idleFrames, opened counter }
	fwindow time.Duration

	// wmu serialises writes to nc; the HPACK encoder and the frame buffer
	// are under it. It is never taken while mu is held.
	wmu      writebatch.Locked // over nc, which ServeConn makes a *writebatch.Conn
	wbuf     []byte
	henc     h2frames.HeaderEncoder
	hbuf     []byte    // a header block being written
	wdlRenew time.Time // when the socket's write deadline is next moved on
	wtimeout time.Duration

	// mu guards the state below and every stream's shared state.
	mu          sync.Mutex
	flow        sync.Cond // broadcast when send windows grow, or a stream or the connection ends
	streams     map[uint32]*stream
	maxClientID uint32 // the highest stream the client opened
	sendWin     int64  // the connection's send window
	peerWin     int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrm  int    // the client's SETTINGS_MAX_FRAME_SIZE
	recvWin     int64  // what the client may still send on the connection
	recvUnacked int64  // read (or dropped) and not yet given back
	goneAway    bool   // GOAWAY sent or received: no new streams
	// closeWhenIdle: the connection closes once its last stream ends,
	// because the client sent GOAWAY or ours for a drain has been
	// written. Not before ours is written: closing the writing side
	// first would lose it (the write fails with EPIPE).
	closeWhenIdle bool
	closed        bool
	lingering     atomic.Bool // the connection is ending cleanly: see linger
	idleSince     time.Time
	idleTimer     *time.Timer

	handlers sync.WaitGroup // the streams' handlers running
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String(), log: s.log(),
		streams: map[uint32]*stream{}, sendWin: 65535, peerWin: 65535, peerMaxFrm: 16384,
		recvWin: connWindow, wtimeout: orDefault(s.WriteTimeout, DefaultWriteTimeout),
		fwindow: orDefault(s.floodWindow, defaultFloodWindow)}
	c.flow.L = &c.mu
	c.wmu.Init(nc)
	base := s.BaseContext
	if base == nil {
		base = context.Background()
	}
	c.ctx, c.cancel = context.WithCancel(base)
	c.streamCtx = context.WithoutCancel(c.ctx)
	context.AfterFunc(c.ctx, c.cancelStreams)
	c.fr = http2.NewFramer(nil, nc)
	c.fr.SetMaxReadFrameSize(maxReadFrame)
	// A DATA frame is handled (its bytes copied out) before the next is
	// read, so one frame value serves them all.
	c.fr.SetReuseFrames()
	c.dec = h2frames.NewHeaderDecoder(4096, s.maxHeaderBytes())
	c.hb.max = s.maxHeaderBytes()
	return c
}

// serve runs the connection's reader until the connection ends.
func (c *conn) serve(prefaceRead bool) error {
	err := c.start(prefaceRead)
	for err == nil {
		var f http2.Frame
		f, err = c.fr.ReadFrame()
		if err != nil {
			err = c.readError(err)
			continue
		}
		err = c.handle(f)
	}
	if errors.Is(err, errGoneAway) {
		// The client must get the GOAWAY: closing with its bytes unread
		// would reset the connection, and a reset may discard what was
		// sent before it.
		c.abort()
		c.linger()
		err = nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || c.lingering.Load() {
		err = nil
	}
	c.close(err)
	// Every stream's context is cancelled: the handlers return, and the
	// connection is not done until they have.
	c.handlers.Wait()
	return err
}

// linger shuts the connection's writing side and reads (and drops) what
// the client still sends, for at most lingerTime, so that what was
// written reaches it before the connection closes.
func (c *conn) linger() {
	c.lingering.Store(true)
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() != nil {
			return
		}
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, c.nc)
}

// lingerTime bounds how long a connection ending cleanly waits for its
// client to close.
const lingerTime = time.Second

// closeGracefully ends a connection with no stream left: the reader
// lingers, then closes it.
func (c *conn) closeGracefully() {
	if c.lingering.Swap(true) {
		return
	}
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
		return
	}
	c.close(nil)
}

// errGoneAway ends the reader after a GOAWAY for an error was sent.
var errGoneAway = errors.New("GOAWAY sent")

// start reads the client's preface and first SETTINGS, which must arrive
// within ReadHeaderTimeout, and sends the server's.
func (c *conn) start(prefaceRead bool) error {
	_ = c.nc.SetReadDeadline(time.Now().Add(orDefault(c.s.ReadHeaderTimeout, DefaultReadHeaderTimeout)))
	if !prefaceRead {
		var p [len(Preface)]byte
		if _, err := io.ReadFull(c.nc, p[:]); err != nil {
			return err
		}
		if string(p[:]) != Preface {
			return errors.New("the client did not send HTTP/2's preface")
		}
	}
	c.wmu.Lock()
	c.wbuf = h2frames.AppendSettings(c.wbuf[:0],
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(c.s.maxStreams())},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: uint32(c.s.maxHeaderBytes())},
	)
	c.wbuf = h2frames.AppendWindowUpdate(c.wbuf, 0, connWindow-65535)
	err := c.writeLocked()
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return c.readError(err)
	}
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
		return c.goAway(http2.ErrCodeProtocol, "the connection must begin with SETTINGS")
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	c.mu.Lock()
	c.idleSince = time.Now()
	idle := orDefault(c.s.IdleTimeout, DefaultIdleTimeout)
	c.idleTimer = time.AfterFunc(idle, c.onIdle)
	c.mu.Unlock()
	return c.handle(f)
}

// onIdle closes the connection if it has had no stream for IdleTimeout.
func (c *conn) onIdle() {
	idle := orDefault(c.s.IdleTimeout, DefaultIdleTimeout)
	c.mu.Lock()
	if c.closed || len(c.streams) > 0 {
		c.mu.Unlock()
		return
	}
	if left := idle - time.Since(c.idleSince); left > 0 {
		c.idleTimer.Reset(left)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.drain()
}

// writeLocked writes c.wbuf, under wmu.
func (c *conn) writeLocked() error {
	if now := time.Now(); now.After(c.wdlRenew) {
		_ = c.nc.SetWriteDeadline(now.Add(c.wtimeout))
		c.wdlRenew = now.Add(c.wtimeout / 8)
	}
	_, err := c.wmu.Write(c.wbuf)
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil // a large body's buffer is not kept
	} else {
		c.wbuf = c.wbuf[:0]
	}
	return err
}

// writeFrames writes what build appends.
func (c *conn) writeFrames(build func([]byte) []byte) error {
	c.wmu.Lock()
	c.wbuf = build(c.wbuf[:0])
	err := c.writeLocked()
	c.wmu.Unlock()
	return err
}

// readError acts on a frame the framer refused; it returns an error if
// the connection must end.
func (c *conn) readError(err error) error {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		if st := c.stream(se.StreamID); st != nil {
			return c.resetStream(st, se.Code)
		}
		return c.refuse(se.StreamID, se.Code)
	case errors.As(err, &ce):
		return c.goAway(http2.ErrCode(ce), "")
	case errors.Is(err, http2.ErrFrameTooLarge):
		return c.goAway(http2.ErrCodeFrameSize, "frame too large")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return err
	}
	// The framer's own protocol errors (a frame out of order inside a
	// header block, a bad length) have no exported type.
	return c.goAway(http2.ErrCodeProtocol, err.Error())
}

// goAway sends GOAWAY for an error and returns errGoneAway: the
// connection closes, its streams cancelled.
func (c *conn) goAway(code http2.ErrCode, why string) error {
	c.mu.Lock()
	c.goneAway = true
	last := c.maxClientID
	c.mu.Unlock()
	c.log.Debug("HTTP/2: closing a client's connection", "remote", c.remote, "code", code.String(), "detail", why)
	_ = c.writeFrames(func(b []byte) []byte { return h2frames.AppendGoAway(b, last, code, "") })
	return errGoneAway
}

// drain sends GOAWAY NO_ERROR: the connection takes no new stream and
// closes once its streams are answered.
func (c *conn) drain() {
	c.mu.Lock()
	if c.goneAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goneAway = true
	last := c.maxClientID
	c.mu.Unlock()
	_ = c.writeFrames(func(b []byte) []byte { return h2frames.AppendGoAway(b, last, http2.ErrCodeNo, "") })
	// Streams that ended while the GOAWAY was being written left the
	// closing to this.
	c.mu.Lock()
	c.closeWhenIdle = true
	idle := len(c.streams) == 0
	c.mu.Unlock()
	if idle {
		c.closeGracefully()
	}
}

// close ends the connection: every stream's context is cancelled and
// whatever waits on it wakes.
func (c *conn) close(err error) {
	c.abort()
	if err != nil {
		c.log.Debug("HTTP/2: a client's connection ended", "remote", c.remote, "error", err)
	}
	c.nc.Close()
}

// abort ends every stream and marks the connection closed.
func (c *conn) abort() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	for _, st := range c.streams {
		st.abortLocked(errConnClosed)
	}
	c.flow.Broadcast()
	c.mu.Unlock()
	c.cancel()
}

var errConnClosed = errors.New("h2server: connection closed")

// cancelStreams cancels the open streams' contexts once the connection's
// context has ended; a stream opened after that is cancelled as it is
// added (handle).
func (c *conn) cancelStreams() {
	c.mu.Lock()
	for _, st := range c.streams {
		st.cancel()
	}
	c.mu.Unlock()
}

func (c *conn) stream(id uint32) *stream {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	return st
}

// refuse answers a stream that is not open with RST_STREAM, counted
// as a reset.
func (c *conn) refuse(id uint32, code http2.ErrCode) error {
	if err := c.countReset(); err != nil {
		return err
	}
	return c.writeFrames(func(b []byte) []byte { return h2frames.AppendRSTStream(b, id, code) })
}

// countReset counts a reset, and ends the connection past the limit.
func (c *conn) countReset() error {
	now := time.Now()
	n := c.floods.resets.add(now, c.fwindow)
	if n > maxResetsBase+c.opened(now)/2 {
		return c.goAway(http2.ErrCodeEnhanceYourCalm, "too many streams reset")
	}
	return nil
}

// opened returns the streams opened in the flood window.
func (c *conn) opened(now time.Time) int {
	k := &c.floods.opened
	if now.Sub(k.start) > c.fwindow {
		return 0
	}
	return k.n
}

// calm ends the connection with ENHANCE_YOUR_CALM if n is past limit.
func (c *conn) calm(n, limit int, what string) error {
	if n > limit {
		return c.goAway(http2.ErrCodeEnhanceYourCalm, "too many "+what)
	}
	return nil
}

// handle acts on one frame from the client.
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.calm(c.floods.settings.add(time.Now(), c.fwindow), maxSettings, "SETTINGS frames"); err != nil {
			return err
		}
		return c.settings(f)
	case *http2.HeadersFrame:
		return c.headers(f)
	case *http2.ContinuationFrame:
		return c.continuation(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.WindowUpdateFrame:
		now := time.Now()
		if err := c.calm(c.floods.windowUpdates.add(now, c.fwindow), maxWindowUpdatesBase+4*c.opened(now), "WINDOW_UPDATE frames"); err != nil {
			return err
		}
		return c.windowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.calm(c.floods.pings.add(time.Now(), c.fwindow), maxPings, "PING frames"); err != nil {
			return err
		}
		return c.writeFrames(func(b []byte) []byte { return h2frames.AppendPingAck(b, f.Data) })
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		st, idle := c.streams[f.StreamID], f.StreamID > c.maxClientID
		if st != nil {
			st.resetByPeer(f.ErrCode)
		}
		c.mu.Unlock()
		if idle {
			return c.goAway(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
		}
		if st != nil {
			return c.countReset()
		}
		return nil
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.goneAway = true
		c.closeWhenIdle = true
		idle := len(c.streams) == 0
		c.mu.Unlock()
		if idle {
			return io.EOF
		}
		return nil
	case *http2.PushPromiseFrame:
		return c.goAway(http2.ErrCodeProtocol, "clients cannot push")
	}
	// PRIORITY and frames of unknown types are ignored, and counted.
	return c.idleFrame()
}

// idleFrame counts a frame that carries nothing.
func (c *conn) idleFrame() error {
	now := time.Now()
	return c.calm(c.floods.idleFrames.add(now, c.fwindow), maxIdleFramesBase+c.opened(now), "empty or ignored frames")
}

// settings applies the client's SETTINGS and acknowledges them.
func (c *conn) settings(f *http2.SettingsFrame) error {
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			c.peerMaxFrm = int(s.Val)
		case http2.SettingInitialWindowSize:
			// Open streams' windows move by the change (RFC 9113, 6.9.2).
			d := int64(s.Val) - c.peerWin
			c.peerWin = int64(s.Val)
			for _, st := range c.streams {
				if st.sendWin += d; st.sendWin > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		}
		return nil
	})
	c.flow.Broadcast()
	c.mu.Unlock()
	if err != nil {
		code := http2.ErrCodeProtocol
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			code = http2.ErrCode(ce)
		}
		return c.goAway(code, "bad SETTINGS")
	}
	// SETTINGS_HEADER_TABLE_SIZE needs nothing: the encoder keeps no
	// dynamic table (h2frames.HeaderEncoder).
	c.wmu.Lock()
	c.wbuf = h2frames.AppendSettingsAck(c.wbuf[:0])
	err = c.writeLocked()
	c.wmu.Unlock()
	return err
}

// windowUpdate grows a send window.
func (c *conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	if f.StreamID == 0 {
		c.sendWin += inc
		over := c.sendWin > maxWindow
		c.flow.Broadcast()
		c.mu.Unlock()
		if over {
			return c.goAway(http2.ErrCodeFlowControl, "connection window overflow")
		}
		return nil
	}
	st, idle := c.streams[f.StreamID], f.StreamID > c.maxClientID
	var over bool
	if st != nil {
		st.sendWin += inc
		over = st.sendWin > maxWindow
		c.flow.Broadcast()
	}
	c.mu.Unlock()
	switch {
	case idle:
		return c.goAway(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
	case over:
		return c.resetStream(st, http2.ErrCodeFlowControl)
	}
	return nil
}

// data takes a DATA frame's payload into its stream's body.
func (c *conn) data(f *http2.DataFrame) error {
	n := int64(f.Header().Length) // padding included: it counts against the windows
	p := f.Data()
	c.mu.Lock()
	if n > c.recvWin {
		c.mu.Unlock()
		return c.goAway(http2.ErrCodeFlowControl, "DATA beyond the connection's window")
	}
	c.recvWin -= n
	st, idle := c.streams[f.StreamID], f.StreamID > c.maxClientID
	var code http2.ErrCode = 0xffffffff // none
	drop := n
	if st != nil && !st.remoteEnded && !st.aborted() {
		switch {
		case n > st.recvWin:
			code = http2.ErrCodeFlowControl
		case st.declared >= 0 && st.received+int64(len(p)) > st.declared:
			code = http2.ErrCodeProtocol // more than content-length
		case f.StreamEnded() && st.declared >= 0 && st.received+int64(len(p)) != st.declared:
			code = http2.ErrCodeProtocol // less than content-length
		default:
			st.recvWin -= n
			st.received += int64(len(p))
			drop = n - int64(len(p))
			if st.bodyClosed {
				drop = n
			} else if len(p) > 0 {
				if st.buf == nil {
					st.buf = getBodyBuf(len(p))
				}
				st.buf = append(st.buf, p...)
			}
			if f.StreamEnded() {
				st.remoteEnded = true
			}
			st.cond.Broadcast()
		}
	} else if st != nil && st.remoteEnded && !st.aborted() {
		code = http2.ErrCodeStreamClosed
	}
	c.mu.Unlock()
	if idle {
		return c.goAway(http2.ErrCodeProtocol, "DATA on an idle stream")
	}
	if err := c.giveBack(nil, drop); err != nil {
		return err
	}
	switch {
	case code == http2.ErrCodeStreamClosed:
		return c.dataAfterEnd(st)
	case code != 0xffffffff && st != nil:
		return c.resetStream(st, code)
	case st == nil:
		// A closed stream: DATA may still be in flight after a reset or
		// an early answer, up to the stream's window, so it is not counted
		// as a reset; an empty one is counted as a frame carrying nothing.
		if len(p) == 0 {
			if err := c.idleFrame(); err != nil {
				return err
			}
		}
		return c.writeFrames(func(b []byte) []byte { return h2frames.AppendRSTStream(b, f.StreamID, http2.ErrCodeStreamClosed) })
	case len(p) == 0 && !f.StreamEnded():
		return c.idleFrame()
	}
	return nil
}

// giveBack returns n bytes of receive window to the connection (and to
// st, if set and still receiving) once enough has gathered to be worth
// a WINDOW_UPDATE.
func (c *conn) giveBack(st *stream, n int64) error {
	if n <= 0 {
		return nil
	}
	var connInc, streamInc int64
	c.mu.Lock()
	c.recvUnacked += n
	if c.recvUnacked >= connWindow/4 {
		connInc = c.recvUnacked
		c.recvWin += connInc
		c.recvUnacked = 0
	}
	if st != nil && !st.remoteEnded && !st.aborted() {
		st.recvUnacked += n
		if st.recvUnacked >= streamWindow/4 {
			streamInc = st.recvUnacked
			st.recvWin += streamInc
			st.recvUnacked = 0
		}
	}
	closed := c.closed
	c.mu.Unlock()
	if closed || connInc == 0 && streamInc == 0 {
		return nil
	}
	return c.writeFrames(func(b []byte) []byte {
		if connInc > 0 {
			b = h2frames.AppendWindowUpdate(b, 0, uint32(connInc))
		}
		if streamInc > 0 {
			b = h2frames.AppendWindowUpdate(b, st.id, uint32(streamInc))
		}
		return b
	})
}

// dataAfterEnd answers DATA on a stream the client has ended. While the
// answer is still being sent, the stream is reset. Once its end has been
// sent too, the stream is closed, though its handler may not have
// returned yet (the client can answer the last frame before then): that
// is answered as a stream already gone, with RST_STREAM alone.
func (c *conn) dataAfterEnd(st *stream) error {
	c.wmu.Lock()
	if st.ended {
		c.wbuf = h2frames.AppendRSTStream(c.wbuf[:0], st.id, http2.ErrCodeStreamClosed)
		err := c.writeLocked()
		c.wmu.Unlock()
		return err
	}
	c.wmu.Unlock()
	return c.resetStream(st, http2.ErrCodeStreamClosed)
}

// resetStream ends a stream for an error: RST_STREAM is sent, its
// handler's context cancelled and its body's reads fail.
func (c *conn) resetStream(st *stream, code http2.ErrCode) error {
	c.mu.Lock()
	already := st.aborted()
	if !already {
		st.abortLocked(http2.StreamError{StreamID: st.id, Code: code})
		c.flow.Broadcast()
	}
	c.mu.Unlock()
	if already {
		return nil
	}
	if err := c.countReset(); err != nil {
		return err
	}
	st.sendRST(code)
	return nil
}
