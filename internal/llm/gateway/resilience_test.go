package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
	"github.com/straitgw/strait/internal/testkit"
)

// startMock starts a mock provider (both dialects) with opt.
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

// closedURL is the URL of a loopback port nothing listens on: connections
// are refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// gw is a gateway on a loopback listener with the given providers and
// routes, and the test key.
type gw struct {
	*harness
}

func newGW(t *testing.T, providers []Provider, routes []Route, edit func(*Options)) *gw {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &testkit.SyncBuffer{}}
	opts := Options{
		Providers: providers,
		Routes:    routes,
		Keys:      []Key{{Name: "tester", SHA256: HashKey(testKey)}},
		Log:       slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:   NewMetrics(h.reg),
	}
	if edit != nil {
		edit(&opts)
	}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln, Listener{})
	h.url = "http://" + ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		g.Shutdown(ctx)
		if t.Failed() {
			t.Logf("gateway log:\n%s", h.logs.String())
		}
	})
	waitReady(t, g)
	return &gw{h}
}

func oaProvider(name, url string) Provider {
	return Provider{Name: name, Dialect: translate.OpenAI, BaseURL: url, ResponseTimeout: providerTimeout}
}

func anProvider(name, url string) Provider {
	return Provider{Name: name, Dialect: translate.Anthropic, BaseURL: url, ResponseTimeout: providerTimeout}
}

func (h *gw) metricValue(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, _ := h.metric(t, name, labels...)
	return v
}

// A target that fails with a status in the retry list falls back to the
// next target, of the other dialect, and the answer says which answered
// after how many attempts: JSON and streams, both client dialects. A 429
// falls back too.
func TestFallbackToOtherDialect(t *testing.T) {
	for _, status := range []string{"503", "429"} {
		t.Run(status, func(t *testing.T) {
			bad, badURL := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.ErrorKind(status)}})
			good, goodURL := startMock(t, mockllm.Options{})
			h := newGW(t, []Provider{oaProvider("oa", badURL), anProvider("an", goodURL)}, []Route{{
				Match:   "gpt-*",
				Targets: []Target{{Provider: "oa"}, {Provider: "an", Model: "claude-haiku-4-5"}},
			}}, nil)
			c := client(false)
			for _, stream := range []bool{false, true} {
				rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", stream)))
				if rp.status != 200 || !rp.done || rp.text != good.Text() {
					t.Fatalf("stream=%v: status %d done %v text %q err %q", stream, rp.status, rp.done, rp.text, rp.errMsg)
				}
				if got := rp.header.Get(TargetHeader); got != "an/claude-haiku-4-5" {
					t.Errorf("%s = %q, want the Anthropic target", TargetHeader, got)
				}
				// A 429's retry-after (the mock's is 1 s) keeps the target
				// out of rotation: the second request goes straight to the
				// fallback.
				want := "2"
				if status == "429" && stream {
					want = "1"
				}
				if got := rp.header.Get(AttemptsHeader); got != want {
					t.Errorf("%s = %q, want %s", AttemptsHeader, got, want)
				}
			}
			wantBad := 2.0
			if status == "429" {
				wantBad = 1
			}
			if n := bad.Count(mockllm.OpenAI, false, atoi(status)) + bad.Count(mockllm.OpenAI, true, atoi(status)); float64(n) != wantBad {
				t.Errorf("the failing target answered %d requests with %s, want %v", n, status, wantBad)
			}
			if n := good.Count(mockllm.Anthropic, false, 200) + good.Count(mockllm.Anthropic, true, 200); n != 2 {
				t.Errorf("the fallback answered %d requests, want 2", n)
			}
			if v := h.metricValue(t, "strait_llm_fallbacks_total", "route", "gpt-*", "target", "oa"); v != wantBad {
				t.Errorf("fallbacks from oa: %v, want %v", v, wantBad)
			}
			if v := h.metricValue(t, "strait_llm_attempts_total", "target", "oa", "result", "retryable"); v != wantBad {
				t.Errorf("retryable attempts on oa: %v, want %v", v, wantBad)
			}
		})
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// Only the listed failures are retried: a status not in retry.on goes to
// the client at once, with no second attempt.
func TestRetryOnlyListedStatuses(t *testing.T) {
	bad, badURL := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{"500"}})
	good, goodURL := startMock(t, mockllm.Options{})
	h := newGW(t, []Provider{oaProvider("a", badURL), oaProvider("b", goodURL)}, []Route{{
		Match:   "gpt-*",
		Targets: []Target{{Provider: "a"}, {Provider: "b"}},
		Retry:   Retry{Attempts: 3, OnStatus: []int{429}},
	}}, nil)
	rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if rp.status != 500 {
		t.Errorf("status %d, want the provider's 500", rp.status)
	}
	if bad.Requests() != 1 || good.Requests() != 0 {
		t.Errorf("requests: failing target %d, other %d; want 1 and 0 (500 is not in retry.on)", bad.Requests(), good.Requests())
	}
	if got := rp.header.Get(AttemptsHeader); got != "1" {
		t.Errorf("%s = %q, want 1", AttemptsHeader, got)
	}
}

