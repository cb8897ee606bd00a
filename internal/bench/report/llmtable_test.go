package report

import (
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/bench/result"
)

func TestLLMTable(t *testing.T) {
	r := &result.LLM{
		Label: "via strait", Valid: false, Problems: []string{"3 of 300 requests failed"},
		TargetRate: 100, Due: 300, Sent: 300, OK: 297, Errors: 3, Throughput: 99,
		ErrorKinds: map[string]int64{"stream incomplete": 3}, Statuses: map[string]int64{"200": 300},
		DurationS: 3, WarmupS: 1,
		Latency:    result.Latency{P50: 1501.2, P99: 1503.9, Count: 297},
		FirstEvent: &result.Latency{P50: 1.2, P99: 3.4, Count: 297},
		Processes:  []result.Process{{PID: 7, Name: "gateway", CPUSeconds: 0.3, PeakRSSBytes: 64 << 20, CPUPerKRequests: 1010, CPUMicrosPerRequest: 1010}},
		Generator:  &result.Process{PID: 8, Name: "strait (generator)", CPUSeconds: 0.1, CPUPerKRequests: 337, CPUMicrosPerRequest: 337},
	}
	var b strings.Builder
	if err := LLMTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"via strait: INVALID, does not count", "3 of 300 requests failed",
		"due 300, sent 300, ok 297 (99 req/s), errors 3", "stream incomplete ×3", "200 ×300",
		"complete answer", "1501.2", "first event", "3.40",
		"CPU ms per 1k req", "gateway", "1010", "strait (generator)",
		"CPU per request: gateway (pid 7) 1010 µs, strait (generator) (pid 8) 337 µs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the LLM table lacks %q:\n%s", want, out)
		}
	}
}
