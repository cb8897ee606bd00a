package h1client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzResponse: whatever a provider answers, the client returns an error
// or a response whose body ends (in its bytes, or an error); it never
// panics, and the connection is given back only when the answer was
// whole and well-formed.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nto the end",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 999 Whatever\r\nConnection: close\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
		"\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, s := net.Pipe()
			go func() {
				defer s.Close()
				if req, err := http.ReadRequest(bufio.NewReader(s)); err == nil {
					io.Copy(io.Discard, req.Body)
					s.Write(answer)
				}
			}()
			return c, nil
		}
		tr := New(Options{Addr: "provider.test:80", Dial: dial, MaxConns: 1, MaxHeaderBytes: 4096})
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://provider.test/v1/messages", strings.NewReader("{}"))
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
			}
			hung := ctx.Err() != nil
			cancel()
			if hung {
				t.Fatalf("the answer %q hung the client", answer)
			}
		}
		tr.CloseIdleConnections()
		tr.mu.Lock()
		open := tr.open
		tr.mu.Unlock()
		if open != 0 {
			t.Fatalf("%d connections counted open after every body ended and the idle ones closed", open)
		}
	})
}
