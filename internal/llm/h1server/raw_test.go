package h1server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests speak raw bytes to the server over loopback TCP: a request
// written by hand, the answer read with http.ReadResponse or byte by byte
// where the exact bytes matter. Every wait is bounded by rawWait, the
// connection's deadline.

const rawWait = 5 * time.Second

// rawServe serves every connection accepted on a loopback listener with
// s.ServeConn and returns the listener's address. When the test ends the
// listener and s are closed, and every ServeConn must have returned.
func rawServe(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.ServeConn(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepting
		s.Close()
		served := make(chan struct{})
		go func() {
			wg.Wait()
			close(served)
		}()
		select {
		case <-served:
		case <-time.After(rawWait):
			t.Errorf("ServeConn did not return within %v of Close", rawWait)
		}
	})
	return ln.Addr().String()
}

// rawStdServe serves h with net/http's own server, limited as rawServe's
// h1server is, and returns its address.
func rawStdServe(t *testing.T, h http.Handler, maxHeaderBytes int) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.MaxHeaderBytes = maxHeaderBytes
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.Listener.Addr().String()
}

// rawDial connects to addr; every read and write on the connection must
// be done within rawWait.
func rawDial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(rawWait))
	return conn, bufio.NewReader(conn)
}

func rawWrite(t *testing.T, conn net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(conn, s); err != nil {
		t.Fatalf("writing the request: %v", err)
	}
}

// rawAnswer is a response read whole.
type rawAnswer struct {
	*http.Response
	body    string
	bodyErr error
}

// rawRead reads one answer to a request of the given method, its body
// to its end.
func rawRead(t *testing.T, br *bufio.Reader, method string) rawAnswer {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	return rawAnswer{Response: resp, body: string(b), bodyErr: err}
}

// rawIsClosed reports whether err says the server closed the connection:
// an orderly close, or a reset when it closed with bytes of ours unread.
func rawIsClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// rawExpectClosed asserts that the server sends nothing more and closes
// the connection.
func rawExpectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	b, err := br.ReadByte()
	switch {
	case err == nil:
		rest, _ := br.Peek(br.Buffered())
		t.Errorf("the connection should have closed, but the server sent more: %q", append([]byte{b}, rest...))
	case !rawIsClosed(err):
		t.Errorf("the connection should have closed: %v", err)
	}
}

// rawExpectReused asserts that the connection carries another request.
func rawExpectReused(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(conn, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatalf("the connection should carry another request: writing it: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the connection should carry another request: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != `GET /again ""` {
		t.Fatalf("the next request on the connection was answered %d %q (%v), want 200 %q", resp.StatusCode, b, err, `GET /again ""`)
	}
}

// rawEcho answers "METHOD PATH BODY" after reading the whole body, or 422
// with the error if the body could not be read; every answer names its
// request's path in X-Raw-Path.
func rawEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Raw-Path", r.URL.Path)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, "body: %v", err)
		return
	}
	fmt.Fprintf(w, "%s %s %q", r.Method, r.URL.Path, b)
}

const rawMaxHeader = 1024 // the servers' MaxHeaderBytes; the bound is 4 KiB more

// rawSentinel follows the bytes of a differential case: it is answered
// only if the connection survived them.
const rawSentinel = "GET /rawsentinel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

