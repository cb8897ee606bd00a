package h1client

import (
	"bufio"
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
)

// goServer is net/http's server (the peer every provider SDK is tested
// against), counting the connections it accepts.
type goServer struct {
	*httptest.Server
	conns atomic.Int32
}

func newGoServer(t *testing.T, h http.HandlerFunc) *goServer {
	return newGoServerWatched(t, h, nil)
}

// newGoServerWatched is newGoServer, telling watch of each connection's
// state changes.
func newGoServerWatched(t *testing.T, h http.HandlerFunc, watch func(net.Conn, http.ConnState)) *goServer {
	t.Helper()
	s := &goServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
		if watch != nil {
			watch(c, st)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *goServer) addr() string { return s.Listener.Addr().String() }

func post(t *testing.T, ctx context.Context, tr http.RoundTripper, url string, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return tr.RoundTrip(req)
}

// readAll reads a response's body and closes it.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// Requests go out as the server expects them (method, path, headers,
// body) and answers of every framing come back whole: Content-Length,
// chunked (a handler that flushes), and none. Sequential requests share
// one connection.
func TestRequestsAndAnswers(t *testing.T) {
	s := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" ||
			r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(b)) || r.Host != "provider.test" {
			http.Error(w, fmt.Sprintf("bad request: %s %s %v %q host %q", r.Method, r.URL, r.Header, b, r.Host), 400)
			return
		}
		switch r.URL.Query().Get("framing") {
		case "chunked":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d %s\n\n", i, b)
				w.(http.Flusher).Flush()
			}
		case "empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Write(b)
		}
	})
	tr := New(Options{Addr: s.addr()})
	for _, framing := range []string{"length", "chunked", "empty", "length", "chunked"} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/chat/completions?framing="+framing, strings.NewReader(`{"model":"m"}`))
		req.Host = "provider.test"
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set("Content-Type", "application/json")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", framing, err)
		}
		got := readAll(t, resp)
		want := map[string]string{"length": `{"model":"m"}`, "empty": "",
			"chunked": "data: 0 {\"model\":\"m\"}\n\ndata: 1 {\"model\":\"m\"}\n\ndata: 2 {\"model\":\"m\"}\n\n"}[framing]
		if resp.StatusCode/100 != 2 || got != want {
			t.Errorf("%s: status %d body %q, want %q", framing, resp.StatusCode, got, want)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("five requests one after another took %d connections, want 1", n)
	}
}

// Concurrent requests each get a connection of their own, never more
// than MaxConns at once; a request waiting for one gives up when its
// context ends.
func TestMaxConns(t *testing.T) {
	var inside, most atomic.Int32
	release := make(chan struct{})
	s := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inside.Add(-1)
		io.WriteString(w, "ok")
	})
	tr := New(Options{Addr: s.addr(), MaxConns: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := post(t, context.Background(), tr, s.URL+"/", "{}")
			if err != nil {
				errs <- err
				return
			}
			if b := readAll(t, resp); b != "ok" {
				errs <- fmt.Errorf("body %q", b)
			}
		}()
	}
	waitFor(t, "two requests at the server", func() bool { return inside.Load() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := post(t, ctx, tr, s.URL+"/", "{}"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request waiting for a connection past its deadline: %v, want the deadline", err)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m, c := most.Load(), s.conns.Load(); m != 2 || c != 2 {
		t.Errorf("at most %d requests at once over %d connections, want 2 and 2", m, c)
	}
	// The freed slots serve new requests.
	resp, err := post(t, context.Background(), tr, s.URL+"/", "{}")
	if err != nil || readAll(t, resp) != "ok" {
		t.Fatalf("after the wait: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A context that ends while the answer is awaited, or in the middle of
// its body, ends the request at once with the context's cause, and the
// connection is not used again.
func TestCancel(t *testing.T) {
	s := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // else the server does not watch for the client's close
		if r.URL.Path == "/body" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	})
	tr := New(Options{Addr: s.addr()})
	cause := errors.New("the client left")

	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	if _, err := post(t, ctx, tr, s.URL+"/head", "{}"); !errors.Is(err, cause) {
		t.Errorf("ended while waiting for the head: %v, want the cause", err)
	}

	ctx, cancel = context.WithCancelCause(context.Background())
	resp, err := post(t, ctx, tr, s.URL+"/body", "{}")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || string(buf[:n]) != "data: 1\n\n" {
		t.Fatalf("first event: %q %v", buf[:n], err)
	}
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	if _, err := resp.Body.Read(buf); !errors.Is(err, cause) {
		t.Errorf("ended in the middle of the body: %v, want the cause", err)
	}
	resp.Body.Close()
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (neither cancelled request's may be reused)", n)
	}
}

// A body closed before its end closes its connection; one read to its
// end gives it back, and a server that said Connection: close is not
// asked again on the same connection.
func TestConnectionReuse(t *testing.T) {
	s := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, strings.Repeat("x", 10000))
	})
	tr := New(Options{Addr: s.addr()})
	for i, c := range []struct {
		path  string
		whole bool
		conns int32 // after this request
	}{
		{"/", true, 1},
		{"/", false, 1},     // closed early: its connection goes
		{"/", true, 2},      // so this one dials
		{"/close", true, 2}, // the server closes it
		{"/", true, 3},      // so this one dials
		{"/", true, 3},      // and is reused
	} {
		resp, err := post(t, context.Background(), tr, s.URL+c.path, "{}")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if c.whole {
			if b := readAll(t, resp); len(b) != 10000 {
				t.Fatalf("request %d: %d bytes", i, len(b))
			}
		} else {
			resp.Body.Read(make([]byte, 10))
			resp.Body.Close()
			if _, err := resp.Body.Read(make([]byte, 10)); err == nil || err == io.EOF {
				t.Errorf("a read after Close: %v, want an error", err)
			}
		}
		if n := s.conns.Load(); n != c.conns {
			t.Errorf("after request %d (%s, whole %v): %d connections, want %d", i, c.path, c.whole, n, c.conns)
		}
	}
}

