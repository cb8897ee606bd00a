package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// oneByteReader hands out its bytes one Read at a time, as a network body
// may.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func TestReadUpToReadsTheWholeBodyWhateverItsAnnouncedSize(t *testing.T) {
	body := strings.Repeat("abcdefghij", 100) // 1,000 bytes
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"exact", 1000},
		{"unknown", -1},
		{"announced shorter than sent", 10},
		{"announced zero", 0},
		{"announced longer than sent", 5000},
	} {
		for _, wrap := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			func(r io.Reader) io.Reader { return oneByteReader{r} },
		} {
			got, err := readUpTo(wrap(strings.NewReader(body)), tc.size, 1<<20)
			if err != nil || string(got) != body {
				t.Errorf("%s: got %d bytes, err %v; want the %d bytes sent", tc.name, len(got), err, len(body))
			}
		}
	}
}

func TestReadUpToStopsAtMax(t *testing.T) {
	body := bytes.Repeat([]byte{'x'}, 5000)
	for _, size := range []int64{-1, 100, 5000} {
		got, err := readUpTo(bytes.NewReader(body), size, 1001)
		if err != nil || len(got) != 1001 {
			t.Errorf("size %d: got %d bytes, err %v; want max+1 = 1001 bytes, so the caller sees the body is too large", size, len(got), err)
		}
	}
}

func TestReadUpToMakesOneBufferForAnAnnouncedSize(t *testing.T) {
	body := strings.Repeat("y", 3000)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := readUpTo(strings.NewReader(body), int64(len(body)), 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	// The strings.Reader is the other allocation.
	if allocs > 2 {
		t.Errorf("%v allocations to read a body of announced size; want the buffer alone", allocs)
	}
}

// bothDialectsOptions routes claude-* to an Anthropic provider "an" and
// gpt-* to an OpenAI provider "oa", both at an address nothing serves,
// with one key, testKey.
func bothDialectsOptions() Options {
	return Options{
		Providers: []Provider{
			{Name: "an", Dialect: translate.Anthropic, BaseURL: "http://127.0.0.1:9", APIKey: "sk-ant-x"},
			{Name: "oa", Dialect: translate.OpenAI, BaseURL: "http://127.0.0.1:9", APIKey: "sk-oa-x"},
		},
		Routes: []Route{{Match: "claude-*", Provider: "an"}, {Match: "gpt-*", Provider: "oa"}},
		Keys:   []Key{{Name: "k", SHA256: HashKey(testKey)}},
	}
}

func TestTargetRequestHeaderSharedOnlyWhenNothingOfTheClientsGoesThrough(t *testing.T) {
	g, err := New(bothDialectsOptions())
	if err != nil {
		t.Fatal(err)
	}
	an, oa := g.match("claude-x").targets[0], g.match("gpt-x").targets[0]
	withVersion := http.Header{"Anthropic-Version": {"2023-01-01"}, "Anthropic-Beta": {"b1"}}

	custom := an.requestHeader(translate.Anthropic, withVersion, false)
	if custom.Get("Anthropic-Version") != "2023-01-01" || custom.Get("Anthropic-Beta") != "b1" {
		t.Fatalf("an Anthropic client's version and beta did not go through: %v", custom)
	}
	plain := an.requestHeader(translate.Anthropic, http.Header{}, false)
	if plain.Get("Anthropic-Version") != AnthropicVersion || plain.Get("Anthropic-Beta") != "" {
		t.Errorf("a request without version or beta got %v: a client's values leaked into the shared header", plain)
	}
	if an.requestHeader(translate.OpenAI, withVersion, false).Get("Anthropic-Version") != AnthropicVersion {
		t.Error("an OpenAI client's anthropic-version went to the provider")
	}
	if an.requestHeader(translate.Anthropic, http.Header{}, false)["X-Api-Key"][0] != "sk-ant-x" {
		t.Error("the shared header lost the provider's key")
	}
	for _, tg := range []*target{an, oa} {
		j, s := tg.requestHeader(translate.OpenAI, http.Header{}, false), tg.requestHeader(translate.OpenAI, http.Header{}, true)
		if j.Get("Accept") != "application/json" || s.Get("Accept") != "text/event-stream" {
			t.Errorf("%s: Accept %q for JSON and %q for a stream", tg.p.Name, j.Get("Accept"), s.Get("Accept"))
		}
	}
}

// closeRecorder is a request body that notes whether it was closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// checkClosedProvider answers like memProvider, after noting whether the
// client's body was closed by the time the provider was called.
type checkClosedProvider struct {
	memProvider
	body           *closeRecorder
	closedAtSend   bool
	providerCalled bool
}

func (p *checkClosedProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	p.providerCalled, p.closedAtSend = true, p.body.closed
	return p.memProvider.RoundTrip(r)
}

// Once the client's body is read, the gateway closes it before it waits for
// the provider: HTTP/2's server keeps a stream's last body chunk (1–16 KiB
// from a pool) until the handler reads end-of-stream or closes the body,
// and a request waits for its answer for seconds.
func TestClientBodyClosedBeforeTheProviderIsCalled(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
	}{{"announced size", int64(len(referenceBody))}, {"unknown size", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			body := &closeRecorder{Reader: strings.NewReader(referenceBody)}
			prov := &checkClosedProvider{memProvider: memProvider{ctype: "application/json", body: []byte(openAIJSON("gpt-upstream"))}, body: body}
			g := benchGateway(t, prov, slog.LevelWarn)
			req, err := http.NewRequest("POST", "http://gateway/v1/chat/completions", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Content-Type", "application/json")
			req.ContentLength, req.Body = tc.size, body
			w := &discard{h: http.Header{}}
			g.ServeHTTP(w, req)
			if !prov.providerCalled {
				t.Fatal("the provider was not called")
			}
			if !prov.closedAtSend {
				t.Error("the client's request body was still open when the provider was called")
			}
		})
	}
}

// heldProvider answers once released, holding every request until then, as
// a provider that takes seconds does.
type heldProvider struct {
	arrived sync.WaitGroup
	release chan struct{}
	body    []byte
}

func (p *heldProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	p.arrived.Done()
	<-p.release
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(p.body)), Request: r}, nil
}
