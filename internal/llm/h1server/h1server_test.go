package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serve starts s on a loopback listener and returns its address; the
// server is closed when the test ends.
func serve(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := s.Listen(ln, nil)
		for {
			if _, err := l.Accept(); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		s.Close()
	})
	return ln.Addr().String()
}

// client is an HTTP/1.1 client that counts the connections it opens.
func client(dials *atomic.Int32) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4,
	}}
}

// testLog collects a server's log lines.
type testLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *testLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestRequestsAndAnswers drives the server with Go's HTTP/1.1 client:
// bodies in both framings, answers of known and unknown length, keep-alive
// over one connection.
func TestRequestsAndAnswers(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %s host=%s body=%q cl=%d te=%v", r.Method, r.URL.Path, r.Proto, r.Host, body, r.ContentLength, r.TransferEncoding))
		mu.Unlock()
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "11")
			io.WriteString(w, `{"ok":true}`)
		case "/unknown-length":
			io.WriteString(w, "<html>hello</html>")
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Trailer", "X-Total")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Total", "3")
		case "/big":
			w.Write([]byte(strings.Repeat("x", 100<<10)))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/echo":
			w.Write(body)
		}
	})}
	addr := serve(t, s)
	var dials atomic.Int32
	c := client(&dials)
	base := "http://" + addr

	get := func(path string) *http.Response {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}
	read := func(resp *http.Response) string {
		t.Helper()
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		return string(b)
	}

	resp := get("/json")
	if b := read(resp); resp.StatusCode != 200 || b != `{"ok":true}` || resp.ContentLength != 11 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("/json: %d %q length %d type %q", resp.StatusCode, b, resp.ContentLength, resp.Header.Get("Content-Type"))
	}
	if _, err := http.ParseTime(resp.Header.Get("Date")); err != nil {
		t.Errorf("Date %q: %v", resp.Header.Get("Date"), err)
	}

	resp = get("/unknown-length")
	if b := read(resp); b != "<html>hello</html>" || resp.ContentLength != 18 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("an answer written whole gets its length and a sniffed type: %q length %d type %q", b, resp.ContentLength, resp.Header.Get("Content-Type"))
	}

	resp = get("/stream")
	if b := read(resp); b != "data: 0\n\ndata: 1\n\ndata: 2\n\n" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("/stream: %q, transfer encoding %v", b, resp.TransferEncoding)
	}
	if got := resp.Trailer.Get("X-Total"); got != "3" {
		t.Errorf("trailer X-Total %q, want 3", got)
	}

	resp = get("/big")
	if b := read(resp); len(b) != 100<<10 || strings.Trim(b, "x") != "" {
		t.Errorf("/big: %d bytes", len(b))
	}

	resp = get("/empty")
	if b := read(resp); resp.StatusCode != 204 || b != "" || resp.Header.Get("Content-Length") != "" {
		t.Errorf("/empty: %d %q, Content-Length %q", resp.StatusCode, b, resp.Header.Get("Content-Length"))
	}

	resp, err := c.Post(base+"/echo", "text/plain", strings.NewReader("with a length"))
	if err != nil {
		t.Fatal(err)
	}
	if b := read(resp); b != "with a length" {
		t.Errorf("echo: %q", b)
	}
	// A reader of unknown length is sent chunked.
	resp, err = c.Post(base+"/echo", "text/plain", io.MultiReader(strings.NewReader("chunked "), strings.NewReader("body")))
	if err != nil {
		t.Fatal(err)
	}
	if b := read(resp); b != "chunked body" {
		t.Errorf("chunked echo: %q", b)
	}

	req, _ := http.NewRequest(http.MethodHead, base+"/json", nil)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if b := read(resp); b != "" || resp.ContentLength != 11 {
		t.Errorf("HEAD: %q length %d", b, resp.ContentLength)
	}

	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for requests in sequence, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{
		`POST /echo HTTP/1.1 host=` + addr + ` body="with a length" cl=13 te=[]`,
		`POST /echo HTTP/1.1 host=` + addr + ` body="chunked body" cl=-1 te=[chunked]`,
	} {
		found := false
		for _, s := range seen {
			found = found || s == want
		}
		if !found {
			t.Errorf("the handler never saw %s; it saw:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// TestConnectionClose: a client's "Connection: close" and HTTP/1.0 end the
// connection after the answer, which says so.
func TestConnectionClose(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	addr := serve(t, s)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, req)
		all, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		if !strings.Contains(string(all), "\r\nConnection: close\r\n") || !strings.HasSuffix(string(all), "\r\n\r\nok") {
			t.Errorf("%q answered\n%s", req, all)
		}
	}
}

// TestClientLeaving: a client that closes its connection while its request
// is served has the request's context cancelled, with the reason; a
// client that stays does not.
func TestClientLeaving(t *testing.T) {
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		if r.URL.Path == "/stay" {
			select {
			case <-r.Context().Done():
				ended <- context.Cause(r.Context())
			case <-time.After(300 * time.Millisecond):
				ended <- nil
			}
			io.WriteString(w, "stayed")
			return
		}
		select {
		case <-r.Context().Done():
			ended <- context.Cause(r.Context())
		case <-time.After(10 * time.Second):
			ended <- errors.New("the context was not cancelled within 10 s of the client leaving")
		}
	})}
	addr := serve(t, s)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /stay HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	if err := <-ended; err != nil {
		t.Errorf("a request whose client stays was cancelled: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("answer: %v", err)
	}

	for _, how := range []string{"close", "reset"} {
		io.WriteString(conn, "GET /leave HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
		if how == "reset" {
			conn.(*net.TCPConn).SetLinger(0)
		}
		conn.Close()
		if err := <-ended; !errors.Is(err, errClientGone) {
			t.Errorf("%s: the request's context ended with %v, want %v", how, err, errClientGone)
		}
		if conn, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
}

// TestTimeouts: a connection that sends nothing, or stops in the middle
// of a header, is closed after ReadHeaderTimeout; an idle one after
// IdleTimeout.
func TestTimeouts(t *testing.T) {
	s := &Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		ReadHeaderTimeout: 100 * time.Millisecond,
		IdleTimeout:       200 * time.Millisecond,
	}
	addr := serve(t, s)
	for _, sent := range []string{"", "GET / HTTP/1.1\r\nHost:", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, sent)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		all, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Errorf("after %q: %v (the server did not close the connection)", sent, err)
			continue
		}
		if sent != "" && strings.HasSuffix(sent, "\r\n\r\n") != strings.HasPrefix(string(all), "HTTP/1.1 200") {
			t.Errorf("after %q the server sent %q", sent, all)
		}
		t.Logf("%q: closed after %v", sent, time.Since(start))
	}
}

