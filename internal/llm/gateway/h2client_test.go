package gateway

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/straitgw/strait/internal/llm/h2client"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// Providers on h2c go through h2client: the fast path (an OpenAI client
// to an OpenAI provider) and a translated one (an Anthropic client to the
// same provider), JSON and streamed, against the mock provider; a reset
// before the first event still falls back to the next target. With
// http2_client: net/http, the provider gets Go's client.
func TestH2CProviderClient(t *testing.T) {
	mock, url := startMock(t, mockllm.Options{})
	reset, resetURL := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindReset}})
	oa := oaProvider("oa", url)
	oa.HTTP = H2C
	bad := oaProvider("bad", resetURL)
	bad.HTTP = H2C
	std := oaProvider("std", url)
	std.HTTP, std.HTTP2Client = H2C, HTTP2NetHTTP
	h := newGW(t, []Provider{oa, bad, std}, []Route{
		{Match: "gpt-*", Targets: []Target{{Provider: "oa"}}},
		{Match: "claude-*", Targets: []Target{{Provider: "oa"}}},
		{Match: "flaky-*", Targets: []Target{{Provider: "bad"}, {Provider: "oa"}}},
		{Match: "std-*", Targets: []Target{{Provider: "std"}}},
	}, nil)
	if _, ok := h.g.providers["oa"].rt.(*h2client.Transport); !ok {
		t.Fatalf("an h2c provider's client is %T, want *h2client.Transport", h.g.providers["oa"].rt)
	}
	if _, ok := h.g.providers["std"].rt.(*http.Transport); !ok {
		t.Fatalf("with http2_client net/http, the client is %T, want *http.Transport", h.g.providers["std"].rt)
	}
	answersEach(t, h, mock, clientCases)
	if n := reset.Requests(); n != 2 {
		t.Errorf("the resetting provider got %d requests, want 2", n)
	}
	if n := mock.Requests(); n != 8 {
		t.Errorf("the provider got %d requests, want 8", n)
	}
}

// tlsMockProvider starts the mock provider on TLS (it offers h2 and
// http/1.1 by ALPN) and returns it with an OpenAI provider named "tls"
// that trusts its certificate and speaks v to it.
func tlsMockProvider(t *testing.T, v HTTPVersion) (*mockllm.Server, Provider) {
	t.Helper()
	cert := httptest.NewTLSServer(http.NotFoundHandler()) // for its test certificate
	cert.Close()
	mock := mockllm.New(mockllm.Options{})
	url, err := mock.StartTLS("127.0.0.1:0", &tls.Config{Certificates: cert.TLS.Certificates})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	p := oaProvider("tls", url)
	p.HTTP = v
	p.TLS = &tls.Config{RootCAs: cert.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	return mock, p
}

// A provider with http: h2 goes through h2client over TLS (ALPN h2), to
// the mock provider on TLS.
func TestH2ProviderClient(t *testing.T) {
	mock, p := tlsMockProvider(t, H2)
	h := newGW(t, []Provider{p}, []Route{{Match: "gpt-*", Targets: []Target{{Provider: "tls"}}}}, nil)
	if _, ok := h.g.providers["tls"].rt.(*h2client.Transport); !ok {
		t.Fatalf("an h2 provider's client is %T, want *h2client.Transport", h.g.providers["tls"].rt)
	}
	answersEach(t, h, mock, []clientCase{{translate.OpenAI, "gpt-4o"}})
}

// clientCase is a model asked for by a client of a dialect.
type clientCase struct {
	client translate.Dialect
	model  string
}

// clientCases are the requests the provider-client tests send, with their
// routes: the fast path, a translated one, a first target that resets
// and a second that answers, and a provider on net/http's client.
var clientCases = []clientCase{
	{translate.OpenAI, "gpt-4o"},      // fast path
	{translate.Anthropic, "claude-x"}, // translated
	{translate.OpenAI, "flaky-1"},     // reset on the first target, then the second
	{translate.Anthropic, "std-1"},    // net/http's client
}

// answersEach sends each case, JSON and streamed, through h and checks
// that mock's whole text comes back.
func answersEach(t *testing.T, h *gw, mock *mockllm.Server, cases []clientCase) {
	t.Helper()
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			rp := read(t, c.client, h.post(t, client(false), c.client, endpoint(c.client), requestBody(c.client, c.model, stream)))
			if rp.status != 200 || rp.text != mock.Text() || (stream && !rp.done) {
				t.Errorf("%s client, %s, stream %v: status %d done %v text %q error %q", c.client, c.model, stream, rp.status, rp.done, rp.text, rp.errMsg)
			}
		}
	}
}
