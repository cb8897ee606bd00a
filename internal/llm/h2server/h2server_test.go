package h2server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serve starts s on a loopback listener, with net/http behind it for
// the connections that are not HTTP/2 with prior knowledge, and returns
// the address.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := s.Listen(ln)
	h1 := &http.Server{Handler: s.Handler}
	go h1.Serve(l)
	t.Cleanup(func() {
		s.Close()
		h1.Close()
	})
	return ln.Addr().String()
}

// h2cClient is x/net's HTTP/2 client speaking h2c to addr.
func h2cClient() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

func TestRequestAsHandlerSeesIt(t *testing.T) {
	type seen struct {
		method, path, query, proto, host, remote, uri, cookie, auth string
		major                                                       int
		clen                                                        int64
		body                                                        string
	}
	got := make(chan seen, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if _, ok := r.Header["Host"]; ok {
			t.Error("Host is in the request's Header")
		}
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Proto, r.Host, r.RemoteAddr, r.RequestURI,
			r.Header.Get("Cookie"), r.Header.Get("Authorization"), r.ProtoMajor, r.ContentLength, string(b)}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Answer", "42")
		w.WriteHeader(201)
		io.WriteString(w, `{"ok":true}`)
	})}
	addr := serve(t, s)
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions?x=1", strings.NewReader("hello"))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Add("Cookie", "a=1")
	req.Header.Add("Cookie", "b=2")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(b) != `{"ok":true}` || resp.Header.Get("X-Answer") != "42" ||
		resp.Header.Get("Content-Type") != "application/json" || resp.ProtoMajor != 2 {
		t.Fatalf("response %d %q %v proto %d", resp.StatusCode, b, resp.Header, resp.ProtoMajor)
	}
	r := <-got
	want := seen{"POST", "/v1/chat/completions", "x=1", "HTTP/2.0", addr, r.remote, "/v1/chat/completions?x=1",
		"a=1; b=2", "Bearer k", 2, 5, "hello"}
	if r != want {
		t.Fatalf("the handler saw\n%+v\nwant\n%+v", r, want)
	}
	if !strings.HasPrefix(r.remote, "127.0.0.1:") {
		t.Fatalf("RemoteAddr %q", r.remote)
	}
}

func TestLargeBodiesBothWays(t *testing.T) {
	// Past every default window, so that both sides wait for WINDOW_UPDATE.
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10) // 4.8 MiB
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(b, big) {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		w.Write(b)
	})}
	addr := serve(t, s)
	c := h2cClient()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, err := c.Post("http://"+addr+"/", "application/octet-stream", bytes.NewReader(big))
			if err != nil {
				t.Error(err)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, big) {
				t.Errorf("status %d, %d bytes, %v", resp.StatusCode, len(b), err)
			}
		})
	}
	wg.Wait()
}

func TestManyStreamsAndStreaming(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 5 {
			fmt.Fprintf(w, "data: %d %s\n\n", i, r.URL.Path)
			w.(http.Flusher).Flush()
		}
	})}
	addr := serve(t, s)
	c := h2cClient()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			p := fmt.Sprintf("/s%d", i)
			resp, err := c.Get("http://" + addr + p)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := ""
			for j := range 5 {
				want += fmt.Sprintf("data: %d %s\n\n", j, p)
			}
			if string(b) != want {
				t.Errorf("%s: %q", p, b)
			}
		})
	}
	wg.Wait()
}

func TestFlushSendsHeadersBeforeBody(t *testing.T) {
	release := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: x\n\n")
	})}
	addr := serve(t, s)
	resp, err := h2cClient().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	close(release) // the headers came before the handler could write
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "data: x\n\n" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%q %v", b, resp.Header)
	}
}

func TestHTTP1GoesToNetHTTP(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	})}
	addr := serve(t, s)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/1.1" {
		t.Fatalf("HTTP/1.1 request answered %q", b)
	}
	resp, err = h2cClient().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0" {
		t.Fatalf("h2c request answered %q", b)
	}
}

func TestClientCancelEndsHandlerContext(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		ended <- r.Context().Err()
	})}
	addr := serve(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
	go func() { <-started; cancel() }()
	if _, err := h2cClient().Do(req); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler context: %v", err)
	}
}