// TestShutdown: idle connections close at once; a request in flight is
// answered, with "Connection: close", and Shutdown returns once it is.
func TestShutdown(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	})}
	addr := serve(t, s)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	} else {
		io.ReadAll(resp.Body)
	}

	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	if n, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the idle connection read %q, %v; want it closed", n, err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, _ := io.ReadAll(busy)
	if !strings.Contains(string(all), "Connection: close") || !strings.HasSuffix(string(all), "done") {
		t.Errorf("the request in flight was answered\n%s", all)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	c1, c2 := net.Pipe()
	defer c2.Close()
	if err := s.ServeConn(c1); !errors.Is(err, ErrServerClosed) {
		t.Errorf("ServeConn after Shutdown: %v", err)
	}
}

// TestCloseCancels: Close ends the connections at once and cancels their
// requests, and the watcher ends once the last of them has.
func TestCloseCancels(t *testing.T) {
	started := make(chan struct{})
	cause := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	})}
	addr := serve(t, s)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	s.Close()
	select {
	case err := <-cause:
		if err == nil || !strings.Contains(err.Error(), "server closed") {
			t.Errorf("cause %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not cancel the request")
	}
	// The connection Close left running was the last: the watcher of
	// clients leaving ends with it.
	s.mu.Lock()
	w := s.watch
	s.mu.Unlock()
	if w == nil {
		t.Fatal("no watcher ran")
	}
	select {
	case <-w.ended():
	case <-time.After(10 * time.Second):
		t.Error("the watcher still runs after Close and its last connection")
	}
}

