package h1server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzWait bounds every wait of one input: the client's reading, and
// ServeConn's return after the client has sent everything.
const fuzzWait = 5 * time.Second

// fuzzHandler reads the whole body and answers shortly; mode picks the
// answer's status and framing: bit 0 flushes in the middle, bit 1 declares
// the length, bit 2 adds 40 KiB (past the size at which the server sends
// without being asked), bit 3 asks for Connection: close, bits 4-6 pick
// the status. An answer to HEAD says so in X-Fuzz-Head, as its client
// reads no body.
func fuzzHandler(mode byte) http.Handler {
	statuses := [8]int{200, 200, 201, 204, 304, 404, 500, 200}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodHead {
			w.Header().Set("X-Fuzz-Head", "1")
		}
		body := "read " + strconv.FormatInt(n, 10)
		if err != nil {
			body += " then failed"
		}
		if mode&4 != 0 {
			body += strings.Repeat("x", 40<<10)
		}
		if mode&2 != 0 {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		if mode&8 != 0 {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(statuses[mode>>4&7])
		if mode&1 != 0 {
			io.WriteString(w, body[:1])
			w.(http.Flusher).Flush()
			body = body[1:]
		}
		io.WriteString(w, body)
	})
}

// fuzzPair returns the two ends of a loopback TCP connection.
func fuzzPair(t *testing.T, ln *net.TCPListener) (client *net.TCPConn, server net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), fuzzWait)
	if err != nil {
		t.Fatal(err)
	}
	ln.SetDeadline(time.Now().Add(fuzzWait))
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c.(*net.TCPConn), s
}

// fuzzCheckAnswers asserts that out is a sequence of whole, well-framed
// answers: each parses, its body reads to its end (an answer to HEAD has
// none on the wire), nothing follows one that says Connection: close, and
// the last is not informational.
func fuzzCheckAnswers(t *testing.T, in, out []byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(out))
	last := 0
	for i := 1; ; i++ {
		if _, err := br.Peek(1); err == io.EOF {
			break
		}
		rest, _ := br.Peek(4096) // the head, whole (all of them are shorter)
		head, _, _ := bytes.Cut(rest, []byte("\r\n\r\n"))
		saysClose := bytes.Contains(bytes.ToLower(head), []byte("\r\nconnection: close\r\n"))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d does not parse: %v\nits bytes: %q\nrequest bytes: %q", i, err, rest, in)
		}
		// An answer to HEAD has no body on the wire, whatever its
		// Content-Length says; ReadResponse reads none until asked.
		if resp.Header.Get("X-Fuzz-Head") == "" {
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatalf("answer %d's body: %v\nits bytes: %q\nrequest bytes: %q", i, err, rest, in)
			}
		}
		last = resp.StatusCode
		if _, err := br.Peek(1); saysClose && err != io.EOF {
			more, _ := br.Peek(br.Buffered())
			t.Fatalf("answer %d (%d) says Connection: close, but %q follows it\nrequest bytes: %q", i, last, more, in)
		}
	}
	if last != 0 && last < 200 {
		t.Fatalf("the last answer is informational (%d): %q\nrequest bytes: %q", last, out, in)
	}
}

// fuzzServe runs one input: a client writes it to a fresh Server over
// loopback TCP, half-closes, and reads everything until the server closes.
func fuzzServe(t *testing.T, ln *net.TCPListener, in []byte, mode byte) {
	s := &Server{
		Handler:           fuzzHandler(mode),
		MaxHeaderBytes:    1024,
		ReadHeaderTimeout: 200 * time.Millisecond,
		IdleTimeout:       200 * time.Millisecond,
		WriteTimeout:      fuzzWait,
	}
	defer s.Close()
	cc, sc := fuzzPair(t, ln)
	defer cc.Close()
	served := make(chan error, 1)
	go func() { served <- s.ServeConn(sc) }()
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		// The server may close before it has read everything (an
		// answer with Connection: close): the write then fails.
		if _, err := cc.Write(in); err == nil {
			cc.CloseWrite()
		}
	}()
	cc.SetReadDeadline(time.Now().Add(fuzzWait))
	out, err := io.ReadAll(cc)
	// A server closing with bytes of the client unread resets the
	// connection; what it sent before is read first.
	if err != nil && !rawIsClosed(err) {
		t.Fatalf("reading the answers: %v (the server did not close the connection); read %q\nrequest bytes: %q", err, out, in)
	}
	select {
	case <-served:
	case <-time.After(fuzzWait):
		t.Fatalf("ServeConn did not return within %v of the client's close\nrequest bytes: %q", fuzzWait, in)
	}
	cc.Close()
	<-wrote
	fuzzCheckAnswers(t, in, out)
}

func FuzzServeConn(f *testing.F) {
	const host = "Host: x\r\n"
	seeds := []string{
		"GET / HTTP/1.1\r\n" + host + "\r\n",
		"HEAD / HTTP/1.1\r\n" + host + "\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"POST /p HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello",
		"POST /p HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
		"GET /1 HTTP/1.1\r\n" + host + "\r\nPOST /2 HTTP/1.1\r\n" + host + "Content-Length: 2\r\n\r\nhiHEAD /3 HTTP/1.1\r\n" + host + "\r\n",
		"POST /e HTTP/1.1\r\n" + host + "Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
		"POST /e HTTP/1.1\r\n" + host + "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\n" + host + "X-Big: " + strings.Repeat("a", 6000) + "\r\n\r\n",
		"GET /" + strings.Repeat("a", 6000) + " HTTP/1.1\r\n" + host + "\r\n",
		"POST / HTTP/1.1\r\n" + host + "Content-Length: 41\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n" + host + "\r\n",
		"POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\n" + host + "Content-Length: 100\r\n\r\nshort",
		"GET / HTTP/1.1\r\n" + host + "Connection: close\r\n\r\nGET / HTTP/1.1\r\n" + host + "\r\n",
		"GET / HTTP/1.1\r\n" + host + "Expect: other\r\n\r\n",
		"POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n",
		"GET / HTTP/1.1\r\n" + host + "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
		"GET / HTTP/2.0\r\n" + host + "\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GARBAGE\r\n\r\n",
		"\x00\x01\x02\xff",
		"",
	}
	for i, s := range seeds {
		f.Add([]byte(s), byte(i*0x13))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ln.Close() })
	f.Fuzz(func(t *testing.T, in []byte, mode byte) {
		fuzzServe(t, ln.(*net.TCPListener), in, mode)
	})
}
