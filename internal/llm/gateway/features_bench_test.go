package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/limits/redistest"
	"github.com/straitgw/strait/internal/llm/translate"
)

// BenchmarkFeatures is what each reliability and spend feature adds to a
// request inside the gateway, the provider answering from memory:
//
//	go test ./internal/llm/gateway/ -run '^$' -bench BenchmarkFeatures -benchmem
//
// baseline is a route with one target and a key without limits, as
// before the features; each other case turns one on. The Redis case talks
// to a real redis-server on loopback, so its time includes a round trip.
func BenchmarkFeatures(b *testing.B) {
	two := []Target{{Provider: "oa"}, {Provider: "oa2"}}
	cases := []struct {
		name  string
		route Route
		key   limits.Limits
		redis bool
	}{
		{name: "baseline", route: Route{Provider: "oa"}},
		{name: "targets=fallback", route: Route{Targets: two}},
		{name: "targets=weighted", route: Route{Targets: two, Strategy: StrategyWeighted}},
		{name: "retry+deadline+health", route: Route{Provider: "oa", Retry: Retry{Attempts: 3}, Deadline: time.Minute,
			Health: Health{Failures: 5, Window: 10 * time.Second, Cooldown: 30 * time.Second}}},
		{name: "key=rpm/memory", route: Route{Provider: "oa"}, key: limits.Limits{RPM: 1 << 40}},
		{name: "key=tpm+budget/memory", route: Route{Provider: "oa"}, key: limits.Limits{TPM: 1 << 40, Budget: 1 << 60, Period: limits.Day}},
		{name: "key=rpm/redis", route: Route{Provider: "oa"}, key: limits.Limits{RPM: 1 << 40}, redis: true},
		{name: "key=tpm+budget/redis", route: Route{Provider: "oa"}, key: limits.Limits{TPM: 1 << 40, Budget: 1 << 60, Period: limits.Day}, redis: true},
	}
	for _, stream := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if stream {
				name += "/stream"
			}
			b.Run(name, func(b *testing.B) {
				prov := &memProvider{ctype: "application/json", body: []byte(openAIJSON("gpt-4o"))}
				body := `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"Capital of France?"}]}`
				if stream {
					prov = &memProvider{ctype: "text/event-stream", body: []byte(strings.Join(openAIEvents("gpt-4o"), ""))}
					body = `{"model":"gpt-4o","max_tokens":100,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Capital of France?"}]}`
				}
				opts := Options{
					Providers: []Provider{
						{Name: "oa", Dialect: translate.OpenAI, BaseURL: "http://127.0.0.1:9", APIKey: openAIKey},
						{Name: "oa2", Dialect: translate.OpenAI, BaseURL: "http://127.0.0.1:9", APIKey: openAIKey},
					},
					Keys:   []Key{{Name: "bench", SHA256: HashKey(testKey), Limits: c.key}},
					Prices: []Price{{Model: "gpt-*", Input: 2.5, Output: 10}},
					Log:    slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
				}
				r := c.route
				r.Match = "gpt-*"
				opts.Routes = []Route{r}
				if c.redis {
					srv := redistest.Start(b)
					st, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Timeout: time.Second})
					if err != nil {
						b.Fatal(err)
					}
					opts.Limits.Store = st
				}
				g, err := New(opts)
				if err != nil {
					b.Fatal(err)
				}
				defer g.store.Close()
				g.providers["oa"].rt, g.providers["oa2"].rt = prov, prov
				req, _ := http.NewRequest("POST", "http://gateway/v1/chat/completions", nil)
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("Content-Type", "application/json")
				req.ContentLength = int64(len(body))
				w := &discard{h: http.Header{}}
				rd := strings.NewReader(body)
				b.ReportAllocs()
				for b.Loop() {
					rd.Reset(body)
					req.Body = io.NopCloser(rd)
					clear(w.h)
					g.ServeHTTP(w, req)
				}
				if g.keys[0].requests.Load() == 0 || g.m.Errors == nil {
					b.Fatal("nothing served")
				}
			})
		}
	}
}