// rawExchange writes raw and rawSentinel to addr in one write and returns
// the status of every answer read until the server closes the
// connection; the sentinel's answer is reported as -1.
func rawExchange(t *testing.T, addr, raw string) []int {
	t.Helper()
	conn, br := rawDial(t, addr)
	defer conn.Close()
	rawWrite(t, conn, raw+rawSentinel)
	var codes []int
	for {
		if _, err := br.Peek(1); rawIsClosed(err) {
			return codes
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: answer %d after %v: %v", addr, len(codes)+1, codes, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		code := resp.StatusCode
		if resp.Header.Get("X-Raw-Path") == "/rawsentinel" {
			code = -1
		}
		codes = append(codes, code)
		if err != nil {
			if !rawIsClosed(err) {
				t.Fatalf("%s: the body of answer %d (%d): %v", addr, len(codes), code, err)
			}
			return codes
		}
	}
}

// TestRawSameAsNetHTTP sends the same bytes to h1server and to net/http's
// server, with the same handler and header limit, and compares the
// statuses answered and whether the connection lived on to answer the
// sentinel request that follows (-1 in want).
func TestRawSameAsNetHTTP(t *testing.T) {
	ours := rawServe(t, &Server{Handler: http.HandlerFunc(rawEcho), MaxHeaderBytes: rawMaxHeader})
	std := rawStdServe(t, http.HandlerFunc(rawEcho), rawMaxHeader)
	const host = "Host: x\r\n"
	long := strings.Repeat("a", rawMaxHeader+4096+100)
	var manyHeaders strings.Builder
	for i := 0; manyHeaders.Len() < rawMaxHeader+4096+100; i++ {
		fmt.Fprintf(&manyHeaders, "X-Header-Number-%d: v\r\n", i)
	}
	for _, c := range []struct {
		name string
		raw  string
		want []int
	}{
		{"GET", "GET / HTTP/1.1\r\n" + host + "\r\n", []int{200, -1}},
		{"lowercase method", "get / HTTP/1.1\r\n" + host + "\r\n", []int{200, -1}},
		{"bare LF", "GET / HTTP/1.1\n" + host[:len(host)-2] + "\n\n", []int{200, -1}},
		{"garbage", "GARBAGE\r\n\r\n", []int{400}},
		{"empty line first", "\r\nGET / HTTP/1.1\r\n" + host + "\r\n", []int{400}},
		{"malformed version", "GET / HTTP/1.x\r\n" + host + "\r\n", []int{400}},
		{"HTTP/2.0", "GET / HTTP/2.0\r\n" + host + "\r\n", []int{505}},
		{"HTTP/0.9", "GET / HTTP/0.9\r\n" + host + "\r\n", []int{505}},
		{"NUL in target", "GET /a\x00b HTTP/1.1\r\n" + host + "\r\n", []int{400}},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", []int{400}},
		{"HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", []int{200}},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", []int{400}},
		{"malformed Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", []int{400}},
		{"control byte in a value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x01b\r\n\r\n", []int{400}},
		{"space in a name", "GET / HTTP/1.1\r\n" + host + "Bad Name: b\r\n\r\n", []int{400}},
		{"line without colon", "GET / HTTP/1.1\r\n" + host + "NoColon\r\n\r\n", []int{400}},
		{"Expect other", "GET / HTTP/1.1\r\n" + host + "Expect: something-else\r\n\r\n", []int{417}},
		{"gzip, chunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", []int{501}},
		{"unknown coding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: foo\r\n\r\n", []int{501}},
		{"identity coding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: identity\r\n\r\n", []int{501}},
		{"two Transfer-Encodings", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []int{501}},
		{"HTTP/1.0 ignores Transfer-Encoding", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", []int{200}},
		{"Content-Length", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello", []int{200, -1}},
		{"equal Content-Lengths", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", []int{200, -1}},
		{"different Content-Lengths", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", []int{400}},
		{"negative Content-Length", "POST / HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", []int{400}},
		{"signed Content-Length", "POST / HTTP/1.1\r\n" + host + "Content-Length: +5\r\n\r\nhello", []int{400}},
		{"hex Content-Length", "POST / HTTP/1.1\r\n" + host + "Content-Length: 0x5\r\n\r\nhello", []int{400}},
		{"chunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n", []int{200, -1}},
		{"malformed chunk size", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", []int{422}},
		{"chunk longer than its size", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n", []int{422}},
		// Transfer-Encoding wins: the body is the empty chunked one, and the
		// bytes Content-Length would have covered are a request of their own.
		{"chunked over Content-Length", "POST / HTTP/1.1\r\n" + host + "Content-Length: 41\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n" + host + "\r\n", []int{200, 200, -1}},
		{"smuggled request is refused", "POST / HTTP/1.1\r\n" + host + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\x01", []int{200, 400}},
		{"pipelined", "GET /1 HTTP/1.1\r\n" + host + "\r\nPOST /2 HTTP/1.1\r\n" + host + "Content-Length: 2\r\n\r\nhiGET /3 HTTP/1.1\r\n" + host + "\r\n", []int{200, 200, 200, -1}},
		{"Connection: close", "GET / HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n", []int{200}},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\n" + host + "\r\n", []int{200, -1}},
		{"long request line", "GET /" + long + " HTTP/1.1\r\n" + host + "\r\n", []int{431}},
		{"long header value", "GET / HTTP/1.1\r\n" + host + "X-Long: " + long + "\r\n\r\n", []int{431}},
		{"many headers", "GET / HTTP/1.1\r\n" + host + manyHeaders.String() + "\r\n", []int{431}},
		{"header within the bound", "GET / HTTP/1.1\r\n" + host + "X-Long: " + long[:rawMaxHeader+2048] + "\r\n\r\n", []int{200, -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := rawExchange(t, ours, c.raw)
			gotStd := rawExchange(t, std, c.raw)
			if !slices.Equal(got, gotStd) {
				t.Errorf("h1server answered %v, net/http %v", got, gotStd)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("h1server answered %v, want %v (-1: the next request was answered)", got, c.want)
			}
		})
	}
}

// TestRawRefusals: a request the server refuses is answered with the
// status, and the connection closes after it.
func TestRawRefusals(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(rawEcho), MaxHeaderBytes: rawMaxHeader})
	const host = "Host: x\r\n"
	for _, c := range []struct {
		name string
		raw  string
		code int
	}{
		{"malformed request line", "GET/HTTP/1.1\r\n" + host + "\r\n", 400},
		{"malformed version", "GET / HTTP/1.1x\r\n" + host + "\r\n", 400},
		{"header above the bound", "GET / HTTP/1.1\r\n" + host + "X-Long: " + strings.Repeat("a", rawMaxHeader+4096) + "\r\n\r\n", 431},
		{"request line above the bound", "GET /" + strings.Repeat("a", rawMaxHeader+4096) + " HTTP/1.1\r\n" + host + "\r\n", 431},
		{"HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"control byte in a value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x01b\r\n\r\n", 400},
		{"DEL in a value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x7fb\r\n\r\n", 400},
		{"invalid header name", "GET / HTTP/1.1\r\n" + host + "X(A): b\r\n\r\n", 400},
		{"Expect other", "POST / HTTP/1.1\r\n" + host + "Expect: something-else\r\nContent-Length: 2\r\n\r\nhi", 417},
		{"gzip, chunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
		{"unknown coding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: x-unknown\r\n\r\n", 501},
		{"two Transfer-Encodings", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
		{"HTTP/2.0", "GET / HTTP/2.0\r\n" + host + "\r\n", 505},
		{"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 405},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, br := rawDial(t, addr)
			rawWrite(t, conn, c.raw)
			a := rawRead(t, br, "GET")
			if a.StatusCode != c.code {
				t.Errorf("status %d (%q), want %d", a.StatusCode, a.body, c.code)
			}
			if !a.Close {
				t.Errorf("the answer does not say Connection: close: %v", a.Header)
			}
			if a.bodyErr != nil {
				t.Errorf("the answer's body: %v", a.bodyErr)
			}
			rawExpectClosed(t, br)
		})
	}
}

// TestRawHost: HTTP/1.1 requires Host, HTTP/1.0 does not.
func TestRawHost(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(rawEcho)})

	conn, br := rawDial(t, addr)
	rawWrite(t, conn, "GET /h HTTP/1.1\r\n\r\n")
	if a := rawRead(t, br, "GET"); a.StatusCode != 400 {
		t.Errorf("HTTP/1.1 without Host: %d %q, want 400", a.StatusCode, a.body)
	}
	rawExpectClosed(t, br)

	conn, br = rawDial(t, addr)
	rawWrite(t, conn, "GET /h HTTP/1.0\r\n\r\n")
	if a := rawRead(t, br, "GET"); a.StatusCode != 200 || a.body != `GET /h ""` {
		t.Errorf("HTTP/1.0 without Host: %d %q, want 200", a.StatusCode, a.body)
	}
	rawExpectClosed(t, br) // HTTP/1.0 without keep-alive

	conn, br = rawDial(t, addr)
	rawWrite(t, conn, "GET /h HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := rawRead(t, br, "GET"); a.StatusCode != 200 || a.body != `GET /h ""` {
		t.Errorf("HTTP/1.1 with Host: %d %q, want 200", a.StatusCode, a.body)
	}
	rawExpectReused(t, conn, br)
}

// TestRawExpectContinue: a client that waits for "100 Continue" receives
// exactly that before it sends its body, once the handler reads it, and
// then the final answer; a handler that does not read the body sends no
// "100 Continue", and the connection closes after its answer.
func TestRawExpectContinue(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ignore" {
			io.WriteString(w, "ignored")
			return
		}
		rawEcho(w, r)
	})})
	const cont = "HTTP/1.1 100 Continue\r\n\r\n"

	t.Run("read", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		got := make([]byte, len(cont))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != cont {
			t.Fatalf("before sending the body the client read %q (%v), want %q", got, err, cont)
		}
		rawWrite(t, conn, "hello")
		if a := rawRead(t, br, "POST"); a.StatusCode != 200 || a.body != `POST /e "hello"` {
			t.Errorf("final answer %d %q", a.StatusCode, a.body)
		}
		rawExpectReused(t, conn, br)
	})

	t.Run("chunked", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n")
		got := make([]byte, len(cont))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != cont {
			t.Fatalf("before sending the body the client read %q (%v), want %q", got, err, cont)
		}
		rawWrite(t, conn, "5\r\nhello\r\n0\r\n\r\n")
		if a := rawRead(t, br, "POST"); a.StatusCode != 200 || a.body != `POST /e "hello"` {
			t.Errorf("final answer %d %q", a.StatusCode, a.body)
		}
		rawExpectReused(t, conn, br)
	})

	t.Run("ignored", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		a := rawRead(t, br, "POST")
		if a.StatusCode != 200 || a.body != "ignored" {
			t.Errorf("answer %d %q, want 200 %q", a.StatusCode, a.body, "ignored")
		}
		if !a.Close {
			t.Errorf("the answer to a request whose body was not asked for does not say Connection: close: %v", a.Header)
		}
		rawExpectClosed(t, br)
	})

	t.Run("no body", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "GET /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n")
		if a := rawRead(t, br, "GET"); a.StatusCode != 200 || a.body != `GET /e ""` {
			t.Errorf("answer %d %q, want 200 and no 100 Continue", a.StatusCode, a.body)
		}
		rawExpectReused(t, conn, br)
	})

	// RFC 9110, 10.1.1: a server MUST ignore a 100-continue expectation
	// in an HTTP/1.0 request (net/http does).
	t.Run("HTTP/1.0", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "POST /e HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello")
		if a := rawRead(t, br, "POST"); a.StatusCode != 200 || a.body != `POST /e "hello"` {
			t.Errorf("answer %d %q, want 200 %q", a.StatusCode, a.body, `POST /e "hello"`)
		}
		rawExpectClosed(t, br)
	})
}

