package h2server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// memConn is a connection whose client sends in and then closes; what
// the server writes is dropped.
type memConn struct {
	r io.Reader
}

func (c *memConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzServerConn feeds arbitrary bytes, after the preface, to a
// connection: whatever they are, the server must not panic, and every
// handler it starts must return (ServeConn waits for them).
func FuzzServerConn(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &Server{MaxConcurrentStreams: 8, MaxHeaderBytes: 4 << 10, WriteTimeout: time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/plain")
				w.Write(b)
				w.(http.Flusher).Flush()
			})}
		s.floodWindow = time.Hour
		// ServeConn returns once the connection's handlers have.
		_ = s.ServeConn(&memConn{r: bytes.NewReader(in)}, true)
	})
}

// fuzzSeeds are frame sequences of the kinds a client sends.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	add := func(build func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer)) {
		var b, hb bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		enc := hpack.NewEncoder(&hb)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		build(fr, enc, &hb)
		seeds = append(seeds, b.Bytes())
	}
	block := func(enc *hpack.Encoder, hb *bytes.Buffer, kv ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	post := []string{":method", "POST", ":scheme", "http", ":path", "/v1/messages", ":authority", "x", "content-length", "5"}
	add(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(enc, hb, getFields...), EndStream: true, EndHeaders: true})
		fr.WritePing(false, [8]byte{1})
	})
	add(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(enc, hb, post...), EndHeaders: true})
		fr.WriteData(1, false, []byte("he"))
		fr.WriteWindowUpdate(0, 100)
		fr.WriteData(1, true, []byte("llo"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(enc, hb, post...), EndHeaders: true})
		fr.WriteRSTStream(3, http2.ErrCodeCancel)
	})
	add(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		b := block(enc, hb, append(append([]string(nil), getFields...), "cookie", "a=1", "cookie", "b=2", "x-long", string(make([]byte, 100)))...)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:10]})
		fr.WriteContinuation(1, false, b[10:20])
		fr.WriteContinuation(1, true, b[20:])
		fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	add(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(enc, hb, post...), EndHeaders: true,
			Priority: http2.PriorityParam{StreamDep: 0, Weight: 3}})
		fr.WriteDataPadded(1, true, []byte("hello"), make([]byte, 7))
		fr.WritePriority(3, http2.PriorityParam{StreamDep: 1})
		fr.WriteRawFrame(0xfa, 0, 0, []byte("unknown"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block(enc, hb, ":method", "GET", "Upper", "x"), EndStream: true, EndHeaders: true})
	})
	return seeds
}
