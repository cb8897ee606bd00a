package h2client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawServer accepts connections and hands each, after the client's
// preface, to script with a Framer on it.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int32
}

func newRawServer(t *testing.T, script func(n int, fr *http2.Framer, nc net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(s.conns.Add(1))
			go func() {
				defer nc.Close()
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(nc, preface); err != nil {
					return
				}
				fr := http2.NewFramer(nc, nc)
				fr.AllowIllegalWrites = true
				script(n, fr, nc)
			}()
		}
	}()
	return s
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

// readHeaders reads frames until a request's HEADERS, and returns its
// stream.
func readHeaders(fr *http2.Framer) (uint32, error) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		if h, ok := f.(*http2.HeadersFrame); ok {
			return h.StreamID, nil
		}
	}
}

// writeAnswer writes a 200 with body on stream id.
func writeAnswer(fr *http2.Framer, id uint32, body string) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
	fr.WriteData(id, true, []byte(body))
}

// TestGarbageServer fails clearly, without hanging, on a server that
// does not speak HTTP/2.
func TestGarbageServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(nc, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			nc.Close()
		}
	}()
	tr := newTransport(ln.Addr().String())
	_, err = post(t, context.Background(), tr, "http://"+ln.Addr().String()+"/", []byte("{}"))
	if err == nil || !strings.Contains(err.Error(), "does not speak HTTP/2") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("got %v", err)
	}
}