// TestRawExpectContinueAfterHead: once the answer's head is sent, reading
// the body must not send "100 Continue" into the answer (net/http stops
// sending it once the handler answers); the client, which may send its
// body anyway, reads a well-framed answer, and the connection closes.
func TestRawExpectContinueAfterHead(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%q %v", b, err)
	})})
	conn, br := rawDial(t, addr)
	rawWrite(t, conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	rawWrite(t, conn, "hello")
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != `"hello" <nil>` {
		t.Errorf("body %q (%v), want %q", b, err, `"hello" <nil>`)
	}
	rawExpectClosed(t, br)
}

// TestRawChunkedOverContentLength: a request with both Content-Length and
// "Transfer-Encoding: chunked" has its body read as chunked, as net/http
// reads it; the bytes after the chunked body are the next request, for
// h1server as for net/http (TestRawSameAsNetHTTP compares more).
func TestRawChunkedOverContentLength(t *testing.T) {
	bodies := make(chan string, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		bodies <- fmt.Sprintf("%s %s cl=%d te=%v %q %v", r.Method, r.URL.Path, r.ContentLength, r.TransferEncoding, b, err)
		rawEcho(w, r)
	})
	ours := rawServe(t, &Server{Handler: h})
	std := rawStdServe(t, h, 0)
	// Content-Length covers the chunked body and the request after it.
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	body := "5\r\nhello\r\n0\r\n\r\n" + smuggled
	raw := fmt.Sprintf("POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", len(body), body)
	want := []string{
		`POST /first cl=-1 te=[chunked] "hello" <nil>`,
		`GET /smuggled cl=0 te=[] "" <nil>`,
		`GET /rawsentinel cl=0 te=[] "" <nil>`,
	}
	for _, addr := range []string{ours, std} {
		codes := rawExchange(t, addr, raw)
		if !slices.Equal(codes, []int{200, 200, -1}) {
			t.Errorf("%s answered %v, want [200 200 -1]", addr, codes)
		}
		var got []string
		for len(bodies) > 0 {
			got = append(got, <-bodies)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the handler saw\n%s\nwant\n%s", addr, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestRawMalformedChunk: a chunked body with a malformed chunk size fails
// the handler's read, and the connection closes after the answer, the
// bytes after the error never read as a request.
func TestRawMalformedChunk(t *testing.T) {
	errs := make(chan error, 1)
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		errs <- err
		w.WriteHeader(http.StatusUnprocessableEntity)
	})})
	conn, br := rawDial(t, addr)
	rawWrite(t, conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := rawRead(t, br, "POST"); a.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("status %d, want 422", a.StatusCode)
	}
	if err := <-errs; err == nil {
		t.Error("the handler read the malformed body without error")
	}
	rawExpectClosed(t, br)
}

