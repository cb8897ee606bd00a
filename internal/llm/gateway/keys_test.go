package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/limits/redistest"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// keyed builds a gateway in front of one mock serving both dialects, with
// the test key limited by l and prices for every model.
func keyed(t *testing.T, mock string, l limits.Limits, edit func(*Options)) *gw {
	t.Helper()
	return newGW(t, []Provider{oaProvider("oa", mock), anProvider("an", mock)}, []Route{
		{Match: "gpt-*", Provider: "oa"},
		{Match: "claude-*", Provider: "an"},
	}, func(o *Options) {
		o.Keys = []Key{{Name: "tester", SHA256: HashKey(testKey), Limits: l}}
		o.Prices = []Price{{Model: "gpt-*", Input: 2.5, Output: 10}, {Model: "claude-*", Input: 3, Output: 15}}
		if edit != nil {
			edit(o)
		}
	})
}

// keysView reads GET /llm/keys.
func keysView(t *testing.T, g *Gateway) map[string]keyView {
	t.Helper()
	rec := httptest.NewRecorder()
	g.KeysHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/llm/keys", nil))
	var out struct{ Keys []keyView }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("GET /llm/keys: %v\n%s", err, rec.Body)
	}
	m := map[string]keyView{}
	for _, k := range out.Keys {
		m[k.Name] = k
	}
	return m
}

// Requests over the key's requests per minute get the dialect's 429 with
// retry-after, and never reach the provider.
func TestRPMLimit(t *testing.T) {
	mock, url := startMock(t, mockllm.Options{})
	h := keyed(t, url, limits.Limits{RPM: 3}, nil)
	c := client(false)
	for i := range 5 {
		d := translate.Dialect([]translate.Dialect{translate.OpenAI, translate.Anthropic}[i%2])
		model := map[translate.Dialect]string{translate.OpenAI: "gpt-4o", translate.Anthropic: "claude-x"}[d]
		rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, model, false)))
		if i < 3 {
			if rp.status != 200 {
				t.Fatalf("request %d: status %d, want 200", i, rp.status)
			}
			continue
		}
		if rp.status != 429 || rp.errType != "rate_limit_error" || rp.header.Get("Retry-After") == "" || rp.header.Get("Retry-After-Ms") == "" {
			t.Errorf("request %d (%s): status %d type %q retry-after %q; want 429 rate_limit_error with retry-after", i, d, rp.status, rp.errType, rp.header.Get("Retry-After"))
		}
	}
	if mock.Requests() != 3 {
		t.Errorf("the provider got %d requests, want 3", mock.Requests())
	}
	if v := h.metricValue(t, "strait_llm_limit_refusals_total", "key", "tester", "limit", "rpm"); v != 2 {
		t.Errorf("rpm refusals: %v, want 2", v)
	}
}

