package h2server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawClient speaks HTTP/2 frame by frame, to script what a real client
// would not send.
type rawClient struct {
	t   *testing.T
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

// dialRaw connects and sends the preface and an empty SETTINGS, unless
// bare.
func dialRaw(t *testing.T, addr string, bare bool) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hb)
	if !bare {
		io.WriteString(nc, Preface)
		c.fr.WriteSettings()
	}
	return c
}

// block encodes a header list given as name, value pairs.
func (c *rawClient) block(kv ...string) []byte {
	c.hb.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), c.hb.Bytes()...)
}

var getFields = []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "x"}

// request opens stream id with kv (the defaults of a GET when empty).
func (c *rawClient) request(id uint32, end bool, kv ...string) error {
	if len(kv) == 0 {
		kv = getFields
	}
	b := c.block(kv...)
	n := min(len(b), 16<<10)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:n],
		EndStream: end, EndHeaders: n == len(b)}); err != nil {
		return err
	}
	for b = b[n:]; len(b) > 0; b = b[n:] {
		n = min(len(b), 16<<10)
		if err := c.fr.WriteContinuation(id, n == len(b), b[:n]); err != nil {
			return err
		}
	}
	return nil
}

// next reads the next frame; the deadline only keeps a broken test from
// hanging.
func (c *rawClient) next() (http2.Frame, error) {
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	return c.fr.ReadFrame()
}

// until reads frames until one satisfies ok, failing the test if the
// connection ends first.
func (c *rawClient) until(what string, ok func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.next()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok(f) {
			return f
		}
	}
}

func (c *rawClient) expectGoAway(code http2.ErrCode) *http2.GoAwayFrame {
	c.t.Helper()
	f := c.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if f.ErrCode != code {
		c.t.Fatalf("GOAWAY %v, want %v", f.ErrCode, code)
	}
	return f
}

func (c *rawClient) expectRST(id uint32, code http2.ErrCode) {
	c.t.Helper()
	f := c.until("RST_STREAM", func(f http2.Frame) bool {
		if g, ok := f.(*http2.GoAwayFrame); ok {
			c.t.Fatalf("GOAWAY %v while waiting for RST_STREAM", g.ErrCode)
		}
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id
	}).(*http2.RSTStreamFrame)
	if f.ErrCode != code {
		c.t.Fatalf("RST_STREAM %v, want %v", f.ErrCode, code)
	}
}

// expectStatus waits for the response HEADERS of stream id.
func (c *rawClient) expectStatus(id uint32, status string) {
	c.t.Helper()
	f := c.until("HEADERS", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			c.t.Fatalf("GOAWAY %v while waiting for a response", f.ErrCode)
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				c.t.Fatalf("RST_STREAM %v while waiting for a response", f.ErrCode)
			}
		case *http2.MetaHeadersFrame:
			return f.StreamID == id
		}
		return false
	}).(*http2.MetaHeadersFrame)
	if got := f.PseudoValue("status"); got != status {
		c.t.Fatalf("stream %d: status %s, want %s", id, got, status)
	}
}

// expectEnd waits for the connection to close.
func (c *rawClient) expectEnd() {
	c.t.Helper()
	for {
		if _, err := c.next(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("the connection stayed open")
			}
			return
		}
	}
}

// rawServer serves a handler answering 200 "ok", or blocking until its
// request ends for paths under /block.
func rawServer(t *testing.T, s *Server) string {
	if s.Handler == nil {
		s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/block") {
				<-r.Context().Done()
				return
			}
			io.WriteString(w, "ok")
		})
	}
	s.floodWindow = time.Hour
	return serve(t, s)
}