// TestBaseContextEndsHandlerContexts: stream contexts are not children
// of the connection's context (cancelStreams stands in), so the end of
// BaseContext must still reach every open request's handler, and carry
// BaseContext's values.
func TestBaseContextEndsHandlerContexts(t *testing.T) {
	type key struct{}
	base, cancelBase := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancelBase()
	const n = 3
	var started sync.WaitGroup
	started.Add(n)
	ended := make(chan error, n)
	s := &Server{BaseContext: base, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(key{}) != "v" {
			ended <- errors.New("BaseContext's value is missing")
			started.Done()
			return
		}
		started.Done()
		<-r.Context().Done()
		ended <- r.Context().Err()
	})}
	addr := serve(t, s)
	c := h2cClient()
	for range n {
		go func() {
			if resp, err := c.Get("http://" + addr + "/"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	started.Wait()
	cancelBase()
	for range n {
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("handler context: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a handler's context did not end with BaseContext")
		}
	}
}

func TestBodyReadDeadline(t *testing.T) {
	got := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(interface{ SetReadDeadline(time.Time) error }).SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		got <- err
		w.WriteHeader(408)
	})}
	addr := serve(t, s)
	pr, pw := io.Pipe()
	defer pw.Close()
	pw2 := pw
	go pw2.Write([]byte("partial")) // and never the rest
	req, _ := http.NewRequest("POST", "http://"+addr+"/", pr)
	resp, err := h2cClient().Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 408 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	err = <-got
	if !os.IsTimeout(err) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("body read past its deadline: %v", err)
	}
}

// A deadline set once the whole body has come arms no timer (its reads
// cannot wait), and the body still reads whole; a deadline already past
// fails a read that would wait, and not one that has bytes.
func TestBodyReadDeadlineAfterTheBody(t *testing.T) {
	type result struct {
		armed bool
		body  string
		err   error
	}
	got := make(chan result, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := w.(*stream)
		ended := func() bool { st.c.mu.Lock(); defer st.c.mu.Unlock(); return st.remoteEnded }
		for end := time.Now().Add(10 * time.Second); !ended() && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		st.SetReadDeadline(time.Now().Add(time.Hour))
		st.c.mu.Lock()
		armed := st.readTimer != nil
		st.c.mu.Unlock()
		st.SetReadDeadline(time.Now().Add(-time.Second))
		b, err := io.ReadAll(r.Body)
		got <- result{armed, string(b), err}
	})}
	addr := serve(t, s)
	req, _ := http.NewRequest("POST", "http://"+addr+"/", strings.NewReader(`{"model":"m"}`))
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := <-got
	if r.armed || r.body != `{"model":"m"}` || r.err != nil {
		t.Errorf("timer armed %v, body %q, error %v; want no timer and the whole body", r.armed, r.body, r.err)
	}
}

func TestHandlerPanicResetsStream(t *testing.T) {
	var n atomic.Int32
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			n.Add(1)
			panic("boom")
		}
		io.WriteString(w, "fine")
	})}
	addr := serve(t, s)
	c := h2cClient()
	if resp, err := c.Get("http://" + addr + "/panic"); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a panicking handler's response ended cleanly")
		}
	}
	resp, err := c.Get("http://" + addr + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fine" || n.Load() != 1 {
		t.Fatalf("after a panic: %q", b)
	}
}

func TestResponseShapes(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
		case "/nocontent":
			w.WriteHeader(204)
		case "/short":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "abc")
		case "/sniff":
			io.WriteString(w, "<html><body>hi</body></html>")
		}
	})}
	addr := serve(t, s)
	c := h2cClient()
	get := func(p string) (*http.Response, string, error) {
		resp, err := c.Get("http://" + addr + p)
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), err
	}
	if resp, b, err := get("/empty"); err != nil || resp.StatusCode != 200 || b != "" || resp.ContentLength != 0 {
		t.Errorf("/empty: %v %q %v", resp, b, err)
	}
	if resp, _, err := get("/nocontent"); err != nil || resp.StatusCode != 204 {
		t.Errorf("/nocontent: %v %v", resp, err)
	}
	if _, _, err := get("/short"); err == nil {
		t.Error("/short: a body shorter than its content-length ended cleanly")
	}
	if resp, _, err := get("/sniff"); err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/sniff: %v %v", resp, err)
	}
}

func TestTrailers(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Total")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Total", "7")
		w.Header().Set(http.TrailerPrefix+"X-Late", "8")
	})}
	addr := serve(t, s)
	resp, err := h2cClient().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "body" || resp.Trailer.Get("X-Total") != "7" || resp.Trailer.Get("X-Late") != "8" {
		t.Fatalf("%q trailers %v", b, resp.Trailer)
	}
}

// TestLowerKey checks that response header names are lowered as HTTP/2
// requires, and that a name seen before is lowered without allocating
// (a canonical name otherwise costs an allocation on every response).
func TestLowerKey(t *testing.T) {
	for k, want := range map[string]string{
		"Content-Type": "content-type", "X-Strait-Overhead-Us": "x-strait-overhead-us",
		"already-lower": "already-lower", "ETag": "etag",
	} {
		if got := lowerKey(k); got != want {
			t.Errorf("lowerKey(%q) = %q, want %q", k, got, want)
		}
	}
	k := string([]byte("X-Strait-Trace"))
	lowerKey(k)
	if n := testing.AllocsPerRun(100, func() { _ = lowerKey(k) }); n != 0 {
		t.Errorf("lowerKey of a name seen before allocates %v times", n)
	}
}