// A request whose estimate (input and max_tokens) would pass the tokens
// per minute is refused before the provider sees it; after an answer,
// the real usage is what counts.
func TestTPMLimit(t *testing.T) {
	mock, url := startMock(t, mockllm.Options{})
	h := keyed(t, url, limits.Limits{TPM: 1000}, nil)
	c := client(false)
	big := `{"model":"claude-x","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`
	rp := read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", big))
	if rp.status != 429 || mock.Requests() != 0 {
		t.Fatalf("max_tokens over the tpm: status %d, provider requests %d; want 429 and 0", rp.status, mock.Requests())
	}
	// max_tokens 400 each: reserved 400+, but each uses far fewer, so more
	// than two fit in the minute once settled.
	small := `{"model":"claude-x","max_tokens":400,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 4 {
		if rp := read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", small)); rp.status != 200 {
			t.Fatalf("request %d: status %d %s", i, rp.status, rp.errMsg)
		}
	}
	in, out := mock.Billed()
	if w := keysView(t, h.g)["tester"].Window; w == nil || w.Tokens != in+out {
		t.Errorf("window %+v, want %d tokens (the provider's usage)", w, in+out)
	}
}

// cost is what the mock billed at the test's prices, in nanodollars.
func cost(in, out int64, pin, pout float64) int64 {
	return in*limits.Nanodollars(pin)/1e6 + out*limits.Nanodollars(pout)/1e6
}

// The spend settled for a key is exactly what the provider billed, at
// the configured prices: JSON, streams of both dialects, and streams the
// client cancelled (the gateway reads them to their end for the usage).
func TestBudgetSettledExactly(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			mock, url := startMock(t, mockllm.Options{Latency: 100 * time.Millisecond, Deltas: 20})
			var edit func(*Options)
			if store == "redis" {
				srv := redistest.Start(t)
				edit = func(o *Options) {
					st, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Timeout: 2 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					o.Limits.Store = st
				}
			}
			h := keyed(t, url, limits.Limits{Budget: limits.Nanodollars(100), Period: limits.Day}, edit)
			c := client(false)
			var cost0, in0, out0 int64
			pin, pout := 3.0, 15.0
			check := func(what string) {
				t.Helper()
				in, out := mock.Billed()
				want := cost0 + cost(in-in0, out-out0, pin, pout)
				eventually(t, what+" settled", func() bool {
					w := keysView(t, h.g)["tester"].Window
					return w != nil && limits.Nanodollars(w.SpentDollars) == want
				})
			}
			// Claude (Anthropic provider) JSON and streams, both clients.
			for _, d := range []translate.Dialect{translate.Anthropic, translate.OpenAI} {
				for _, stream := range []bool{false, true} {
					rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, "claude-x", stream)))
					if rp.status != 200 || !rp.done {
						t.Fatalf("%s stream=%v: status %d done %v", d, stream, rp.status, rp.done)
					}
				}
			}
			check("JSON and streams")
			// Cancelled streams from an OpenAI provider, which reports
			// usage only at the end: the client reads one event and
			// leaves.
			in0, out0 = mock.Billed()
			cost0 = cost(in0, out0, pin, pout)
			pin, pout = 2.5, 10
			for _, d := range []translate.Dialect{translate.Anthropic, translate.OpenAI} {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+endpoint(d), strings.NewReader(requestBody(d, "gpt-4o", true)))
				req.Header.Set("X-Api-Key", testKey)
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("Anthropic-Version", "2023-06-01")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				bufio.NewReader(resp.Body).ReadString('\n')
				cancel()
				resp.Body.Close()
			}
			eventually(t, "the cancelled streams to end at the provider", func() bool {
				return mock.Count(mockllm.OpenAI, true, 200) == 2
			})
			check("cancelled streams")
			in, out := mock.Billed()
			if in == 0 || out == 0 {
				t.Fatal("the mock billed nothing")
			}
		})
	}
}

// A request that could exceed the budget is refused before it reaches
// the provider, with a 429 saying when the budget renews.
func TestBudgetRefusesBeforeProvider(t *testing.T) {
	mock, url := startMock(t, mockllm.Options{})
	// max_tokens 100 at $15 per million output tokens: $0.0015 at most;
	// a budget of $0.001 cannot take it.
	h := keyed(t, url, limits.Limits{Budget: limits.Nanodollars(0.001), Period: limits.Month}, nil)
	rp := read(t, translate.Anthropic, h.post(t, client(false), translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", false)))
	if rp.status != 429 || !strings.Contains(rp.errMsg, "budget") || rp.header.Get("Retry-After") == "" {
		t.Errorf("status %d message %q retry-after %q; want 429 about the budget", rp.status, rp.errMsg, rp.header.Get("Retry-After"))
	}
	if mock.Requests() != 0 {
		t.Errorf("the provider got %d requests", mock.Requests())
	}
}

// A key restricted to some models gets 403 for the others.
func TestKeyModels(t *testing.T) {
	_, url := startMock(t, mockllm.Options{})
	h := keyed(t, url, limits.Limits{}, func(o *Options) { o.Keys[0].Models = []string{"claude-*"} })
	c := client(false)
	if rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false))); rp.status != 403 || rp.errType != "permission_error" {
		t.Errorf("gpt-4o: status %d type %q, want 403 permission_error", rp.status, rp.errType)
	}
	if rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "claude-x", false))); rp.status != 200 {
		t.Errorf("claude-x: status %d, want 200", rp.status)
	}
}

// Two gateway instances sharing one Redis hold one limit between them.
func TestTwoInstancesShareARedisLimit(t *testing.T) {
	srv := redistest.Start(t)
	mock, url := startMock(t, mockllm.Options{})
	store := func(o *Options) {
		st, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o.Limits.Store = st
	}
	a := keyed(t, url, limits.Limits{RPM: 10}, store)
	b := keyed(t, url, limits.Limits{RPM: 10}, store)
	c := client(false)
	ok := 0
	for i := range 20 {
		h := a
		if i%2 == 1 {
			h = b
		}
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status == 200 {
			ok++
		} else if rp.status != 429 {
			t.Fatalf("status %d", rp.status)
		}
	}
	// The requests may straddle a minute boundary: then up to twice.
	if ok != 10 && (ok < 10 || ok > 20 || time.Now().Second() > 5) {
		t.Errorf("%d requests admitted by two instances sharing rpm 10, want 10", ok)
	}
	if int(mock.Requests()) != ok {
		t.Errorf("the provider got %d requests, want %d", mock.Requests(), ok)
	}
}

// When Redis is unreachable, rate limits fail open and budgets fail
// closed by default, and each is counted.
func TestRedisUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	_, url := startMock(t, mockllm.Options{})
	st, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := keyed(t, url, limits.Limits{}, func(o *Options) {
		o.Limits.Store = st
		o.Keys = []Key{
			{Name: "rated", SHA256: HashKey(testKey), Limits: limits.Limits{RPM: 100}},
			{Name: "budgeted", SHA256: HashKey("budget-key"), Limits: limits.Limits{Budget: limits.Nanodollars(10), Period: limits.Day}},
		}
	})
	srv.Stop()
	c := client(false)
	if rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false))); rp.status != 200 {
		t.Errorf("rate-limited key with Redis down: status %d, want 200 (fail_open)", rp.status)
	}
	rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false), "Authorization", "Bearer budget-key"))
	if rp.status != 503 || rp.header.Get("Retry-After") == "" {
		t.Errorf("budgeted key with Redis down: status %d, want 503 with retry-after (fail_closed)", rp.status)
	}
	if h.metricValue(t, "strait_llm_limit_store_errors_total", "outcome", "allowed") != 1 || h.metricValue(t, "strait_llm_limit_store_errors_total", "outcome", "refused") != 1 {
		t.Error("want one allowed and one refused store error counted")
	}
}

func TestAskStreamUsage(t *testing.T) {
	for _, c := range []struct {
		in, want string
		changed  bool
	}{
		{`{"model":"m","stream":true}`, `{"stream_options":{"include_usage":true},"model":"m","stream":true}`, true},
		{` { "model":"m","stream_options":null}`, ` { "model":"m","stream_options":{"include_usage":true}}`, true},
		{`{"stream_options": { } ,"model":"m"}`, `{"stream_options": {"include_usage":true} ,"model":"m"}`, true},
		{`{"stream_options":{"include_usage":true}}`, `{"stream_options":{"include_usage":true}}`, false},
		{`{"stream_options":{"include_obfuscation":false}}`, `{"stream_options":{"include_obfuscation":false}}`, false},
	} {
		got, changed := askStreamUsage([]byte(c.in))
		if string(got) != c.want || changed != c.changed {
			t.Errorf("askStreamUsage(%s) = %s, %v; want %s, %v", c.in, got, changed, c.want, c.changed)
		}
	}
}

// An OpenAI client's stream that did not ask for usage is still counted
// exactly: the gateway asks the provider for the usage chunk, reads it,
// and does not pass it on.
func TestStreamUsageAskedForTheKey(t *testing.T) {
	mock, url := startMock(t, mockllm.Options{})
	h := keyed(t, url, limits.Limits{TPM: 1 << 40}, nil)
	body := `{"model":"gpt-4o","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Capital of France?"}]}`
	rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", body))
	if rp.status != 200 || !rp.done {
		t.Fatalf("status %d done %v", rp.status, rp.done)
	}
	if strings.Contains(string(rp.raw), `"choices":[]`) || strings.Contains(string(rp.raw), `"prompt_tokens"`) {
		t.Errorf("the client got a usage chunk it did not ask for:\n%s", rp.raw)
	}
	in, out := mock.Billed()
	if in == 0 || out == 0 {
		t.Fatal("the provider billed nothing: it was not asked for usage")
	}
	eventually(t, "the usage settled", func() bool {
		w := keysView(t, h.g)["tester"].Window
		return w != nil && w.Tokens == in+out
	})
}