// flaky answers 429 with retry-after-ms to its first n requests, then
// as the fake provider does, and records when each request came.
type flaky struct {
	fp    *fakeProvider
	n     int
	mu    sync.Mutex
	times []time.Time
}

func newFlaky(t *testing.T, d translate.Dialect, n int, status int, retryAfterMS string) *flaky {
	f := &flaky{fp: newFakeProvider(t, d, false), n: n}
	f.fp.setHandler(func(w http.ResponseWriter, r *http.Request, body []byte) {
		f.mu.Lock()
		f.times = append(f.times, time.Now())
		fail := len(f.times) <= f.n
		f.mu.Unlock()
		if fail {
			if retryAfterMS != "" {
				w.Header().Set("Retry-After-Ms", retryAfterMS)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
			return
		}
		f.fp.script(w, r, body)
	})
	return f
}

// A retry waits at least what the provider's retry-after-ms says, and the
// attempts are counted in the header and the metrics.
func TestRetryHonoursRetryAfter(t *testing.T) {
	f := newFlaky(t, translate.OpenAI, 2, 429, "80")
	h := newGW(t, []Provider{oaProvider("oa", f.fp.srv.URL)}, []Route{{
		Match: "gpt-*", Provider: "oa",
		Retry: Retry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Second},
	}}, nil)
	rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if rp.status != 200 || rp.header.Get(AttemptsHeader) != "3" {
		t.Fatalf("status %d attempts %q, want 200 after 3", rp.status, rp.header.Get(AttemptsHeader))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 1; i < len(f.times); i++ {
		if gap := f.times[i].Sub(f.times[i-1]); gap < 80*time.Millisecond {
			t.Errorf("retry %d came %v after the 429, before its retry-after-ms of 80", i, gap)
		}
	}
	if v := h.metricValue(t, "strait_llm_retries_total", "target", "oa"); v != 2 {
		t.Errorf("retries: %v, want 2", v)
	}
}

// A retry-after longer than max_backoff is not slept through: the
// request moves to the next target, and the first target stays out of
// rotation for that time, for other requests too.
func TestLongRetryAfterCoolsTheTarget(t *testing.T) {
	f := newFlaky(t, translate.OpenAI, 1, 429, "60000")
	good, goodURL := startMock(t, mockllm.Options{})
	h := newGW(t, []Provider{oaProvider("a", f.fp.srv.URL), oaProvider("b", goodURL)}, []Route{{
		Match: "gpt-*", Targets: []Target{{Provider: "a"}, {Provider: "b"}},
		Retry: Retry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Second, OnStatus: []int{429}},
	}}, nil)
	for range 3 {
		rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status != 200 || rp.header.Get(TargetHeader) != "b" {
			t.Fatalf("status %d target %q, want 200 from b", rp.status, rp.header.Get(TargetHeader))
		}
	}
	if n := f.fp.count(); n != 1 {
		t.Errorf("the rate-limited target got %d requests, want 1: its retry-after holds for every request", n)
	}
	if good.Requests() != 3 {
		t.Errorf("b got %d requests, want 3", good.Requests())
	}
}