func TestPrefaceAndSettings(t *testing.T) {
	addr := rawServer(t, &Server{})
	t.Run("bad preface", func(t *testing.T) {
		c := dialRaw(t, addr, true)
		io.WriteString(c.nc, "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
		c.expectEnd()
	})
	t.Run("first frame not SETTINGS", func(t *testing.T) {
		c := dialRaw(t, addr, true)
		io.WriteString(c.nc, Preface)
		c.fr.WritePing(false, [8]byte{})
		c.expectGoAway(http2.ErrCodeProtocol)
	})
	t.Run("SETTINGS acknowledged, unknown frames and settings ignored", func(t *testing.T) {
		c := dialRaw(t, addr, true)
		io.WriteString(c.nc, Preface)
		c.fr.WriteSettings(http2.Setting{ID: 0x7777, Val: 9})
		c.until("SETTINGS ACK", func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && s.IsAck() })
		c.fr.WriteRawFrame(0xfa, 0, 0, []byte("whatever"))
		c.fr.WritePing(false, [8]byte{1, 2, 3})
		c.until("PING ACK", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() && p.Data[0] == 1 })
		c.request(1, true)
		c.expectStatus(1, "200")
	})
}

func TestHeaderBlockLimits(t *testing.T) {
	addr := rawServer(t, &Server{MaxHeaderBytes: 16 << 10})
	many := func(n int) []string {
		kv := append([]string(nil), getFields...)
		for i := range n {
			kv = append(kv, "x-f"+string(rune('a'+i%26))+strings.Repeat("x", i/26), strings.Repeat("v", 1000))
		}
		return kv
	}
	t.Run("too large a list is answered 431, and the connection serves on", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.request(1, true, many(20)...) // about 20 KB decoded
		c.expectStatus(1, "431")
		c.request(3, true)
		c.expectStatus(3, "200")
	})
	t.Run("a block past twice the limit ends the connection", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		b := c.block(many(40)...)
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:10000]})
		for b = b[10000:]; len(b) > 0; {
			n := min(len(b), 10000)
			c.fr.WriteContinuation(1, n == len(b), b[:n])
			b = b[n:]
		}
		c.expectGoAway(http2.ErrCodeProtocol)
	})
	t.Run("a flood of CONTINUATION frames ends the connection", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(getFields...)})
		go func() {
			for range 1000 {
				if c.fr.WriteContinuation(1, false, nil) != nil {
					return
				}
			}
		}()
		c.expectGoAway(http2.ErrCodeProtocol)
	})
	t.Run("another frame inside a header block", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(getFields...)})
		c.fr.WritePing(false, [8]byte{})
		c.expectGoAway(http2.ErrCodeProtocol)
	})
	t.Run("a string past the limit", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.request(1, true, append(append([]string(nil), getFields...), "x-big", strings.Repeat("v", 17<<10))...)
		c.expectGoAway(http2.ErrCodeCompression)
	})
}

func TestStreamIDRules(t *testing.T) {
	addr := rawServer(t, &Server{})
	for _, tc := range []struct {
		name string
		do   func(c *rawClient)
		code http2.ErrCode
	}{
		{"even stream", func(c *rawClient) { c.request(2, true) }, http2.ErrCodeProtocol},
		{"stream ID going back", func(c *rawClient) {
			c.request(5, true)
			c.expectStatus(5, "200")
			c.request(3, true)
		}, http2.ErrCodeStreamClosed},
		{"HEADERS on a closed stream", func(c *rawClient) {
			c.request(1, true)
			c.expectStatus(1, "200")
			c.request(1, true)
		}, http2.ErrCodeStreamClosed},
		{"DATA on an idle stream", func(c *rawClient) { c.fr.WriteData(7, false, []byte("x")) }, http2.ErrCodeProtocol},
		{"RST_STREAM on an idle stream", func(c *rawClient) { c.fr.WriteRSTStream(7, http2.ErrCodeCancel) }, http2.ErrCodeProtocol},
		{"WINDOW_UPDATE on an idle stream", func(c *rawClient) { c.fr.WriteWindowUpdate(7, 1) }, http2.ErrCodeProtocol},
		{"PUSH_PROMISE", func(c *rawClient) {
			c.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: c.block(getFields...), EndHeaders: true})
		}, http2.ErrCodeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr, false)
			tc.do(c)
			c.expectGoAway(tc.code)
		})
	}
	t.Run("DATA on a closed stream", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.dataAfterTheEnd(1)
		c.request(3, true)
		c.expectStatus(3, "200")
	})
}

