package mockllm_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/mockllm"
)

// The mock's own cost, at latency 0 and default sizes (10 deltas, a
// 360-byte JSON answer). BenchmarkHTTP goes through net/http on loopback,
// client included; BenchmarkHandler calls ServeHTTP alone, which is what
// the mock adds to net/http's own cost per request.

var benchCases = []struct{ name, path, body string }{
	{"openai-json", "/v1/chat/completions", oaText},
	{"openai-stream", "/v1/chat/completions", oaStreamUsage},
	{"anthropic-json", "/v1/messages", anText},
	{"anthropic-stream", "/v1/messages", anStream},
	{"openai-tool-stream", "/v1/chat/completions", oaToolStream},
}

func BenchmarkHTTP(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			ts := httptest.NewServer(mockllm.New(mockllm.Options{}))
			defer ts.Close()
			c := ts.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Post(ts.URL+bc.path, "application/json", strings.NewReader(bc.body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

func BenchmarkHandler(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			s := mockllm.New(mockllm.Options{})
			body := &rewindBody{}
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://mock"+bc.path, body)
			if err != nil {
				b.Fatal(err)
			}
			req.ContentLength = int64(len(bc.body))
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(bc.body)
				clear(w.h)
				w.status, w.n = 0, 0
				s.ServeHTTP(w, req)
				if w.status != 200 || w.n == 0 {
					b.Fatalf("status %d, %d bytes", w.status, w.n)
				}
			}
		})
	}
}

// rewindBody is a request body that can be read again.
type rewindBody struct{ strings.Reader }

func (r *rewindBody) Close() error { return nil }

// discardWriter is a ResponseWriter that keeps nothing but the status and
// the byte count.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Flush()              {}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	w.n += len(p)
	return len(p), nil
}
