package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/translate"
)

// The benchmarks measure the gateway's own work on the fast path, with the
// network replaced by memory:
//
//	go test ./internal/llm/gateway/ -run '^$' -bench . -benchmem
//
// BenchmarkFastPathPrepare is what routing a request costs (scan, route,
// model splice, provider headers); BenchmarkServeHTTP* is a whole request
// through ServeHTTP (auth, body read, the above, the provider request,
// relaying the answer, metrics, with and without the access log line)
// against a provider that answers from memory.

func benchGateway(b testing.TB, rt http.RoundTripper, logLevel slog.Level) *Gateway {
	b.Helper()
	g, err := New(Options{
		Providers: []Provider{{Name: "oa", Dialect: translate.OpenAI, BaseURL: "http://127.0.0.1:9", APIKey: openAIKey}},
		Routes: []Route{
			{Match: "claude-*", Provider: "oa"},
			{Name: "alias", Match: "alias-?", Provider: "oa", Model: "gpt-upstream"},
			{Match: "gpt-*", Provider: "oa"},
		},
		Keys: []Key{{Name: "bench", SHA256: HashKey(testKey)}},
		Log:  slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: logLevel})),
	})
	if err != nil {
		b.Fatal(err)
	}
	if rt != nil {
		g.providers["oa"].rt = rt
	}
	return g
}

func BenchmarkFastPathPrepare(b *testing.B) {
	g := benchGateway(b, nil, slog.LevelWarn)
	body := []byte(referenceBody)
	in := http.Header{"Authorization": {"Bearer " + testKey}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := jsonscan.ScanRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		rt := g.match(req.Model)
		t := rt.targets[0]
		out := jsonscan.Splice(body, req.ModelStart, req.ModelEnd, t.upstreamModel(req.Model))
		h := t.p.requestHeader(t.header, translate.OpenAI, in, req.Stream)
		if len(out) == 0 || len(h) == 0 || rt.modelLabel(t, req.Model) == "" {
			b.Fatal("nothing prepared")
		}
	}
}

// memProvider answers every request from memory.
type memProvider struct {
	ctype string
	body  []byte
}

func (m *memProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {m.ctype}},
		Body:       io.NopCloser(bytes.NewReader(m.body)),
		Request:    r,
	}, nil
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// SetReadDeadline stands for net/http's, which the gateway sets while it
// reads a body.
func (d *discard) SetReadDeadline(time.Time) error { return nil }

func benchServe(b *testing.B, body string, prov *memProvider) {
	benchServeWith(b, body, func(level slog.Level) *Gateway { return benchGateway(b, prov, level) },
		"openai", "alias", "oa", "gpt-upstream", "200")
}

// benchServeWith runs requests through ServeHTTP on the gateway newGateway
// makes, without and with the access log (at level Info the line is
// formatted, then discarded), and checks that they were counted under
// labels.
func benchServeWith(b *testing.B, body string, newGateway func(slog.Level) *Gateway, labels ...string) {
	for _, bc := range []struct {
		name  string
		level slog.Level
	}{{"log=off", slog.LevelWarn}, {"log=on", slog.LevelInfo}} {
		b.Run(bc.name, func(b *testing.B) { benchServeLog(b, body, newGateway(bc.level), labels) })
	}
}

