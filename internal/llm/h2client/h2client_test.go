package h2client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// h2cServer serves h over h2c with x/net's HTTP/2 server. Each
// generation is a configured server of its own, so that one can be shut
// down (GOAWAY) while the next takes new connections.
type h2cServer struct {
	t          *testing.T
	ln         net.Listener
	h          http.Handler
	maxStreams uint32
	mu         sync.Mutex
	gen        generation
	conns      atomic.Int32
}

type generation struct {
	hs  *http.Server
	h2s *http2.Server
}

func newH2CServer(t *testing.T, maxStreams uint32, h http.HandlerFunc) *h2cServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2cServer{t: t, ln: ln, h: h, maxStreams: maxStreams}
	s.next()
	go s.serve()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		g := s.gen
		s.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		g.hs.Shutdown(ctx)
	})
	return s
}

// next starts a new generation for the connections accepted from now
// on, and returns the previous one's server.
func (s *h2cServer) next() *http.Server {
	g := generation{hs: &http.Server{}, h2s: &http2.Server{MaxConcurrentStreams: s.maxStreams}}
	if err := http2.ConfigureServer(g.hs, g.h2s); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	old := s.gen
	s.gen = g
	s.mu.Unlock()
	return old.hs
}

func (s *h2cServer) serve() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		g := s.gen
		s.mu.Unlock()
		go g.h2s.ServeConn(nc, &http2.ServeConnOpts{BaseConfig: g.hs, Handler: s.h})
	}
}

func (s *h2cServer) addr() string { return s.ln.Addr().String() }

func (s *h2cServer) url(path string) string { return "http://" + s.addr() + path }

func newTransport(addr string) *Transport {
	return New(Options{Addr: addr})
}

func post(t *testing.T, ctx context.Context, tr http.RoundTripper, url string, body []byte) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return tr.RoundTrip(req)
}

func TestJSON(t *testing.T) {
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(b)) {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "abc")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)+2))
		w.Write([]byte("[" + string(b) + "]"))
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	resp, err := post(t, ctx, tr, s.url("/v1/chat/completions"), []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(b) != `[{"a":1}]` || resp.Header.Get("X-Request-Id") != "abc" || resp.ContentLength != 9 ||
		resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 || resp.Request == nil || !wrote.Load() {
		t.Fatalf("status %d body %q header %v length %d proto %s wrote %v", resp.StatusCode, b, resp.Header, resp.ContentLength, resp.Proto, wrote.Load())
	}
}