// TestDataAfterBothEnds: a handler that has sent its whole answer
// (Content-Length reached: END_STREAM goes with the last DATA) may not
// have returned when the client's next frame arrives. The stream is
// closed on the wire, so DATA on it is answered with RST_STREAM
// (STREAM_CLOSED), as for a stream already gone, and not dropped.
func TestDataAfterBothEnds(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	addr := rawServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
		<-release // still running after END_STREAM went out
	})})
	dialRaw(t, addr, false).dataAfterTheEnd(1)
}

// dataAfterTheEnd asks for stream id's answer, and once its last DATA
// frame (END_STREAM) has come sends DATA on it, which must be answered
// with RST_STREAM(STREAM_CLOSED).
func (c *rawClient) dataAfterTheEnd(id uint32) {
	c.t.Helper()
	c.request(id, true)
	c.expectStatus(id, "200")
	c.until("the end of the answer", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == id && d.StreamEnded()
	})
	c.fr.WriteData(id, false, []byte("late"))
	c.expectRST(id, http2.ErrCodeStreamClosed)
}

func TestMaxConcurrentStreams(t *testing.T) {
	addr := rawServer(t, &Server{MaxConcurrentStreams: 2})
	c := dialRaw(t, addr, false)
	c.until("SETTINGS", func(f http2.Frame) bool {
		s, ok := f.(*http2.SettingsFrame)
		if ok && !s.IsAck() {
			if v, _ := s.Value(http2.SettingMaxConcurrentStreams); v != 2 {
				t.Fatalf("MAX_CONCURRENT_STREAMS %d", v)
			}
		}
		return ok && !s.IsAck()
	})
	c.request(1, true, ":method", "GET", ":scheme", "http", ":path", "/block")
	c.request(3, true, ":method", "GET", ":scheme", "http", ":path", "/block")
	c.request(5, true)
	c.expectRST(5, http2.ErrCodeRefusedStream)
	// A stream ended frees its place.
	c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	for id := uint32(7); ; id += 2 {
		c.request(id, true)
		f := c.until("an answer", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				return f.StreamID == id
			case *http2.RSTStreamFrame:
				return f.StreamID == id
			}
			return false
		})
		if _, ok := f.(*http2.MetaHeadersFrame); ok {
			break // the handler of stream 1 had returned
		}
		if id > 1000 {
			t.Fatal("the place of a reset stream was never freed")
		}
	}
}

