package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"golang.org/x/net/http2"

	"github.com/straitgw/strait/internal/llm/translate"
)

// h2Servers are the servers a listener's h2c may be served by: x/net's
// through net/http (the default), and Strait's own (StraitH2C). Every test
// here runs against both, with the same assertions.
var h2Servers = []struct {
	name   string
	strait bool
}{{"net-http", false}, {"strait", true}}

// xnetH2CClient is x/net's HTTP/2 client speaking h2c with prior
// knowledge.
func xnetH2CClient() *http.Client {
	return &http.Client{Timeout: waitLimit, Transport: &http2.Transport{
		AllowHTTP:          true,
		DisableCompression: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// Every dialect pair, JSON and stream, fast path and translated, over h2c
// from net/http's and x/net's clients, to a provider on HTTP/1.1 and h2c.
func TestH2CServersDialectPairs(t *testing.T) {
	for _, srv := range h2Servers {
		t.Run(srv.name, func(t *testing.T) {
			for _, providerH2C := range []bool{false, true} {
				h := newHarness(t, harnessConfig{providerH2C: providerH2C, listener: Listener{StraitH2C: srv.strait}})
				for _, cl := range []struct {
					name string
					c    *http.Client
				}{{"net-http-client", client(true)}, {"x-net-client", xnetH2CClient()}} {
					for _, cd := range dialects {
						for _, pd := range dialects {
							for _, stream := range []bool{false, true} {
								name := cl.name + "/" + string(cd) + "-to-" + string(pd)
								if providerH2C {
									name += "/provider-h2c"
								}
								if stream {
									name += "/stream"
								}
								t.Run(name, func(t *testing.T) {
									testPair(t, h, cl.c, cd, pd, stream, true, providerH2C)
								})
							}
						}
					}
				}
			}
		})
	}
}

// A listener with Strait's HTTP/2 server still serves HTTP/1.1, and the
// HTTP/1.1 upgrade to h2c, through net/http.
func TestH2CServersOtherProtocols(t *testing.T) {
	for _, srv := range h2Servers {
		t.Run(srv.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{listener: Listener{StraitH2C: srv.strait}})
			rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, endpoint(translate.OpenAI),
				requestBody(translate.OpenAI, "gpt-4o", false)))
			if rp.status != 200 || rp.protoMaj != 1 || rp.text != "Paris." {
				t.Errorf("HTTP/1.1: status %d proto %d text %q", rp.status, rp.protoMaj, rp.text)
			}
			status, body := upgradeH2C(t, strings.TrimPrefix(h.url, "http://"), requestBody(translate.OpenAI, "gpt-4o", false))
			if status != "200" || !strings.Contains(body, "Paris.") {
				t.Errorf("upgraded request: status %q body %q", status, body)
			}
		})
	}
}

// The official SDKs, on an h2c client, JSON and stream, on the fast path
// (their own dialect's provider) and translated (the other's).
func TestH2CServersSDKs(t *testing.T) {
	for _, srv := range h2Servers {
		t.Run(srv.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{providerH2C: true, listener: Listener{StraitH2C: srv.strait}})
			sdkRoundTrips(t, h, xnetH2CClient())
		})
	}
}

// sdkRoundTrips runs the official SDKs, on hc, JSON and stream, on the
// fast path (their own dialect's provider) and translated (the other's).
func sdkRoundTrips(t *testing.T, h *harness, hc *http.Client) {
	ctx := context.Background()
	oc := openai.NewClient(openaioption.WithBaseURL(h.url+"/v1/"), openaioption.WithAPIKey(testKey),
		openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(hc))
	ac := anthropic.NewClient(anthropicoption.WithBaseURL(h.url+"/"), anthropicoption.WithAPIKey(testKey),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(hc))
	for _, pd := range dialects {
		model := modelFor(pd)
		t.Run("openai-to-"+string(pd), func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("The capital of France?")}}
			resp, err := oc.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "Paris." {
				t.Errorf("JSON: %+v", resp.Choices)
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			st := oc.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Paris." || acc.Usage.PromptTokens != 12 {
				t.Errorf("stream: %+v usage %+v", acc.Choices, acc.Usage)
			}
		})
		t.Run("anthropic-to-"+string(pd), func(t *testing.T) {
			params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("The capital of France?"))}}
			msg, err := ac.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "Paris." {
				t.Errorf("JSON: %+v", msg.Content)
			}
			st := ac.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			for st.Next() {
				if err := acc.Accumulate(st.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text != "Paris." || acc.Usage.OutputTokens != 3 {
				t.Errorf("stream: %+v usage %+v", acc.Content, acc.Usage)
			}
		})
	}
}

// Shutdown drains either server's h2c streams in flight, aborts those
// that outlive its deadline, and closes the connections.
func TestH2CServersShutdown(t *testing.T) {
	for _, srv := range h2Servers {
		hc := harnessConfig{listener: Listener{StraitH2C: srv.strait}}
		t.Run(srv.name+"/drains a stream in flight", func(t *testing.T) {
			c := xnetH2CClient()
			shutdownDrains(t, hc, c, 2, func(h *harness) {
				// The connection got GOAWAY: the client does not use it again.
				if _, err := c.Get(h.url + "/v1/models"); err == nil {
					t.Error("a request after Shutdown was served")
				}
			})
		})
		t.Run(srv.name+"/aborts what outlives the deadline", func(t *testing.T) {
			shutdownAborts(t, hc, xnetH2CClient())
		})
	}
}

// Over h2c, on either server, a client that stalls inside its body gets
// 408 after body_read_timeout, and one whose body is past max_body_bytes
// gets 413; the provider hears of neither.
func TestH2CServersBodyLimits(t *testing.T) {
	for _, srv := range h2Servers {
		t.Run(srv.name, func(t *testing.T) {
			bodyLimits(t, Listener{StraitH2C: srv.strait}, xnetH2CClient())
		})
	}
}

// bodyLimits checks, on a gateway serving l, that a client c that stalls
// inside its body gets 408 after body_read_timeout, and one whose body is
// past max_body_bytes gets 413; the provider hears of neither.
func bodyLimits(t *testing.T, l Listener, c *http.Client) {
	t.Helper()
	h := newHarness(t, harnessConfig{listener: l, edit: func(o *Options) {
		o.BodyReadTimeout = 300 * time.Millisecond
		o.MaxBodyBytes = 4 << 10
	}})
	for _, d := range dialects {
		pr, pw := io.Pipe()
		go pw.Write([]byte(`{"model":"gpt-4o","messages":[`))
		req, _ := http.NewRequest(http.MethodPost, h.url+endpoint(d), pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testKey)
		if d == translate.Anthropic {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		rp := read(t, d, must(c.Do(req)))
		pw.Close()
		if rp.status != http.StatusRequestTimeout || rp.errType != "timeout_error" || !strings.Contains(rp.errMsg, "body_read_timeout") {
			t.Errorf("%s stalled body: status %d error %q %q; want 408 timeout_error naming body_read_timeout", d, rp.status, rp.errType, rp.errMsg)
		}
		big := requestBody(d, modelFor(d), false)
		big = strings.Replace(big, `"messages":[`, `"metadata":{"pad":"`+strings.Repeat("x", 8<<10)+`"},"messages":[`, 1)
		rp = read(t, d, h.post(t, c, d, endpoint(d), big))
		if rp.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s body past max_body_bytes: status %d, want 413", d, rp.status)
		}
	}
	if n := h.openai.count() + h.anthropic.count(); n != 0 {
		t.Errorf("the provider got %d requests", n)
	}
}