// TestStream reads a streamed answer as it comes: the server sends its
// second event only once the client has read the first.
func TestStream(t *testing.T) {
	next := make(chan struct{})
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-next
		io.WriteString(w, "data: two\n\n")
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	resp, err := post(t, context.Background(), tr, s.url("/"), []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: one\n\n" || resp.ContentLength != -1 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("first read %q, %v; length %d", buf[:n], err, resp.ContentLength)
	}
	close(next)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: two\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

// TestConcurrentStreams runs many requests at once on one connection.
func TestConcurrentStreams(t *testing.T) {
	const n = 200
	var inside sync.WaitGroup
	inside.Add(n)
	s := newH2CServer(t, 250, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			return
		}
		b, _ := io.ReadAll(r.Body)
		inside.Done()
		inside.Wait() // every request is in flight at once
		w.Write(b)
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	warm, err := post(t, context.Background(), tr, s.url("/warm"), nil) // learns the limit of 250
	if err != nil {
		t.Fatal(err)
	}
	warm.Body.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf(`{"i":%d}`, i)
			resp, err := post(t, context.Background(), tr, s.url("/"), []byte(want))
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != want {
				errs <- fmt.Errorf("got %q, %v, want %q", b, err, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c := s.conns.Load(); c != 1 {
		t.Fatalf("%d connections, want 1", c)
	}
}

// TestFlowControl sends a request body and gets a response body both
// larger than the windows, so that both sides wait for WINDOW_UPDATEs.
func TestFlowControl(t *testing.T) {
	const size = 3 << 20
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || len(b) != size {
			w.WriteHeader(400)
			return
		}
		for range 4 { // 12 MiB: past the stream's window of 4 MiB
			w.Write(b)
		}
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	resp, err := post(t, context.Background(), tr, s.url("/"), body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, bytes.Repeat(body, 4)) {
		t.Fatalf("status %d, %d bytes, %v", resp.StatusCode, len(got), err)
	}
}

// TestStreamLimit opens a second connection when the server's
// MAX_CONCURRENT_STREAMS is reached.
func TestStreamLimit(t *testing.T) {
	release := make(chan struct{})
	var inside sync.WaitGroup
	inside.Add(3)
	s := newH2CServer(t, 2, func(w http.ResponseWriter, r *http.Request) {
		inside.Done()
		<-release
		io.WriteString(w, "ok")
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := post(t, context.Background(), tr, s.url("/"), nil)
			if err != nil {
				failed.Add(1)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "ok" {
				failed.Add(1)
			}
		}()
	}
	inside.Wait() // all three in the handler at once: two connections
	close(release)
	wg.Wait()
	if failed.Load() != 0 || s.conns.Load() != 2 {
		t.Fatalf("%d failed, %d connections, want 0 and 2", failed.Load(), s.conns.Load())
	}
}

// TestGoAway shuts the server's connection down gracefully while a
// request is in flight: that request completes, and the next goes to a
// new connection.
func TestGoAway(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, r.URL.Path)
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	done := make(chan string, 1)
	go func() {
		resp, err := post(t, context.Background(), tr, s.url("/slow"), nil)
		if err != nil {
			done <- err.Error()
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- fmt.Sprint(string(b), err)
	}()
	<-started
	old := s.next()
	shut := make(chan error, 1)
	go func() { shut <- old.Shutdown(context.Background()) }()
	// The client takes the connection out of the pool on GOAWAY.
	waitPoolEmpty(t, tr, "the connection stayed in the pool after GOAWAY")
	resp, err := post(t, context.Background(), tr, s.url("/fast"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "/fast" || s.conns.Load() != 2 {
		t.Fatalf("got %q on %d connections", b, s.conns.Load())
	}
	close(release)
	if got := <-done; got != "/slow<nil>" {
		t.Fatalf("in-flight request: %s", got)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestServerReset fails the body's read when the server resets the
// stream mid-answer.
func TestServerReset(t *testing.T) {
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // RST_STREAM
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	resp, err := post(t, context.Background(), tr, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil || !strings.Contains(err.Error(), "reset the stream") || !strings.Contains(err.Error(), s.addr()) {
		t.Fatalf("read %q, %v; want the reset", b, err)
	}
	// The connection still serves.
	resp, err = post(t, context.Background(), tr, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// cancelServer answers with one event, then reports on seen when the
// client has reset the stream.
func cancelServer(t *testing.T) (*h2cServer, chan struct{}) {
	seen := make(chan struct{}, 1)
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		seen <- struct{}{}
	})
	return s, seen
}

// TestCancel cancels the request's context mid-answer: the read fails
// with the context's cause and the server sees the stream reset.
func TestCancel(t *testing.T) {
	s, seen := cancelServer(t)
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancelCause(context.Background())
	resp, err := post(t, ctx, tr, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("the client left")
	cancel(cause)
	if _, err := resp.Body.Read(buf); err != cause {
		t.Fatalf("read after cancel: %v, want %v", err, cause)
	}
	<-seen
}

// TestBodyCloseEarly closes the body before its end: the server sees the
// stream reset and the stream is freed.
func TestBodyCloseEarly(t *testing.T) {
	s, seen := cancelServer(t)
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	resp, err := post(t, context.Background(), tr, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-seen
	c := tr.conns[0]
	c.mu.Lock()
	active, streams := c.active, len(c.streams)
	c.mu.Unlock()
	if active != 0 || streams != 0 {
		t.Fatalf("%d streams active, %d in the map after Close", active, streams)
	}
}

// TestTLS speaks h2 over TLS, and fails clearly when the server does not
// select h2.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	tr := New(Options{Addr: srv.Listener.Addr().String(), TLS: cfg})
	defer tr.CloseIdleConnections()
	resp, err := post(t, context.Background(), tr, srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0" {
		t.Fatalf("server saw %q", b)
	}

	h1 := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer h1.Close()
	cfg.RootCAs = h1.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	tr = New(Options{Addr: h1.Listener.Addr().String(), TLS: cfg})
	_, err = post(t, context.Background(), tr, h1.URL+"/", nil)
	if err == nil || !strings.Contains(err.Error(), "does not speak HTTP/2 over TLS") {
		t.Fatalf("HTTP/1.1-only server: %v", err)
	}
}

// TestDialError keeps a dial's error as a *net.OpError with Op "dial".
func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr := newTransport(addr)
	_, err = post(t, context.Background(), tr, "http://"+addr+"/", nil)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("got %v, want a dial *net.OpError", err)
	}
}

// TestDialCoalesced starts many requests on a cold transport: they wait
// for one dial instead of each dialing.
func TestDialCoalesced(t *testing.T) {
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := post(t, context.Background(), tr, s.url("/"), nil); err == nil {
				resp.Body.Close()
			} else {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if c := s.conns.Load(); c != 1 {
		t.Fatalf("%d connections, want 1", c)
	}
}

// TestCancelWhileBlocked cancels a request whose body waits for a
// window the server never opens: RoundTrip returns the context's cause.
func TestCancelWhileBlocked(t *testing.T) {
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never reads the body
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	var blocked atomic.Bool
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("gave up")
	done := make(chan error, 1)
	go func() {
		_, err := post(t, ctx, tr, s.url("/"), make([]byte, 64<<20))
		done <- err
	}()
	// Wait until the body is stuck on a window.
	for i := 0; !blocked.Load(); i++ {
		if i > 10000 {
			t.Fatal("the body never waited for a window")
		}
		time.Sleep(time.Millisecond)
		tr.mu.Lock()
		for _, c := range tr.conns {
			c.mu.Lock()
			for _, st := range c.streams {
				if st.sendWindow <= 0 || c.sendWindow <= 0 {
					blocked.Store(true)
				}
			}
			c.mu.Unlock()
		}
		tr.mu.Unlock()
	}
	cancel(cause)
	if err := <-done; err != cause {
		t.Fatalf("got %v, want %v", err, cause)
	}
}

// TestLargeHeaders sends a header block past the server's frame size (in
// CONTINUATION frames), and fails a response whose header list is past
// the client's bound, naming it. (x/net's decoder gives up on the
// connection of a header list far past the bound; the next request goes
// on a new one.)
func TestLargeHeaders(t *testing.T) {
	big := strings.Repeat("v", 40<<10)
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Big") != big {
			w.WriteHeader(400)
			return
		}
		if r.URL.Path == "/huge" {
			for i := range 30 {
				w.Header().Set(fmt.Sprintf("X-Huge-%d", i), big)
			}
		}
		io.WriteString(w, "ok")
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, s.url(path), nil)
		req.Header.Set("X-Big", big)
		return tr.RoundTrip(req)
	}
	resp, err := get("/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("status %d body %q", resp.StatusCode, b)
	}
	if _, err := get("/huge"); err == nil || !strings.Contains(err.Error(), "header list is larger") {
		t.Fatalf("a 1.2 MiB header list: %v", err)
	}
	if resp, err := get("/"); err != nil {
		t.Fatalf("after the large header list: %v on %d connections", err, s.conns.Load())
	} else {
		resp.Body.Close()
	}
}

// TestIdleConnections closes a connection without streams, by
// CloseIdleConnections or after IdleConnTimeout, and not one that carries
// a stream; the next request dials again.
func TestIdleConnections(t *testing.T) {
	release := make(chan struct{})
	s := newH2CServer(t, 1, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	do := func(path string) {
		resp, err := post(t, context.Background(), tr, s.url(path), nil)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do("/") // one idle connection
	held := make(chan struct{})
	go func() { do("/hold"); close(held) }()
	// The stream limit of 1 puts /hold on a connection of its own, or on
	// the idle one: either way one connection carries it.
	for i := 0; ; i++ {
		tr.mu.Lock()
		busy := 0
		for _, c := range tr.conns {
			c.mu.Lock()
			busy += c.active
			c.mu.Unlock()
		}
		tr.mu.Unlock()
		if busy == 1 {
			break
		}
		if i > 10000 {
			t.Fatal("/hold never started")
		}
		time.Sleep(time.Millisecond)
	}
	tr.CloseIdleConnections()
	tr.mu.Lock()
	left := len(tr.conns)
	tr.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d connections after CloseIdleConnections, want the busy one", left)
	}
	close(release)
	<-held

	// A short idle timeout closes the connection once its stream is done.
	tr2 := New(Options{Addr: s.addr(), IdleConnTimeout: 20 * time.Millisecond})
	defer tr2.CloseIdleConnections()
	resp, err := post(t, context.Background(), tr2, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitPoolEmpty(t, tr2, "the idle connection was never closed")
	before := s.conns.Load()
	resp, err = post(t, context.Background(), tr2, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.conns.Load() != before+1 {
		t.Fatalf("%d connections, want a new one after the idle close", s.conns.Load()-before)
	}
}

// waitPoolEmpty waits until tr holds no connection, and fails with why if
// that takes 10,000 polls.
func waitPoolEmpty(t *testing.T, tr *Transport, why string) {
	t.Helper()
	for i := 0; ; i++ {
		tr.mu.Lock()
		n := len(tr.conns)
		tr.mu.Unlock()
		if n == 0 {
			return
		}
		if i > 10000 {
			t.Fatal(why)
		}
		time.Sleep(time.Millisecond)
	}
}