// A connection the server closed while it was idle is noticed before it
// is used: the next request goes on a new one and succeeds. Connections
// idle for IdleConnTimeout are closed by the client.
func TestIdleConnections(t *testing.T) {
	var states sync.Map // conn → last state
	s := newGoServerWatched(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") },
		func(c net.Conn, st http.ConnState) { states.Store(c, st) })
	tr := New(Options{Addr: s.addr(), IdleConnTimeout: 100 * time.Millisecond})
	get := func() {
		t.Helper()
		resp, err := post(t, context.Background(), tr, s.URL+"/", "{}")
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); b != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	get()
	s.CloseClientConnections() // the server ends the idle connection
	// Once its end has reached the client (an end read stays there):
	waitFor(t, "the server's close to reach the idle connection", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.idle) == 1 && !tr.idle[0].wb.Quiet()
	})
	get()
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	closed := func() bool {
		all := true
		states.Range(func(_, v any) bool {
			all = all && (v == http.StateClosed || v == http.StateHijacked)
			return true
		})
		return all
	}
	waitFor(t, "the idle connection to be closed by the client", closed)
	get()
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections after the idle one was closed, want 3", n)
	}
	tr.CloseIdleConnections()
	waitFor(t, "CloseIdleConnections", closed)
}

// rawServer answers each request on a connection with the next of
// answers, written as they are, and closes the connection after the
// last, or when an answer is followed by "CLOSE".
func rawServer(t *testing.T, answers ...string) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for _, a := range answers {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					a, closing := strings.CutSuffix(a, "CLOSE")
					c.Write([]byte(a))
					if closing {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), conns
}

// Answers that are not the usual: informational ones first, a body that
// ends with the connection (HTTP/1.0), trailers, and the malformed,
// which fail the request with an error that says what happened and
// never leave a connection in a state to be reused.
func TestUnusualAnswers(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		status       int
		body         string
		err          string
	}{
		{"1xx then final", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", ""},
		{"close-delimited", "HTTP/1.0 200 OK\r\n\r\nuntil the endCLOSE", 200, "until the end", ""},
		{"trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n", 200, "ok", ""},
		{"provider error", "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\n\r\nslowCLOSE", 429, "slow", ""},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\nCLOSE", 0, "", "malformed HTTP"},
		{"closed before answering", "CLOSE", 0, "", "closed the connection before answering"},
		{"cut in the head", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCLOSE", 0, "", "closed the connection in the middle of the response: unexpected EOF"},
		{"cut in the body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshortCLOSE", 200, "", "in the middle of the response body"},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nCLOSE", 200, "", "reading the response body"},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\nCLOSE", 0, "", "101 Switching Protocols"},
		{"too many 1xx", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 7) + "CLOSE", 0, "", "more than 5 informational"},
		{"head too large", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 5000) + "\r\n\r\nCLOSE", 0, "", "exceed 4096 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, _ := rawServer(t, c.answer)
			tr := New(Options{Addr: addr, MaxHeaderBytes: 4096})
			resp, err := post(t, context.Background(), tr, "http://"+addr+"/", "{}")
			var body string
			if err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				if resp.StatusCode != c.status {
					t.Errorf("status %d, want %d", resp.StatusCode, c.status)
				}
			}
			if c.err == "" {
				if err != nil || body != c.body {
					t.Errorf("body %q, error %v; want %q", body, err, c.body)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want one containing %q", err, c.err)
			}
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("error %v does not name the provider's address", err)
			}
		})
	}
}

