package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// The gateway on Strait's HTTP/1.1 server (StraitHTTP1): every dialect
// pair, JSON and stream, fast path and translated, from net/http's
// HTTP/1.1 client, to a provider on HTTP/1.1 and h2c.
func TestStraitHTTP1DialectPairs(t *testing.T) {
	for _, providerH2C := range []bool{false, true} {
		h := newHarness(t, harnessConfig{providerH2C: providerH2C, listener: Listener{StraitHTTP1: true}})
		c := client(false)
		for _, cd := range dialects {
			for _, pd := range dialects {
				for _, stream := range []bool{false, true} {
					name := string(cd) + "-to-" + string(pd)
					if providerH2C {
						name += "/provider-h2c"
					}
					if stream {
						name += "/stream"
					}
					t.Run(name, func(t *testing.T) {
						testPair(t, h, c, cd, pd, stream, false, providerH2C)
					})
				}
			}
		}
	}
}

// The official SDKs on their default (HTTP/1.1) clients.
func TestStraitHTTP1SDKs(t *testing.T) {
	h := newHarness(t, harnessConfig{listener: Listener{StraitHTTP1: true}})
	sdkRoundTrips(t, h, &http.Client{Timeout: waitLimit})
}

// Requests in sequence from one client share one connection.
func TestStraitHTTP1KeepAlive(t *testing.T) {
	h := newHarness(t, harnessConfig{listener: Listener{StraitHTTP1: true}})
	var dials atomic.Int32
	c := &http.Client{Timeout: waitLimit, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}}
	for i := range 10 {
		stream := i%2 == 1
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, endpoint(translate.OpenAI), requestBody(translate.OpenAI, "gpt-4o", stream)))
		if rp.status != 200 || rp.text != "Paris." || rp.protoMaj != 1 {
			t.Fatalf("request %d: status %d proto %d text %q", i, rp.status, rp.protoMaj, rp.text)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for 10 requests in sequence, want 1", n)
	}
}

// With Strait's HTTP/1.1 server, h2c with prior knowledge is still served,
// by whichever HTTP/2 server is chosen, and the HTTP/1.1 upgrade to h2c
// still hands the connection to x/net's (through Hijack).
func TestStraitHTTP1OtherProtocols(t *testing.T) {
	for _, srv := range h2Servers {
		t.Run("h2c by "+srv.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{listener: Listener{StraitHTTP1: true, StraitH2C: srv.strait}})
			for _, h2c := range []bool{false, true} {
				rp := read(t, translate.OpenAI, h.post(t, client(h2c), translate.OpenAI, endpoint(translate.OpenAI),
					requestBody(translate.OpenAI, "gpt-4o", false)))
				if want := map[bool]int{false: 1, true: 2}[h2c]; rp.status != 200 || rp.protoMaj != want || rp.text != "Paris." {
					t.Errorf("h2c %v: status %d proto %d (want %d) text %q", h2c, rp.status, rp.protoMaj, want, rp.text)
				}
			}
			status, body := upgradeH2C(t, strings.TrimPrefix(h.url, "http://"), requestBody(translate.OpenAI, "gpt-4o", false))
			if status != "200" || !strings.Contains(body, "Paris.") {
				t.Errorf("upgraded request: status %q body %q", status, body)
			}
		})
	}
	t.Run("http1 only", func(t *testing.T) {
		h := newHarness(t, harnessConfig{listener: Listener{HTTP1: true, StraitHTTP1: true}})
		rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, endpoint(translate.OpenAI), requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status != 200 || rp.text != "Paris." {
			t.Errorf("status %d text %q", rp.status, rp.text)
		}
		if resp, err := client(true).Post(h.url+endpoint(translate.OpenAI), "application/json", strings.NewReader("{}")); err == nil {
			resp.Body.Close()
			t.Errorf("an HTTP/1.1-only listener answered h2c with %d", resp.StatusCode)
		}
	})
}

// A client that leaves while its request waits for the provider, JSON or
// stream, has the provider request cancelled and the request counted as
// 499: Strait's server learns of it from the kernel, with no goroutine
// reading the client's socket.
func TestStraitHTTP1ClientLeaving(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{listener: Listener{StraitHTTP1: true}})
			cancelled := make(chan struct{}, 1)
			if stream {
				h.openai.setHandler(blockUntilCancelled(cancelled, openAIEvents("gpt-4o")[:2]))
			} else {
				h.openai.setHandler(blockUntilCancelled(cancelled, nil))
			}
			addr := strings.TrimPrefix(h.url, "http://")
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			body := requestBody(translate.OpenAI, "gpt-4o", stream)
			io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+testKey+
				"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			eventually(t, "the request to reach the provider", func() bool { return h.openai.count() == 1 })
			conn.Close()
			clientGone(t, h, cancelled)
		})
	}
}

func TestStraitHTTP1Shutdown(t *testing.T) {
	hc := harnessConfig{listener: Listener{StraitHTTP1: true}}
	t.Run("drains a stream in flight", func(t *testing.T) {
		shutdownDrains(t, hc, client(false), 1, nil)
	})
	t.Run("aborts what outlives the deadline", func(t *testing.T) {
		shutdownAborts(t, hc, client(false))
	})
}

// A client that stalls inside its body gets 408 after body_read_timeout,
// and one whose body is past max_body_bytes gets 413; the provider hears
// of neither.
func TestStraitHTTP1BodyLimits(t *testing.T) {
	bodyLimits(t, Listener{StraitHTTP1: true}, client(false))
}