// Connection refused is retried on the next target.
func TestConnectionRefusedFallsBack(t *testing.T) {
	_, goodURL := startMock(t, mockllm.Options{})
	h := newGW(t, []Provider{anProvider("down", closedURL(t)), anProvider("up", goodURL)}, []Route{{
		Match: "claude-*", Targets: []Target{{Provider: "down"}, {Provider: "up"}},
	}}, nil)
	rp := read(t, translate.Anthropic, h.post(t, client(false), translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", true)))
	if rp.status != 200 || !rp.done || rp.header.Get(TargetHeader) != "up" {
		t.Fatalf("status %d done %v target %q err %q", rp.status, rp.done, rp.header.Get(TargetHeader), rp.errMsg)
	}
}

// The deadline bounds every attempt and wait: a provider that does not
// answer is given up on when the deadline passes, not at its
// response_timeout, and no attempt follows.
func TestDeadline(t *testing.T) {
	slow, slowURL := startMock(t, mockllm.Options{Latency: time.Minute})
	p := oaProvider("slow", slowURL)
	p.ResponseTimeout = time.Minute
	h := newGW(t, []Provider{p}, []Route{{
		Match: "gpt-*", Provider: "slow", Deadline: 150 * time.Millisecond,
		Retry: Retry{Attempts: 5, OnTimeout: true, OnStatus: []int{500}},
	}}, nil)
	rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if rp.status != 504 || !strings.Contains(rp.errMsg, "deadline") {
		t.Errorf("status %d message %q, want 504 naming the deadline", rp.status, rp.errMsg)
	}
	if slow.Requests() != 1 {
		t.Errorf("%d attempts, want 1: the deadline had passed", slow.Requests())
	}
}

// The first-byte boundary: a stream that fails before its first event
// falls back; one that fails after it ends the client's stream with the
// dialect's error event, and no other target is tried.
func TestStreamFirstByteBoundary(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		reset, resetURL := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindReset}})
		good, goodURL := startMock(t, mockllm.Options{})
		h := newGW(t, []Provider{oaProvider("a", resetURL), oaProvider("b", goodURL)}, []Route{{
			Match: "gpt-*", Targets: []Target{{Provider: "a"}, {Provider: "b"}},
		}}, nil)
		rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", true)))
		if rp.status != 200 || !rp.done || rp.text != good.Text() {
			t.Fatalf("status %d done %v text %q err %q", rp.status, rp.done, rp.text, rp.errMsg)
		}
		if reset.Requests() != 1 || h.metricValue(t, "strait_llm_stream_failures_total", "target", "a", "boundary", "before_first_byte") != 1 {
			t.Errorf("want one stream failure before the first byte on a")
		}
	})
	t.Run("after", func(t *testing.T) {
		cut, cutURL := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindCut}, CutAfter: 2})
		good, goodURL := startMock(t, mockllm.Options{})
		h := newGW(t, []Provider{anProvider("a", cutURL), anProvider("b", goodURL)}, []Route{{
			Match: "claude-*", Targets: []Target{{Provider: "a"}, {Provider: "b"}},
		}}, nil)
		for _, d := range []translate.Dialect{translate.Anthropic, translate.OpenAI} {
			rp := read(t, d, h.post(t, client(false), d, endpoint(d), requestBody(d, "claude-x", true)))
			if rp.status != 200 || rp.done || rp.errType == "" || rp.text == "" {
				t.Errorf("%s client: status %d done %v text %q error %q; want part of the text, then an error event", d, rp.status, rp.done, rp.text, rp.errType)
			}
		}
		if good.Requests() != 0 {
			t.Errorf("the other target got %d requests after the first byte had gone", good.Requests())
		}
		if cut.Requests() != 2 || h.metricValue(t, "strait_llm_stream_failures_total", "target", "a", "boundary", "after_first_byte") != 2 {
			t.Errorf("want two stream failures after the first byte on a")
		}
	})
}

// Weighted targets share 10,000 requests by weight, within ±5% of each
// one's share.
func TestWeightedSpread(t *testing.T) {
	a, aURL := startMock(t, mockllm.Options{})
	b, bURL := startMock(t, mockllm.Options{})
	h := newGW(t, []Provider{oaProvider("a", aURL), oaProvider("b", bURL)}, []Route{{
		Match: "gpt-*", Strategy: StrategyWeighted,
		Targets: []Target{{Provider: "a", Weight: 3}, {Provider: "b", Weight: 1}},
	}}, nil)
	const total = 10000
	c := client(false)
	body := requestBody(translate.OpenAI, "gpt-4o", false)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= total {
				req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	na, nb := a.Requests(), b.Requests()
	if na+nb != total {
		t.Fatalf("%d + %d requests reached the targets, want %d", na, nb, total)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"a", float64(na), total * 0.75}, {"b", float64(nb), total * 0.25}} {
		if c.got < c.want*0.95 || c.got > c.want*1.05 {
			t.Errorf("target %s served %v requests, want %v ±5%%", c.name, c.got, c.want)
		}
	}
}

// switchable is a provider that fails with 500 while down is set.
type switchable struct {
	fp   *fakeProvider
	down atomic.Bool
}