// Bytes after an answer, which no request asked for, make its connection
// unusable: the next request goes on a new one.
func TestBytesBeyondTheAnswer(t *testing.T) {
	addr, conns := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	tr := New(Options{Addr: addr})
	for i := range 2 {
		resp, err := post(t, context.Background(), tr, "http://"+addr+"/", "{}")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if b := readAll(t, resp); b != "ok" {
			t.Fatalf("request %d: body %q", i, b)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// A request that would not be well-formed HTTP/1.1 is refused before
// anything is sent; the trace hears of each request written.
func TestRequestChecks(t *testing.T) {
	addr, conns := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	tr := New(Options{Addr: addr})
	for _, c := range []struct {
		name string
		edit func(*http.Request)
		err  string
	}{
		{"CR LF in a value", func(r *http.Request) { r.Header.Set("X-A", "a\r\nX-Injected: 1") }, "header X-A"},
		{"bad name", func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} }, `header name "Bad Name"`},
		{"bad host", func(r *http.Request) { r.Host = "a b" }, `host "a b"`},
		{"length mismatch", func(r *http.Request) { r.ContentLength = 10 }, "ContentLength 10"},
		{"body longer", func(r *http.Request) { r.ContentLength = 1 }, "longer than its ContentLength 1"},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
		c.edit(req)
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections opened for refused requests", n)
	}
	var wrote atomic.Int32
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Add(1)
		}
	}})
	resp, err := post(t, ctx, tr, "http://"+addr+"/", "{}")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if wrote.Load() != 1 {
		t.Errorf("WroteRequest heard %d times, want 1", wrote.Load())
	}
}

// A provider that cannot be reached fails the request with a dial
// error, as net/http's client does, which the gateway tells apart.
func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr := New(Options{Addr: addr})
	_, err = post(t, context.Background(), tr, "http://"+addr+"/", "{}")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("error %v, want a dial *net.OpError", err)
	}
	// The failed dial gave its slot back.
	if tr.open != 0 {
		t.Errorf("%d connections counted open", tr.open)
	}
}

// Over TLS (ALPN http/1.1), against net/http's TLS server.
func TestTLS(t *testing.T) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.ProtoMajor != 1 {
			http.Error(w, "not HTTP/1.1 over TLS", 400)
			return
		}
		io.Copy(w, r.Body)
	}))
	s.EnableHTTP2 = true // the server offers h2 too; the client asks for http/1.1 only
	s.StartTLS()
	t.Cleanup(s.Close)
	cfg := s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "example.com"
	tr := New(Options{Addr: s.Listener.Addr().String(), TLS: cfg})
	for range 2 {
		resp, err := post(t, context.Background(), tr, s.URL+"/", `{"a":1}`)
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); resp.StatusCode != 200 || b != `{"a":1}` {
			t.Fatalf("status %d body %q", resp.StatusCode, b)
		}
	}
	// A server whose certificate does not verify fails the dial.
	bad := New(Options{Addr: s.Listener.Addr().String(), TLS: &tls.Config{}})
	_, err := post(t, context.Background(), bad, s.URL+"/", "{}")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("unverified server: %v, want a dial error naming the handshake", err)
	}
}

// A large request body goes whole, and a large answer comes whole.
func TestLargeBodies(t *testing.T) {
	s := newGoServer(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) })
	tr := New(Options{Addr: s.addr()})
	big := bytes.Repeat([]byte("0123456789"), 300_000)
	resp, err := post(t, context.Background(), tr, s.URL+"/", string(big))
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, resp); b != string(big) {
		t.Fatalf("echoed %d bytes, want %d", len(b), len(big))
	}
}

// pipeServer dials net.Pipe connections, each served by serve, and counts
// them. A pipe is not a socket, so the idle check cannot see its close:
// what follows is what happens when the server closes just after it.
type pipeServer struct {
	dials atomic.Int32
	serve func(n int32, c net.Conn)
}

func (p *pipeServer) dial(context.Context, string, string) (net.Conn, error) {
	c, s := net.Pipe()
	n := p.dials.Add(1)
	go p.serve(n, s)
	return c, nil
}

// A request whose write fails on a reused connection, which the server
// had closed, goes once more on a new one; a request the server read and
// left unanswered is not sent again.
func TestSentOnceMoreOnlyIfNotWritten(t *testing.T) {
	for _, c := range []struct {
		name      string
		answer2   bool // the first connection's server reads the second request, then closes
		wantDials int32
		wantErr   string
	}{
		{"closed before the second request", false, 2, ""},
		{"closed after reading it", true, 1, "closed the connection before answering"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var requests atomic.Int32
			ps := &pipeServer{}
			ps.serve = func(n int32, s net.Conn) {
				defer s.Close()
				br := bufio.NewReader(s)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					requests.Add(1)
					if n == 1 && i == 1 {
						return // read, never answered
					}
					io.WriteString(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					if n == 1 && !c.answer2 {
						return // closes after its first answer
					}
				}
			}
			tr := New(Options{Addr: "provider.test:80", Dial: ps.dial})
			for i := range 2 {
				resp, err := post(t, context.Background(), tr, "http://provider.test/", "{}")
				if i == 1 && c.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), c.wantErr) {
						t.Fatalf("second request: %v, want an error containing %q", err, c.wantErr)
					}
					break
				}
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if b := readAll(t, resp); b != "ok" {
					t.Fatalf("request %d: body %q", i, b)
				}
			}
			if n := ps.dials.Load(); n != c.wantDials {
				t.Errorf("%d connections dialed, want %d", n, c.wantDials)
			}
			if n := requests.Load(); n != 2 {
				t.Errorf("the server read %d requests, want 2 (none twice)", n)
			}
		})
	}
}