func TestFloods(t *testing.T) {
	addr := rawServer(t, &Server{MaxConcurrentStreams: 10000})
	for _, tc := range []struct {
		name string
		do   func(c *rawClient) error
	}{
		{"rapid reset", func(c *rawClient) error {
			for id := uint32(1); id < 2*3000; id += 2 {
				c.request(id, false, ":method", "POST", ":scheme", "http", ":path", "/block")
				if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
					return err
				}
			}
			return nil
		}},
		{"PING", func(c *rawClient) error {
			for range maxPings + 10 {
				if err := c.fr.WritePing(false, [8]byte{}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"SETTINGS", func(c *rawClient) error {
			for range maxSettings + 10 {
				if err := c.fr.WriteSettings(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"empty DATA", func(c *rawClient) error {
			c.request(1, false, ":method", "POST", ":scheme", "http", ":path", "/block")
			for range maxIdleFramesBase + 10 {
				if err := c.fr.WriteData(1, false, nil); err != nil {
					return err
				}
			}
			return nil
		}},
		{"PRIORITY", func(c *rawClient) error {
			for range maxIdleFramesBase + 10 {
				if err := c.fr.WritePriority(1, http2.PriorityParam{StreamDep: 0, Weight: 1}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"WINDOW_UPDATE", func(c *rawClient) error {
			for range maxWindowUpdatesBase + 10 {
				if err := c.fr.WriteWindowUpdate(0, 1); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr, false)
			errc := make(chan error, 1)
			go func() { errc <- tc.do(c) }()
			c.expectGoAway(http2.ErrCodeEnhanceYourCalm)
			c.nc.Close()
			<-errc
		})
	}
	t.Run("resets of a fraction of the streams are not a flood", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		go func() {
			for id := uint32(1); id < 2*3000; id += 2 {
				if id%6 == 1 {
					c.request(id, false, ":method", "POST", ":scheme", "http", ":path", "/block")
					c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
				} else {
					c.request(id, true)
				}
			}
			c.fr.WritePing(false, [8]byte{9})
		}()
		c.until("the PING after them", func(f http2.Frame) bool {
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v", g.ErrCode)
			}
			p, ok := f.(*http2.PingFrame)
			return ok && p.Data[0] == 9
		})
	})
}

func TestFlowControlErrors(t *testing.T) {
	addr := rawServer(t, &Server{MaxConcurrentStreams: 100})
	t.Run("connection window overflow", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.fr.WriteWindowUpdate(0, 1<<31-1)
		c.expectGoAway(http2.ErrCodeFlowControl)
	})
	t.Run("stream window overflow", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.request(1, false, ":method", "POST", ":scheme", "http", ":path", "/block")
		c.fr.WriteWindowUpdate(1, 1<<31-1)
		c.expectRST(1, http2.ErrCodeFlowControl)
	})
	t.Run("DATA past the stream's window", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		c.request(1, false, ":method", "POST", ":scheme", "http", ":path", "/block")
		chunk := make([]byte, 16<<10)
		go func() {
			for range streamWindow/len(chunk) + 1 {
				if c.fr.WriteData(1, false, chunk) != nil {
					return
				}
			}
		}()
		c.expectRST(1, http2.ErrCodeFlowControl)
	})
	t.Run("DATA past the connection's window", func(t *testing.T) {
		c := dialRaw(t, addr, false)
		chunk := make([]byte, 16<<10)
		go func() {
			for id := uint32(1); id <= 2*(connWindow/streamWindow+1); id += 2 {
				c.request(id, false, ":method", "POST", ":scheme", "http", ":path", "/block")
				for range streamWindow / len(chunk) {
					if c.fr.WriteData(id, false, chunk) != nil {
						return
					}
				}
			}
		}()
		c.expectGoAway(http2.ErrCodeFlowControl)
	})
}

func TestMalformedRequests(t *testing.T) {
	addr := rawServer(t, &Server{})
	base := func(extra ...string) []string { return append(append([]string(nil), getFields...), extra...) }
	for _, tc := range []struct {
		name string
		kv   []string
		body []string // DATA frames; the last ends the stream
	}{
		{"no :path", []string{":method", "GET", ":scheme", "http"}, nil},
		{"no :method", []string{":path", "/", ":scheme", "http"}, nil},
		{"unknown pseudo-header", base(":foo", "x"), nil},
		{"pseudo-header after a regular field", []string{":method", "GET", "accept", "x", ":path", "/", ":scheme", "http"}, nil},
		{"pseudo-header twice", base(":path", "/again"), nil},
		{"upper-case name", base("Accept", "x"), nil},
		{"connection header", base("connection", "keep-alive"), nil},
		{"transfer-encoding", base("transfer-encoding", "chunked"), nil},
		{"te other than trailers", base("te", "gzip"), nil},
		{"CONNECT", []string{":method", "CONNECT", ":authority", "x:1"}, nil},
		{"bad authority", []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "a b"}, nil},
		{"bad content-length", base("content-length", "x"), nil},
		{"body past content-length", []string{":method", "POST", ":scheme", "http", ":path", "/block", "content-length", "3"}, []string{"abcd"}},
		{"body short of content-length", []string{":method", "POST", ":scheme", "http", ":path", "/block", "content-length", "5"}, []string{"ab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr, false)
			c.request(1, tc.body == nil, tc.kv...)
			for i, d := range tc.body {
				c.fr.WriteData(1, i == len(tc.body)-1, []byte(d))
			}
			c.expectRST(1, http2.ErrCodeProtocol)
			c.request(3, true)
			c.expectStatus(3, "200")
		})
	}
}

func TestSlowReaders(t *testing.T) {
	t.Run("a write waiting for window gives up, and resets its stream", func(t *testing.T) {
		werr := make(chan error, 1)
		s := &Server{WriteTimeout: 100 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := w.Write(make([]byte, 100<<10))
			werr <- err
		})}
		addr := rawServer(t, s)
		c := dialRaw(t, addr, true)
		io.WriteString(c.nc, Preface)
		c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		c.request(1, true)
		c.expectRST(1, http2.ErrCodeCancel)
		if err := <-werr; err == nil {
			t.Fatal("a write with no window succeeded")
		}
	})
	t.Run("a client that stops reading loses its connection", func(t *testing.T) {
		werr := make(chan error, 1)
		s := &Server{WriteTimeout: 100 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, 1<<20)
			for range 256 {
				if _, err := w.Write(buf); err != nil {
					werr <- err
					return
				}
			}
			werr <- nil
		})}
		addr := rawServer(t, s)
		c := dialRaw(t, addr, true)
		io.WriteString(c.nc, Preface)
		c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
		c.fr.WriteWindowUpdate(0, 1<<31-1-65535)
		c.request(1, true)
		// and never reads
		if err := <-werr; err == nil {
			t.Fatal("256 MiB were written to a client that reads nothing")
		}
	})
}