// TestRawPipelined: requests sent in one write are answered in order on
// the same connection.
func TestRawPipelined(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(rawEcho)})
	conn, br := rawDial(t, addr)
	rawWrite(t, conn, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"+
		"POST /3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n"+
		"GET /4 HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{`GET /1 ""`, `POST /2 "abc"`, `POST /3 "de"`, `GET /4 ""`} {
		if a := rawRead(t, br, "GET"); a.StatusCode != 200 || a.body != want || a.Close {
			t.Errorf("answer %d %q (close %v), want 200 %q", a.StatusCode, a.body, a.Close, want)
		}
	}
	rawExpectReused(t, conn, br)
}

// TestRawUnreadBody: a small body the handler leaves unread is read past,
// and the connection carries the next request; one whose Content-Length
// is above 256 KiB is not: its answer says "Connection: close", and the
// connection closes.
func TestRawUnreadBody(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/again" {
			rawEcho(w, r)
			return
		}
		io.WriteString(w, "unread")
	})})

	t.Run("small", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		body := strings.Repeat("b", 10<<10)
		rawWrite(t, conn, fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		a := rawRead(t, br, "POST")
		if a.StatusCode != 200 || a.body != "unread" || a.Close {
			t.Errorf("answer %d %q (close %v), want 200 %q, kept alive", a.StatusCode, a.body, a.Close, "unread")
		}
		rawExpectReused(t, conn, br)
	})

	t.Run("small chunked", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
		if a := rawRead(t, br, "POST"); a.StatusCode != 200 || a.body != "unread" || a.Close {
			t.Errorf("answer %d %q (close %v), want 200 %q, kept alive", a.StatusCode, a.body, a.Close, "unread")
		}
		rawExpectReused(t, conn, br)
	})

	t.Run("large", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		const n = maxDrain + 1
		rawWrite(t, conn, fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n))
		// The body is sent while the answer is read; the server, which
		// does not read it, may reset the connection under the writes.
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			conn.Write(bytes.Repeat([]byte("b"), n))
		}()
		a := rawRead(t, br, "POST")
		if a.StatusCode != 200 || a.body != "unread" {
			t.Errorf("answer %d %q, want 200 %q", a.StatusCode, a.body, "unread")
		}
		if !a.Close {
			t.Errorf("the answer does not say Connection: close: %v", a.Header)
		}
		rawExpectClosed(t, br)
		conn.Close()
		<-wrote
	})
}

