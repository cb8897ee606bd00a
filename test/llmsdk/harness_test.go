package llmsdk_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// The key the SDKs present to the gateway, and the keys the gateway holds
// for its providers. They differ so that a test can tell which one a
// provider was sent.
const gatewayKey = "strait-sdk-test-gateway-key"

var providerKeys = map[translate.Dialect]string{
	translate.OpenAI:    "sk-provider-openai-for-sdk-tests",
	translate.Anthropic: "sk-ant-provider-for-sdk-tests",
}

// Bounds on every exchange, far above what a request on 127.0.0.1 takes,
// so that a hang fails the test instead of stalling the run.
const (
	clientTimeout = 20 * time.Second
	testTimeout   = 30 * time.Second
)

var dialects = []translate.Dialect{translate.OpenAI, translate.Anthropic}

// pair is a client dialect (the SDK in use) and the dialect of the provider
// behind the gateway.
type pair struct{ client, provider translate.Dialect }

func (p pair) String() string { return string(p.client) + "_to_" + string(p.provider) }

// translated reports whether the gateway translates between the two, as
// opposed to taking the fast path.
func (p pair) translated() bool { return p.client != p.provider }

// pairs are all four client/provider pairs.
var pairs = func() []pair {
	var out []pair
	for _, c := range dialects {
		for _, p := range dialects {
			out = append(out, pair{c, p})
		}
	}
	return out
}()

// proto is an HTTP version on one hop: client to gateway, or gateway to
// provider.
type proto string

const (
	h1  proto = "h1"
	h2c proto = "h2c"
)

var protos = []proto{h1, h2c}

// wire is the protocol as net/http names it in Request.Proto and
// Response.Proto.
func (p proto) wire() string {
	if p == h2c {
		return "HTTP/2.0"
	}
	return "HTTP/1.1"
}

// provider is the gateway's setting that makes it speak p to a provider.
func (p proto) provider() gateway.HTTPVersion {
	if p == h2c {
		return gateway.H2C
	}
	return gateway.HTTP1
}

// recorder is a client transport that remembers the protocol of every
// response, so that a test can tell which HTTP version the SDK and the
// gateway actually spoke.
type recorder struct {
	rt     http.RoundTripper
	mu     sync.Mutex
	protos []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.protos = append(r.protos, resp.Proto)
		r.mu.Unlock()
	}
	return resp, err
}

// check fails t unless every response so far came over want, and there was
// at least one.
func (r *recorder) check(t *testing.T, want proto) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.protos) == 0 {
		t.Errorf("the SDK received no response over any protocol, want %s", want.wire())
	}
	for i, got := range r.protos {
		if got != want.wire() {
			t.Errorf("response %d from the gateway came over %s, want %s", i, got, want.wire())
		}
	}
}

// newClient returns an http.Client for the SDKs that speaks only p: HTTP/1.1,
// or HTTP/2 with prior knowledge over cleartext (h2c).
func newClient(t *testing.T, p proto) (*http.Client, *recorder) {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols), MaxIdleConnsPerHost: 4}
	if p == h2c {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	rec := &recorder{rt: tr}
	return &http.Client{Transport: rec, Timeout: clientTimeout}, rec
}

// logBuffer keeps the gateway's log, to show it when a test fails.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startGateway serves a gateway with the given providers and routes on a
// port of 127.0.0.1, HTTP/1.1 and h2c on the one listener, accepting
// gatewayKey. It returns the base URL, http://127.0.0.1:port. The gateway
// is shut down, and its log shown if the test failed, when t ends.
func startGateway(t *testing.T, providers []gateway.Provider, routes []gateway.Route) string {
	t.Helper()
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	g, err := gateway.New(gateway.Options{
		Providers: providers,
		Routes:    routes,
		Keys:      []gateway.Key{{Name: "sdk-tests", SHA256: gateway.HashKey(gatewayKey)}},
		Log:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln, gateway.Listener{}) }()
	// Serve registers its server before it accepts; shutting down before
	// that would leave Serve to fail on its own.
	for i := 0; i < 2000 && g.Ready() != nil; i++ {
		time.Sleep(time.Millisecond)
	}
	if err := g.Ready(); err != nil {
		t.Fatalf("the gateway is not ready after 2s: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("gateway Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// upstream is a provider entry for the gateway: a provider of dialect d at
// url, spoken to over p, with its own key.
func upstream(d translate.Dialect, url string, p proto) gateway.Provider {
	return gateway.Provider{
		Name:            string(d) + "-upstream",
		Dialect:         d,
		BaseURL:         url,
		APIKey:          providerKeys[d],
		HTTP:            p.provider(),
		ResponseTimeout: clientTimeout,
		RequestTimeout:  clientTimeout,
	}
}

// routeAll sends every model to provider p.
func routeAll(p gateway.Provider) []gateway.Route {
	return []gateway.Route{{Match: "*", Provider: p.Name}}
}

// startMock starts the mock provider on a port of 127.0.0.1 (HTTP/1.1 and
// h2c) and returns it with its base URL.
func startMock(t *testing.T, opt mockllm.Options) (*mockllm.Server, string) {
	t.Helper()
	s := mockllm.New(opt)
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// sdk holds one client of each SDK pointed at a gateway, with the gateway
// key, no retries (a retried error would hide what the gateway sent), and
// the given http.Client.
type sdk struct {
	openai    openai.Client
	anthropic anthropic.Client
}

func newSDK(gatewayURL, key string, hc *http.Client) sdk {
	return sdk{
		openai: openai.NewClient(
			openaioption.WithBaseURL(gatewayURL+"/v1/"),
			openaioption.WithAPIKey(key),
			openaioption.WithHTTPClient(hc),
			openaioption.WithMaxRetries(0),
		),
		anthropic: anthropic.NewClient(
			anthropicoption.WithBaseURL(gatewayURL+"/"),
			anthropicoption.WithAPIKey(key),
			anthropicoption.WithHTTPClient(hc),
			anthropicoption.WithMaxRetries(0),
		),
	}
}

// testContext bounds one test's exchanges.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// mockTokens is the mock provider's token estimate for n bytes of text: a
// quarter, rounded up, at least 1 (see the mockllm package).
func mockTokens(n int) int64 { return int64(max(1, (n+3)/4)) }

// subtestName names a subtest after its parts.
func subtestName(parts ...any) string {
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}