func TestTimeouts(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		addr := rawServer(t, &Server{IdleTimeout: 50 * time.Millisecond})
		c := dialRaw(t, addr, false)
		c.request(1, true)
		c.expectStatus(1, "200")
		c.expectGoAway(http2.ErrCodeNo)
		c.expectEnd()
	})
	t.Run("no SETTINGS after the preface", func(t *testing.T) {
		addr := rawServer(t, &Server{ReadHeaderTimeout: 50 * time.Millisecond})
		c := dialRaw(t, addr, true)
		io.WriteString(c.nc, Preface)
		c.expectEnd()
	})
	t.Run("silence before the preface", func(t *testing.T) {
		addr := rawServer(t, &Server{ReadHeaderTimeout: 50 * time.Millisecond})
		c := dialRaw(t, addr, true)
		c.expectEnd()
	})
}

func TestShutdown(t *testing.T) {
	release := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "done")
	})}
	addr := rawServer(t, s)
	c := dialRaw(t, addr, false)
	c.request(1, true)
	c.request(3, true)
	c.until("SETTINGS ACK", func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && s.IsAck() })
	// Both streams are open once a PING sent after them is answered.
	c.fr.WritePing(false, [8]byte{7})
	c.until("PING ACK", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	g := c.expectGoAway(http2.ErrCodeNo)
	if g.LastStreamID != 3 {
		t.Fatalf("GOAWAY's last stream %d, want 3", g.LastStreamID)
	}
	c.request(5, true) // past GOAWAY: not served
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with streams in flight", err)
	default:
	}
	close(release)
	answered := map[uint32]bool{}
	for len(answered) < 2 {
		f := c.until("the answers", func(f http2.Frame) bool { _, ok := f.(*http2.MetaHeadersFrame); return ok })
		answered[f.Header().StreamID] = true
	}
	if !answered[1] || !answered[3] {
		t.Fatalf("answered %v", answered)
	}
	c.expectEnd()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		// The listener is closed: a connection may still be accepted by
		// the kernel's backlog on some systems, but never served.
		t.Log("dial after Shutdown connected")
	}
}