// TestRawResponseSplitting: a header value cannot start a header of its
// own (its line breaks are sent as spaces), and a header whose name is not
// a token is not sent.
func TestRawResponseSplitting(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/again" {
			rawEcho(w, r)
			return
		}
		w.Header().Set("X-A", "v\r\nX-Injected: 1")
		w.Header()["X-B\r\nX-Injected-Name"] = []string{"1"}
		w.Header().Set("X-C", "w\nX-Injected-Too: 1")
		io.WriteString(w, "ok")
	})})
	conn, br := rawDial(t, addr)
	rawWrite(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	a := rawRead(t, br, "GET")
	if a.StatusCode != 200 || a.body != "ok" {
		t.Fatalf("answer %d %q", a.StatusCode, a.body)
	}
	for k := range a.Header {
		if strings.Contains(k, "Injected") {
			t.Errorf("the client sees an injected header %q: %v", k, a.Header)
		}
	}
	if got := a.Header.Get("X-A"); got != "v  X-Injected: 1" {
		t.Errorf("X-A: %q, want %q", got, "v  X-Injected: 1")
	}
	if got := a.Header.Get("X-C"); got != "w X-Injected-Too: 1" {
		t.Errorf("X-C: %q, want %q", got, "w X-Injected-Too: 1")
	}
	rawExpectReused(t, conn, br)
}