// TestProtocolError ends only the connection whose server broke the
// protocol, with an error naming it.
func TestProtocolError(t *testing.T) {
	s := newRawServer(t, func(n int, fr *http2.Framer, nc net.Conn) {
		fr.WriteSettings()
		for {
			id, err := readHeaders(fr)
			if err != nil {
				return
			}
			if n == 1 {
				fr.WriteData(0, false, []byte("x")) // DATA on stream 0
				io.Copy(io.Discard, nc)
				return
			}
			writeAnswer(fr, id, "ok")
		}
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	_, err := post(t, context.Background(), tr, "http://"+s.addr()+"/", nil)
	var ce *ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "protocol error") || !strings.Contains(err.Error(), s.addr()) {
		t.Fatalf("got %v", err)
	}
	resp, err := post(t, context.Background(), tr, "http://"+s.addr()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" || s.conns.Load() != 2 {
		t.Fatalf("got %q on %d connections", b, s.conns.Load())
	}
}

// TestRetryUnprocessed sends again, on a new connection, a request the
// server refused (REFUSED_STREAM) or dropped with GOAWAY.
func TestRetryUnprocessed(t *testing.T) {
	for _, how := range []string{"refused", "goaway"} {
		t.Run(how, func(t *testing.T) {
			s := newRawServer(t, func(n int, fr *http2.Framer, nc net.Conn) {
				fr.WriteSettings()
				for {
					id, err := readHeaders(fr)
					if err != nil {
						return
					}
					if n == 1 && how == "refused" {
						fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
						fr.WriteGoAway(id, http2.ErrCodeNo, nil) // and no more here
						continue
					}
					if n == 1 {
						fr.WriteGoAway(0, http2.ErrCodeNo, nil)
						continue
					}
					writeAnswer(fr, id, "second")
				}
			})
			tr := newTransport(s.addr())
			defer tr.CloseIdleConnections()
			resp, err := post(t, context.Background(), tr, "http://"+s.addr()+"/", []byte(`{"x":1}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "second" || s.conns.Load() != 2 {
				t.Fatalf("got %q on %d connections", b, s.conns.Load())
			}
		})
	}
}

// TestBadStatus resets the stream of an answer without a valid :status,
// and keeps the connection.
func TestBadStatus(t *testing.T) {
	s := newRawServer(t, func(n int, fr *http2.Framer, nc net.Conn) {
		fr.WriteSettings()
		for i := 0; ; i++ {
			id, err := readHeaders(fr)
			if err != nil {
				return
			}
			if i > 0 {
				writeAnswer(fr, id, "ok")
				continue
			}
			var hb bytes.Buffer
			hpack.NewEncoder(&hb).WriteField(hpack.HeaderField{Name: ":status", Value: "20x"})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true})
		}
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	_, err := post(t, context.Background(), tr, "http://"+s.addr()+"/", nil)
	if err == nil || !strings.Contains(err.Error(), ":status") {
		t.Fatalf("got %v", err)
	}
	resp, err := post(t, context.Background(), tr, "http://"+s.addr()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.conns.Load() != 1 {
		t.Fatalf("%d connections", s.conns.Load())
	}
}

// fuzzConn runs one request against a server that sends SETTINGS and then
// data, and reads whatever answer comes. It must return, and never panic.
func fuzzConn(t *testing.T, data []byte) {
	cli, srv := net.Pipe()
	go func() {
		defer srv.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(srv, preface); err != nil {
			return
		}
		go io.Copy(io.Discard, srv)
		fr := http2.NewFramer(srv, nil)
		fr.WriteSettings()
		srv.Write(data)
	}()
	tr := New(Options{Addr: "fuzz", Dial: func(context.Context, string, string) (net.Conn, error) { return cli, nil }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://fuzz/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	resp, err := tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cli.Close()
}

// frames builds a fuzz seed from frames written by fn.
func frames(fn func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer)) []byte {
	var b, hb bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.AllowIllegalWrites = true
	fn(fr, hpack.NewEncoder(&hb), &hb)
	return b.Bytes()
}

func FuzzFrames(f *testing.F) {
	answer := func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		fr.WriteData(1, false, []byte(`{"a":`))
		fr.WriteWindowUpdate(0, 1000)
		fr.WritePing(false, [8]byte{1})
		fr.WriteData(1, true, []byte(`1}`))
	}
	f.Add(frames(answer))
	f.Add(frames(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "100"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes()[:1], EndHeaders: false})
		fr.WriteContinuation(1, true, hb.Bytes()[1:])
		fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
	}))
	f.Add(frames(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("calm"))
		fr.WriteData(3, true, []byte("x"))
	}))
	f.Add([]byte("\x00\x00\x00\x04\x01\x00\x00\x00\x00garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzConn(t, data)
	})
}

// TestResponseHeaderBlocks decodes answers whose header blocks use the
// dynamic table across requests and span CONTINUATION frames, fails the
// one request whose header list breaks HTTP/2's rules (keeping the
// connection), and ends the connection whose block does not decode.
func TestResponseHeaderBlocks(t *testing.T) {
	// hpack.Encoder (a dynamic table) for every answer on a connection,
	// as a provider keeps one: the second answer refers to entries the
	// first added.
	type answer struct {
		fields []hpack.HeaderField
		raw    []byte // instead of fields: a block as is
		split  bool   // in three frames: HEADERS and two CONTINUATIONs
	}
	status := hpack.HeaderField{Name: ":status", Value: "200"}
	ctype := hpack.HeaderField{Name: "content-type", Value: "application/json"}
	rid := func(s string) hpack.HeaderField { return hpack.HeaderField{Name: "x-request-id", Value: s} }
	script := []answer{
		{fields: []hpack.HeaderField{status, ctype, rid("one")}},
		{fields: []hpack.HeaderField{status, ctype, rid("two")}, split: true},
		{fields: []hpack.HeaderField{status, {Name: "X-Upper", Value: "v"}}},
		{fields: []hpack.HeaderField{status, {Name: ":path", Value: "/"}}},
		{fields: []hpack.HeaderField{ctype, status}},
		{fields: []hpack.HeaderField{status, {Name: "x-nul", Value: "a\x00b"}}},
		{fields: []hpack.HeaderField{status, ctype, rid("three")}},
		{raw: []byte{0x80}}, // index 0: does not decode
	}
	var next atomic.Int32
	s := newRawServer(t, func(n int, fr *http2.Framer, nc net.Conn) {
		fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for {
			id, err := readHeaders(fr)
			if err != nil {
				return
			}
			i := int(next.Add(1)) - 1
			if i >= len(script) {
				writeAnswer(fr, id, "ok")
				continue
			}
			a := script[i]
			hb.Reset()
			for _, f := range a.fields {
				enc.WriteField(f)
			}
			block := hb.Bytes()
			if a.raw != nil {
				block = a.raw
			}
			if a.split && len(block) >= 3 {
				k := len(block) / 3
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:k]})
				fr.WriteContinuation(id, false, block[k:2*k])
				fr.WriteContinuation(id, true, block[2*k:])
			} else {
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
			}
			fr.WriteData(id, true, []byte("body"))
		}
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	do := func() (*http.Response, error) {
		resp, err := post(t, context.Background(), tr, "http://"+s.addr()+"/", nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	for _, want := range []string{"one", "two"} {
		resp, err := do()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("X-Request-Id") != want || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("want request id %q, got header %v", want, resp.Header)
		}
	}
	for _, what := range []string{"an upper-case name", "a request's pseudo-header", "a pseudo-header after a regular field", "a NUL in a value"} {
		if _, err := do(); err == nil || !strings.Contains(err.Error(), "malformed response") {
			t.Fatalf("%s: got %v", what, err)
		}
	}
	if resp, err := do(); err != nil || resp.Header.Get("X-Request-Id") != "three" {
		t.Fatalf("after the malformed answers: %v, %v", err, resp)
	}
	if s.conns.Load() != 1 {
		t.Fatalf("malformed answers ended the connection: %d connections", s.conns.Load())
	}
	_, err := do()
	var ce *ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("a block that does not decode: got %v", err)
	}
	if _, err := do(); err != nil || s.conns.Load() != 2 {
		t.Fatalf("after the connection ended: %v on %d connections", err, s.conns.Load())
	}
}