func newSwitchable(t *testing.T, d translate.Dialect) *switchable {
	s := &switchable{fp: newFakeProvider(t, d, false)}
	s.fp.setHandler(func(w http.ResponseWriter, r *http.Request, body []byte) {
		if s.down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"message":"down","type":"server_error"}}`)
			return
		}
		s.fp.script(w, r, body)
	})
	return s
}

// A target that fails N times in the window is ejected: no request goes
// to it during its cooldown; then one probe does, and its success brings
// the target back.
func TestEjectionAndRecovery(t *testing.T) {
	a := newSwitchable(t, translate.OpenAI)
	b := newSwitchable(t, translate.OpenAI)
	a.down.Store(true)
	h := newGW(t, []Provider{oaProvider("a", a.fp.srv.URL), oaProvider("b", b.fp.srv.URL)}, []Route{{
		Match: "gpt-*", Targets: []Target{{Provider: "a"}, {Provider: "b"}},
		Health: Health{Failures: 3, Window: time.Minute, Cooldown: 300 * time.Millisecond},
	}}, nil)
	c := client(false)
	post := func() reply {
		return read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	}
	for range 10 {
		if rp := post(); rp.status != 200 {
			t.Fatalf("status %d: the fallback should answer", rp.status)
		}
	}
	if n := a.fp.count(); n != 3 {
		t.Errorf("the failing target got %d requests, want 3: it is ejected after its third failure", n)
	}
	if h.metricValue(t, "strait_llm_target_ejections_total", "target", "a") != 1 || h.metricValue(t, "strait_llm_target_up", "target", "a") != 0 {
		t.Error("want one ejection of a, and a down")
	}
	a.down.Store(false)
	eventually(t, "a probe to bring a back", func() bool {
		rp := post()
		return rp.status == 200 && rp.header.Get(TargetHeader) == "a"
	})
	if h.metricValue(t, "strait_llm_target_up", "target", "a") != 1 {
		t.Error("a is back but not counted up")
	}
	for range 5 {
		if rp := post(); rp.header.Get(TargetHeader) != "a" {
			t.Errorf("after recovery, target %q answered, want a (first in order)", rp.header.Get(TargetHeader))
		}
	}
}

// With every target ejected, the client gets a 503 in its dialect with a
// retry-after, and no provider is called.
func TestAllEjected(t *testing.T) {
	a := newSwitchable(t, translate.Anthropic)
	a.down.Store(true)
	h := newGW(t, []Provider{anProvider("a", a.fp.srv.URL)}, []Route{{
		Match: "claude-*", Provider: "a",
		Health: Health{Failures: 1, Window: time.Minute, Cooldown: time.Minute},
	}}, nil)
	c := client(false)
	read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", false)))
	for _, d := range []translate.Dialect{translate.Anthropic, translate.OpenAI} {
		rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, "claude-x", false)))
		want := "overloaded_error"
		if d == translate.OpenAI {
			want = "server_error"
		}
		if rp.status != 503 || rp.errType != want || rp.header.Get("Retry-After") != "60" {
			t.Errorf("%s: status %d type %q retry-after %q, want 503 %s 60", d, rp.status, rp.errType, rp.header.Get("Retry-After"), want)
		}
	}
	if n := a.fp.count(); n != 1 {
		t.Errorf("the ejected target got %d requests, want 1", n)
	}
}

// A target's own api_key is sent instead of its provider's, and is
// masked like a provider key when the provider quotes it.
func TestTargetCredentials(t *testing.T) {
	fp := newFakeProvider(t, translate.OpenAI, false)
	const targetKey = "sk-target-account-B7xQ2mLk9"
	p := oaProvider("oa", fp.srv.URL)
	p.APIKey = openAIKey
	h := newGW(t, []Provider{p}, []Route{{
		Match: "gpt-*", Targets: []Target{{Name: "acct-b", Provider: "oa", APIKey: targetKey}, {Name: "acct-a", Provider: "oa"}},
	}}, nil)
	c := client(false)
	read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if got := fp.last(t).header.Get("Authorization"); got != "Bearer "+targetKey {
		t.Errorf("Authorization %q, want the target's key", got)
	}
	fp.setHandler(func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"bad key `+targetKey+`","type":"invalid_request_error"}}`)
	})
	rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if strings.Contains(string(rp.raw), targetKey) || !strings.Contains(rp.errMsg, "[REDACTED]") {
		t.Errorf("the target's key reached the client: %s", rp.raw)
	}
}
