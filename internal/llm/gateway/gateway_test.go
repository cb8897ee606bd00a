package gateway

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

var dialects = []translate.Dialect{translate.OpenAI, translate.Anthropic}

// modelFor returns a model name routed to a provider of dialect d.
func modelFor(d translate.Dialect) string {
	if d == translate.OpenAI {
		return "gpt-4o-mini"
	}
	return "claude-haiku"
}

// TestDialectPairs runs every client dialect against every provider
// dialect, JSON and streaming, over HTTP/1.1 and h2c on both sides.
func TestDialectPairs(t *testing.T) {
	for _, wire := range []struct {
		name                  string
		clientH2C, providerH2 bool
	}{
		{"h1-h1", false, false},
		{"h2c-h2c", true, true},
		{"h1-h2c", false, true},
		{"h2c-h1", true, false},
	} {
		t.Run(wire.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{providerH2C: wire.providerH2})
			c := client(wire.clientH2C)
			for _, cd := range dialects {
				for _, pd := range dialects {
					for _, stream := range []bool{false, true} {
						name := string(cd) + "-to-" + string(pd)
						if stream {
							name += "-stream"
						}
						t.Run(name, func(t *testing.T) {
							testPair(t, h, c, cd, pd, stream, wire.clientH2C, wire.providerH2)
						})
					}
				}
			}
		})
	}
}

func testPair(t *testing.T, h *harness, hc *http.Client, cd, pd translate.Dialect, stream, clientH2C, providerH2C bool) {
	t.Helper()
	model := modelFor(pd)
	resp := h.post(t, hc, cd, endpoint(cd), requestBody(cd, model, stream))
	rp := read(t, cd, resp)
	if rp.status != 200 {
		t.Fatalf("status %d, body %s", rp.status, rp.raw)
	}
	if want := 1; clientH2C && rp.protoMaj != 2 || !clientH2C && rp.protoMaj != want {
		t.Errorf("client got HTTP/%d", rp.protoMaj)
	}
	if rp.text != "Paris." || !rp.done || rp.errMsg != "" {
		t.Errorf("text %q done %v error %q; want \"Paris.\", done, no error\n%s", rp.text, rp.done, rp.errMsg, rp.raw)
	}
	if rp.in != 12 || rp.out != 3 {
		t.Errorf("usage in %d out %d, want 12 and 3\n%s", rp.in, rp.out, rp.raw)
	}
	if stream && rp.header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream Content-Type %q", rp.header.Get("Content-Type"))
	}
	if !stream && rp.header.Get("Request-Id") != "req-from-provider" {
		t.Errorf("the provider's request-id was not passed back: %v", rp.header)
	}
	if rp.header.Get(OverheadHeader) == "" {
		t.Errorf("no %s header", OverheadHeader)
	}
	if stream && rp.trailer.Get(OverheadTrailer) == "" {
		t.Errorf("no %s trailer on a stream (trailers %v)", OverheadTrailer, rp.trailer)
	}

	fp := h.openai
	if pd == translate.Anthropic {
		fp = h.anthropic
	}
	got := fp.last(t)
	if got.path != endpoint(pd) {
		t.Errorf("provider got path %s, want %s", got.path, endpoint(pd))
	}
	if want := 1; providerH2C && got.proto != 2 || !providerH2C && got.proto != want {
		t.Errorf("provider got HTTP/%d", got.proto)
	}
	checkProviderCredentials(t, pd, got)
	if pd == translate.Anthropic && got.header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("anthropic-version %q, want 2023-06-01", got.header.Get("Anthropic-Version"))
	}
	if !strings.Contains(string(got.body), `"model":"`+model+`"`) {
		t.Errorf("provider body does not name model %s: %s", model, got.body)
	}
}

// checkProviderCredentials checks that a provider saw its own key, in its
// own header, and never the gateway key.
func checkProviderCredentials(t *testing.T, pd translate.Dialect, got seen) {
	t.Helper()
	for k, vs := range got.header {
		for _, v := range vs {
			if strings.Contains(v, testKey) {
				t.Errorf("the provider saw the client's gateway key in %s", k)
			}
		}
	}
	if pd == translate.OpenAI {
		if a := got.header.Get("Authorization"); a != "Bearer "+openAIKey {
			t.Errorf("OpenAI provider Authorization %q, want its own key", a)
		}
		if got.header.Get("X-Api-Key") != "" {
			t.Error("OpenAI provider got an x-api-key")
		}
	} else {
		if k := got.header.Get("X-Api-Key"); k != anthropicKey {
			t.Errorf("Anthropic provider x-api-key %q, want its own key", k)
		}
		if got.header.Get("Authorization") != "" {
			t.Error("Anthropic provider got an Authorization header")
		}
	}
}

// setAll sets what Header.Set would, for the keys the gateway gives it.
func TestSetAllIsSet(t *testing.T) {
	kv := []string{"Content-Type", "application/json", "Content-Length", "12", OverheadHeader, "7", "Request-Id", "r", "X-Request-Id", "r"}
	got, want := http.Header{"Content-Type": {"text/plain"}}, http.Header{"Content-Type": {"text/plain"}}
	setAll(got, kv...)
	for i := 0; i < len(kv); i += 2 {
		want.Set(kv[i], kv[i+1])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("setAll made %v, Set %v", got, want)
	}
	got.Add("Content-Length", "13") // each value is its own: appending to one leaves the next alone
	if got.Get(OverheadHeader) != "7" {
		t.Errorf("appending to one value changed the next: %v", got)
	}
}
