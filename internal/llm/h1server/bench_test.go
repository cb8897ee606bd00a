package h1server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkJSONRequest is one HTTP/1.1 request with a 600-byte JSON body
// answered with a 350-byte JSON body on a kept-alive loopback connection,
// on Strait's server and on net/http's: the server's cost per request
// (the client writes prepared bytes and reads a known length, allocating
// nothing).
func BenchmarkJSONRequest(b *testing.B) {
	b.Run("h1server", func(b *testing.B) {
		benchJSON(b, func(h http.Handler) string { return serve(b, &Server{Handler: h}) })
	})
	b.Run("net-http", func(b *testing.B) {
		benchJSON(b, func(h http.Handler) string {
			ts := httptest.NewServer(h)
			b.Cleanup(ts.Close)
			return ts.Listener.Addr().String()
		})
	})
}

func benchJSON(b *testing.B, start func(http.Handler) string) {
	answer := bytes.Repeat([]byte("a"), 350)
	addr := start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	body := bytes.Repeat([]byte("x"), 600)
	req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 600\r\n\r\n" + string(body))
	// The answer's length, read once.
	conn.Write(req)
	first := make([]byte, 4096)
	n, err := conn.Read(first)
	if err != nil {
		b.Fatal(err)
	}
	size := n
	if !bytes.HasSuffix(first[:n], answer) {
		b.Fatalf("answer %q", first[:n])
	}
	buf := make([]byte, size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
}