func benchServeLog(b *testing.B, body string, g *Gateway, labels []string) {
	req, err := http.NewRequest("POST", "http://gateway/v1/chat/completions", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	w := &discard{h: http.Header{}}
	rd := strings.NewReader(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		g.ServeHTTP(w, req)
	}
	if n, _ := g.m.Requests.GetMetricWithLabelValues(labels...); n == nil {
		b.Fatal("no request counted")
	}
}

func BenchmarkServeHTTPFastPathJSON(b *testing.B) {
	benchServe(b, referenceBody, &memProvider{ctype: "application/json", body: []byte(openAIJSON("gpt-upstream"))})
}

func BenchmarkServeHTTPFastPathStream(b *testing.B) {
	body := strings.Replace(referenceBody, `"stream":false`, `"stream":true`, 1)
	benchServe(b, body, &memProvider{ctype: "text/event-stream", body: []byte(strings.Join(openAIEvents("gpt-upstream"), ""))})
}

// BenchmarkLoopback is a whole request over loopback TCP: a client, the
// gateway on a listener, an httptest provider. ns/op is the client's
// round trip; overhead-µs/op is the gateway's own measure of its share
// (the X-Strait-Overhead-Us header), which excludes the provider's time.
func BenchmarkLoopback(b *testing.B) {
	for _, bc := range []struct {
		name   string
		stream bool
	}{{"json", false}, {"stream", true}} {
		b.Run(bc.name, func(b *testing.B) {
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if bc.stream {
					writeEvents(w, openAIEvents("gpt-upstream"))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, openAIJSON("gpt-upstream"))
			}))
			defer provider.Close()
			g, err := New(Options{
				Providers: []Provider{{Name: "oa", Dialect: translate.OpenAI, BaseURL: provider.URL, APIKey: openAIKey}},
				Routes:    []Route{{Name: "alias", Match: "alias-?", Provider: "oa", Model: "gpt-upstream"}},
				Keys:      []Key{{Name: "bench", SHA256: HashKey(testKey)}},
			})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go g.Serve(ln, Listener{HTTP1: true})
			defer g.Shutdown(context.Background())
			body := referenceBody
			if bc.stream {
				body = strings.Replace(body, `"stream":false`, `"stream":true`, 1)
			}
			c := client(false)
			url := "http://" + ln.Addr().String() + "/v1/chat/completions"
			var overhead float64
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("POST", url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				v := resp.Header.Get(OverheadHeader)
				if bc.stream {
					v = resp.Trailer.Get(OverheadTrailer)
				}
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("overhead %q: %v", v, err)
				}
				overhead += us
				n++
			}
			b.ReportMetric(overhead/float64(n), "overhead-µs/op")
		})
	}
}

// BenchmarkScrub is the cost of looking for two provider keys in what the
// fast path relays: an ordinary stream event and JSON answer (scrubContent,
// what every response pays), and an error body (scrubError).
func BenchmarkScrub(b *testing.B) {
	r := newRedactor([]string{leakyOpenAIKey, leakyAnthropicKey})
	event := []byte(openAIEvents("gpt-4o")[1])
	answer := []byte(openAIJSON("gpt-4o"))
	errBody := []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000.\nPlease try again in 2s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	for _, bc := range []struct {
		name string
		f    func([]byte) []byte
		in   []byte
	}{
		{"event", r.scrubEvent, event},
		{"answer", r.scrubContent, answer},
		{"error", r.scrubError, errBody},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				if out := bc.f(bc.in); len(out) != len(bc.in) {
					b.Fatal("changed")
				}
			}
		})
	}
}

// BenchmarkServeHTTPTranslatedJSON is BenchmarkServeHTTPFastPathJSON's
// request sent to an Anthropic provider: the request and the answer are
// translated. Compare the two to see what translation adds on top of the
// fast path (the bound: within 20%).
func BenchmarkServeHTTPTranslatedJSON(b *testing.B) {
	prov := &memProvider{ctype: "application/json", body: []byte(anthropicJSON("claude-upstream"))}
	benchServeWith(b, referenceBody, func(level slog.Level) *Gateway {
		g, err := New(Options{
			Providers: []Provider{{Name: "an", Dialect: translate.Anthropic, BaseURL: "http://127.0.0.1:9", APIKey: "sk-ant-bench"}},
			Routes:    []Route{{Name: "alias", Match: "alias-?", Provider: "an", Model: "claude-upstream"}},
			Keys:      []Key{{Name: "bench", SHA256: HashKey(testKey)}},
			Log:       slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: level})),
		})
		if err != nil {
			b.Fatal(err)
		}
		g.providers["an"].rt = prov
		return g
	}, "openai", "alias", "an", "claude-upstream", "200")
}