func TestShutdownTimesOutThenCloses(t *testing.T) {
	ended := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		ended <- r.Context().Err()
	})}
	addr := rawServer(t, s)
	c := dialRaw(t, addr, false)
	c.request(1, true)
	c.fr.WritePing(false, [8]byte{7})
	c.until("PING ACK", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-ended; err == nil {
		t.Fatal("the handler's context was not cancelled")
	}
	c.expectEnd()
}

func TestExpectContinue(t *testing.T) {
	addr := rawServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, string(b))
	})})
	c := dialRaw(t, addr, false)
	c.request(1, false, ":method", "POST", ":scheme", "http", ":path", "/", "expect", "100-continue")
	c.expectStatus(1, "100") // before any of the body was sent
	c.fr.WriteData(1, true, []byte("body"))
	c.expectStatus(1, "200")
	f := c.until("the body", func(f http2.Frame) bool { _, ok := f.(*http2.DataFrame); return ok }).(*http2.DataFrame)
	if string(f.Data()) != "body" {
		t.Fatalf("body %q", f.Data())
	}
}

// An answer sent before the whole body arrived is followed by RST_STREAM
// NO_ERROR, so that the client stops sending (RFC 9113, 8.1); DATA still
// in flight on that stream is refused without ending the connection.
func TestEarlyAnswerStopsTheBody(t *testing.T) {
	addr := rawServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(413)
	})})
	c := dialRaw(t, addr, false)
	c.request(1, false, ":method", "POST", ":scheme", "http", ":path", "/", "content-length", "100000")
	c.expectStatus(1, "413")
	c.expectRST(1, http2.ErrCodeNo)
	for range 2000 {
		c.fr.WriteData(1, false, make([]byte, 16))
	}
	c.request(3, true)
	c.expectStatus(3, "413")
}

// countingConn counts the writes made to it.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *countingConn) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.writes }

// TestHeadersAndBodyLeaveInOneWrite: an answer written in one Write goes
// out as HEADERS and DATA in a single write to the socket, not one write
// each; an answer with no Content-Length needs one more, for its end.
// Each answer has a connection of its own, so that no other stream's
// frames can join its batches.
func TestHeadersAndBodyLeaveInOneWrite(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", "5")
		}
		io.WriteString(w, "hello")
	})}
	t.Cleanup(func() { s.Close() })
	for _, tc := range []struct {
		path   string
		writes int
	}{{"/sized", 1}, {"/unsized", 2}} {
		srvSide, cliSide := net.Pipe()
		t.Cleanup(func() { cliSide.Close() })
		counted := &countingConn{Conn: srvSide}
		go s.ServeConn(counted, false)
		// net.Pipe has no buffer: the client writes on a goroutine of its
		// own, with a framer of its own, while the test reads.
		rd := &rawClient{t: t, nc: cliSide, fr: http2.NewFramer(nil, cliSide)}
		rd.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		wr := &rawClient{t: t, nc: cliSide, fr: http2.NewFramer(cliSide, nil)}
		wr.enc = hpack.NewEncoder(&wr.hb)
		send := make(chan struct{})
		go func() {
			io.WriteString(cliSide, Preface)
			wr.fr.WriteSettings()
			<-send
			wr.request(1, true, ":method", "GET", ":scheme", "http", ":path", tc.path, ":authority", "x")
		}()
		rd.until("the SETTINGS ack", func(f http2.Frame) bool {
			sf, ok := f.(*http2.SettingsFrame)
			return ok && sf.IsAck()
		})
		before := counted.count()
		close(send)
		var body []byte
		rd.until("the end of "+tc.path, func(f http2.Frame) bool {
			if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
				body = append(body, d.Data()...)
				return d.StreamEnded()
			}
			return false
		})
		if string(body) != "hello" {
			t.Fatalf("%s: body %q", tc.path, body)
		}
		if n := counted.count() - before; n != tc.writes {
			t.Errorf("%s: the answer took %d writes, want %d", tc.path, n, tc.writes)
		}
	}
}
