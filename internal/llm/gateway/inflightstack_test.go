//go:build !race

// The race detector's instrumentation makes every frame larger, so the
// stacks measured here are not a gateway's: this test is built without it
// only (scripts/test runs it once without -race).

package gateway

import (
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// A translated request waiting for its provider holds about the stack a
// fast-path one does: the translation before the wait must not leave its
// goroutine with a grown stack, which at thousands of requests in flight is
// most of the gateway's memory (a 16 KiB frame to pre-grow the stack kept
// 19 KiB of stack per request in flight, against 9 without).
func TestTranslatedRequestsInFlightHoldSmallStacks(t *testing.T) {
	const n = 1000
	perRequest := func(model string, prov *heldProvider, g *Gateway) float64 {
		prov.arrived.Add(n)
		var done sync.WaitGroup
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range n {
			done.Add(1)
			go func() {
				defer done.Done()
				body := strings.Replace(referenceBody, `"alias-x"`, `"`+model+`"`, 1)
				req, _ := http.NewRequest("POST", "http://gateway/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("Content-Type", "application/json")
				g.ServeHTTP(&discard{h: http.Header{}}, req)
			}()
		}
		prov.arrived.Wait()
		runtime.ReadMemStats(&m1)
		close(prov.release)
		done.Wait()
		return float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / n
	}
	newGateway := func(prov *heldProvider) *Gateway {
		g, err := New(Options{
			Providers: []Provider{
				{Name: "an", Dialect: translate.Anthropic, BaseURL: "http://127.0.0.1:9", APIKey: "sk-ant-x"},
				{Name: "oa", Dialect: translate.OpenAI, BaseURL: "http://127.0.0.1:9", APIKey: "sk-oa-x"},
			},
			Routes: []Route{{Match: "claude-*", Provider: "an"}, {Match: "gpt-*", Provider: "oa"}},
			Keys:   []Key{{Name: "k", SHA256: HashKey(testKey)}},
			Log:    slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		g.providers["an"].rt, g.providers["oa"].rt = prov, prov
		return g
	}
	fastProv := &heldProvider{release: make(chan struct{}), body: []byte(openAIJSON("gpt-4o"))}
	fast := perRequest("gpt-4o", fastProv, newGateway(fastProv))
	trProv := &heldProvider{release: make(chan struct{}), body: []byte(anthropicJSON("claude-x"))}
	translated := perRequest("claude-x", trProv, newGateway(trProv))
	t.Logf("stack per request in flight: fast path %.1f KiB, translated %.1f KiB", fast/1024, translated/1024)
	if translated > 1.5*fast {
		t.Errorf("a translated request in flight holds %.1f KiB of stack, a fast-path one %.1f KiB: translation left its stack grown", translated/1024, fast/1024)
	}
}