// TestRawContentLengthMismatch: an answer shorter than the Content-Length
// its handler declared ends with the connection (the client cannot find
// its end otherwise); a write past it fails with http.ErrContentLength,
// and the answer stays well framed.
func TestRawContentLengthMismatch(t *testing.T) {
	writeErrs := make(chan error, 1)
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/short":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "abc")
		case "/over":
			w.Header().Set("Content-Length", "3")
			_, err := io.WriteString(w, "abcd")
			writeErrs <- err
			io.WriteString(w, "abc")
		default:
			rawEcho(w, r)
		}
	})})

	t.Run("short", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
		all, err := io.ReadAll(br)
		if err != nil && !rawIsClosed(err) {
			t.Fatalf("the connection did not close after the short answer: %v (read %q)", err, all)
		}
		head, body, ok := strings.Cut(string(all), "\r\n\r\n")
		if !ok || !strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || !strings.Contains(head, "\r\nContent-Length: 10\r\n") || body != "abc" {
			t.Errorf("the client read %q, want a 200 head saying Content-Length: 10, then %q and the close", all, "abc")
		}
	})

	t.Run("over", func(t *testing.T) {
		conn, br := rawDial(t, addr)
		rawWrite(t, conn, "GET /over HTTP/1.1\r\nHost: x\r\n\r\n")
		a := rawRead(t, br, "GET")
		if err := <-writeErrs; !errors.Is(err, http.ErrContentLength) {
			t.Errorf("writing past Content-Length: %v, want %v", err, http.ErrContentLength)
		}
		if a.StatusCode != 200 || a.body != "abc" || a.bodyErr != nil || a.ContentLength != 3 {
			t.Errorf("answer %d %q (%v), Content-Length %d, want 200 %q", a.StatusCode, a.body, a.bodyErr, a.ContentLength, "abc")
		}
		rawExpectReused(t, conn, br)
	})
}