// TestHandlerPanic: a panicking handler ends its connection, is logged,
// and the server goes on serving others.
func TestHandlerPanic(t *testing.T) {
	var log testLog
	s := &Server{Log: log.logger(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			io.WriteString(w, "partial")
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, "fine")
	})}
	addr := serve(t, s)
	for _, path := range []string{"/panic", "/abort"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		all, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || len(all) != 0 {
			t.Errorf("%s: the client read %q, %v; want the connection closed with nothing sent", path, all, err)
		}
	}
	resp, err := client(nil).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fine" {
		t.Errorf("after the panics: %q", b)
	}
	if l := log.String(); strings.Count(l, "a handler panicked") != 1 || !strings.Contains(l, "boom") {
		t.Errorf("log:\n%s", l)
	}
}

// TestUpgradeAnsweredOverHTTP1: an "Upgrade: h2c" request whose handler
// does not take the connection over is answered as HTTP/1.1, which RFC
// 9113 lets a server do.
func TestUpgradeAnsweredOverHTTP1(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") })}
	addr := serve(t, s)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "plain" {
		t.Errorf("%d %q", resp.StatusCode, b)
	}
}

// TestHijack: a handler that takes the connection over gets the bytes the
// client sent past its request, and the server neither writes to the
// connection nor closes it afterwards.
func TestHijack(t *testing.T) {
	took := make(chan net.Conn, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		line, err := brw.ReadString('\n')
		if err != nil || line != "after the request\n" {
			t.Errorf("read past the request: %q, %v", line, err)
		}
		brw.WriteString("taken over\n")
		brw.Flush()
		took <- nc
	})}
	addr := serve(t, s)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\nafter the request\n")
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || line != "taken over\n" {
		t.Fatalf("the client read %q, %v", line, err)
	}
	nc := <-took
	// The handler has returned: the connection is still open, and still
	// the handler's.
	io.WriteString(nc, "still mine\n")
	if line, err := br.ReadString('\n'); err != nil || line != "still mine\n" {
		t.Errorf("after the handler returned the client read %q, %v", line, err)
	}
	nc.Close()
	if b, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the handler closed it the client read %q, %v", b, err)
	}
}

// TestWriteTimeout: a client that stops reading cannot hold a handler's
// writes past WriteTimeout, however many small writes it makes (the
// deadline is moved only now and then).
func TestWriteTimeout(t *testing.T) {
	failed := make(chan error, 1)
	s := &Server{WriteTimeout: 200 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 4<<10))
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			w.Write(chunk)
			if err := w.(interface{ FlushError() error }).FlushError(); err != nil {
				failed <- err
				return
			}
		}
		failed <- nil
	})}
	addr := serve(t, s)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-failed:
		if !isTimeout(err) {
			t.Errorf("the handler's write ended with %v, want a timeout", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the handler's writes to a client that does not read did not time out")
	}
}

// TestUpgradeHandler: only requests that carry an Upgrade header go to
// Upgrade; the rest go to Handler directly.
func TestUpgradeHandler(t *testing.T) {
	s := &Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "handler") }),
		Upgrade: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upgrade") }),
	}
	addr := serve(t, s)
	for _, tc := range []struct{ head, want string }{
		{"", "handler"},
		{"Connection: Upgrade\r\nUpgrade: h2c\r\n", "upgrade"},
		{"Connection: Upgrade\r\nUpgrade: websocket\r\n", "upgrade"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n"+tc.head+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if string(b) != tc.want {
			t.Errorf("%q went to %q, want %q", tc.head, b, tc.want)
		}
	}
}
