package gateway

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/straitgw/strait/internal/llm/h1client"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// A provider with http: h1 over https:// goes through h1client over TLS
// (ALPN http/1.1), to the mock provider on TLS, which offers h2 as well.
func TestH1ProviderClientTLS(t *testing.T) {
	mock, p := tlsMockProvider(t, HTTP1)
	h := newGW(t, []Provider{p}, []Route{{Match: "gpt-*", Targets: []Target{{Provider: "tls"}}}}, nil)
	if _, ok := h.g.providers["tls"].rt.(*h1client.Transport); !ok {
		t.Fatalf("an h1 provider's client over https is %T, want *h1client.Transport", h.g.providers["tls"].rt)
	}
	for range 2 {
		answersEach(t, h, mock, []clientCase{{translate.OpenAI, "gpt-4o"}})
	}
	if last, ok := mock.LastRequest(); !ok || last.Proto != "HTTP/1.1" {
		t.Errorf("the provider's last request came over %q, want HTTP/1.1", last.Proto)
	}
}

// Providers over HTTP/1.1 (http: h1, and http:// by default) go through
// h1client: the fast path and a translated request, JSON and streamed,
// against the mock provider, many times over one connection; a reset
// before the answer still falls back to the next target. With
// http1_client: net/http, and over https:// with ALPN to choose, the
// provider gets Go's client.
func TestH1ProviderClient(t *testing.T) {
	mock := mockllm.New(mockllm.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := &countingListener{Listener: ln}
	go mock.Serve(accepted)
	t.Cleanup(func() { mock.Close() })
	url := "http://" + ln.Addr().String()
	reset, resetURL := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindReset}})
	auto := oaProvider("auto", url)
	h1 := oaProvider("h1", url)
	h1.HTTP = HTTP1
	bad := oaProvider("bad", resetURL)
	std := oaProvider("std", url)
	std.HTTP1Client = HTTP1NetHTTP
	tlsAuto := oaProvider("tls", "https://127.0.0.1:1")
	h := newGW(t, []Provider{auto, h1, bad, std, tlsAuto}, []Route{
		{Match: "gpt-*", Targets: []Target{{Provider: "auto"}}},
		{Match: "claude-*", Targets: []Target{{Provider: "h1"}}},
		{Match: "flaky-*", Targets: []Target{{Provider: "bad"}, {Provider: "auto"}}},
		{Match: "std-*", Targets: []Target{{Provider: "std"}}},
	}, nil)
	for name, want := range map[string]string{"auto": "h1client", "h1": "h1client", "bad": "h1client", "std": "net/http", "tls": "net/http"} {
		switch rt := h.g.providers[name].rt.(type) {
		case *h1client.Transport:
			if want != "h1client" {
				t.Errorf("provider %s: client %T, want %s's", name, rt, want)
			}
		case *http.Transport:
			if want != "net/http" {
				t.Errorf("provider %s: client %T, want %s", name, rt, want)
			}
		default:
			t.Errorf("provider %s: client %T", name, rt)
		}
	}
	for range 3 {
		answersEach(t, h, mock, clientCases)
	}
	if n := reset.Requests(); n != 6 {
		t.Errorf("the resetting provider got %d requests, want 6", n)
	}
	if n := mock.Requests(); n != 24 {
		t.Errorf("the provider got %d requests, want 24", n)
	}
	// One at a time, each client's requests share one connection: auto's
	// (the fast path's and the fallback's), h1's and net/http's.
	if n := accepted.n.Load(); n != 3 {
		t.Errorf("the provider accepted %d connections, want 3", n)
	}
}

type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