// TestRawHead: the answer to HEAD has no body on the wire, whether the
// handler wrote one (its length is sent), declared one, or streamed, and
// the connection carries the next request, whose answer follows the head
// directly.
func TestRawHead(t *testing.T) {
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/written":
			io.WriteString(w, "hello")
		case "/declared":
			w.Header().Set("Content-Length", "10")
		case "/streamed":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		default:
			rawEcho(w, r)
		}
	})})
	for _, c := range []struct {
		path string
		cl   string
	}{{"/written", "5"}, {"/declared", "10"}, {"/streamed", ""}} {
		t.Run(c.path, func(t *testing.T) {
			conn, br := rawDial(t, addr)
			// Pipelined with a GET, so that body bytes after the head
			// would be read as the GET's answer.
			rawWrite(t, conn, "HEAD "+c.path+" HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
			var head []byte
			for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
				b, err := br.ReadByte()
				if err != nil {
					t.Fatalf("reading the head: %v (read %q)", err, head)
				}
				head = append(head, b)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), &http.Request{Method: "HEAD"})
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("the head %q: %v", head, err)
			}
			if got := resp.Header.Get("Content-Length"); got != c.cl {
				t.Errorf("Content-Length %q, want %q", got, c.cl)
			}
			if te := resp.Header.Get("Transfer-Encoding"); te != "" || resp.Close {
				t.Errorf("the answer to HEAD says Transfer-Encoding %q, close %v", te, resp.Close)
			}
			if a := rawRead(t, br, "GET"); a.StatusCode != 200 || a.body != `GET /after ""` {
				t.Errorf("the answer after the head: %d %q", a.StatusCode, a.body)
			}
			rawExpectReused(t, conn, br)
		})
	}
}

// TestRawNoBodyStatus: a 204 or 304 answer has no Content-Length and no
// body, a handler's write is refused with http.ErrBodyNotAllowed, and the
// connection carries the next request.
func TestRawNoBodyStatus(t *testing.T) {
	writeErrs := make(chan error, 1)
	addr := rawServe(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.Header().Set("Content-Length", "1")
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		default:
			rawEcho(w, r)
			return
		}
		_, err := io.WriteString(w, "x")
		writeErrs <- err
	})})
	for _, code := range []int{204, 304} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			conn, br := rawDial(t, addr)
			rawWrite(t, conn, fmt.Sprintf("GET /%d HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n", code))
			a := rawRead(t, br, "GET")
			if a.StatusCode != code || a.body != "" {
				t.Errorf("answer %d %q, want %d and no body", a.StatusCode, a.body, code)
			}
			if _, ok := a.Header["Content-Length"]; ok {
				t.Errorf("the %d answer has a Content-Length: %v", code, a.Header)
			}
			if _, ok := a.Header["Transfer-Encoding"]; ok || len(a.TransferEncoding) > 0 {
				t.Errorf("the %d answer has a Transfer-Encoding: %v", code, a.Header)
			}
			if err := <-writeErrs; !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("writing a %d answer's body: %v, want %v", code, err, http.ErrBodyNotAllowed)
			}
			if a := rawRead(t, br, "GET"); a.StatusCode != 200 || a.body != `GET /after ""` {
				t.Errorf("the answer after the %d: %d %q", code, a.StatusCode, a.body)
			}
			rawExpectReused(t, conn, br)
		})
	}
}

// TestRawBodyAfterReadHeaderTimeout: ReadHeaderTimeout bounds the request's
// line and header, not its body: a body that arrives after it has passed
// is read (as net/http reads it).
func TestRawBodyAfterReadHeaderTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	started := make(chan struct{})
	addr := rawServe(t, &Server{
		ReadHeaderTimeout: timeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				close(started)
			}
			rawEcho(w, r)
		}),
	})
	conn, br := rawDial(t, addr)
	rawWrite(t, conn, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
	select {
	case <-started:
	case <-time.After(rawWait):
		t.Fatal("the handler did not start")
	}
	// Not a wait for something to happen: the body must arrive after the
	// header's deadline has passed.
	time.Sleep(3 * timeout)
	rawWrite(t, conn, "hello")
	if a := rawRead(t, br, "POST"); a.StatusCode != 200 || a.body != `POST /slow "hello"` {
		t.Errorf("answer %d %q, want 200 %q", a.StatusCode, a.body, `POST /slow "hello"`)
	}
	rawExpectReused(t, conn, br)
}
