package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/bench/result"
)

// requestRuns are the layer runs with request counts: direct by its
// clients, passthrough by the gateway and split by API with a
// produce-only run through the same gateway (pid 7).
func requestRuns() []*result.Kafka {
	runs := layerRuns()
	direct, pass := runs[0], runs[1]
	direct.DurationS = 60
	direct.Processes = []result.Process{{PID: 3, Name: "broker", CPUSeconds: 3}}
	direct.ClientRequests = result.NewRequests(map[string]int64{"Produce": 36000, "Fetch": 24000}, 60)
	direct.RequestsCountedBy = result.CountedByClient
	pass.ClientRequests = result.NewRequests(map[string]int64{"Produce": 35990, "Fetch": 23990, "Heartbeat": 20}, 60)
	pass.GatewayRequests = result.NewRequests(map[string]int64{"Produce": 36000, "Fetch": 24000, "Heartbeat": 20}, 60)
	pass.GatewayMetrics, pass.RequestsCountedBy = "http://127.0.0.1:29191/metrics", result.CountedByGateway
	for _, r := range []*result.Kafka{direct, pass} {
		for i := range r.Processes {
			r.Processes[i].SetTraffic(r.DurationS, 2, r.CountedRequests().Total)
		}
	}
	// Alone, 40,000 Produce took 4 s of the gateway: 100 µs each. The
	// mixed run's 36,000 are then 3.6 s of its 6, and 2.4 s over 24,000
	// Fetch is 100 µs each too.
	po := &result.Kafka{Label: "passthrough produce-only", PublishRate: 1000, DurationS: 60,
		Processes:       []result.Process{{PID: 7, Name: "strait", CPUSeconds: 4}},
		GatewayRequests: result.NewRequests(map[string]int64{"Produce": 40000}, 60)}
	result.SplitByAPI(pass, po)
	return runs
}

func TestTableKafkaRequests(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, requestRuns()[1]); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	golden(t, "table-requests.txt", out)
	for _, want := range []string{
		"Kafka requests, counted by the gateway (http://127.0.0.1:29191/metrics): 60020 (1000/s): Produce 36000, Fetch 24000, others 20\n",
		"Kafka requests, counted by the clients: 60000 (1000/s): Produce 35990, Fetch 23990, others 20\n",
		// 6 s over 60,020 requests.
		"CPU per Kafka request (by the gateway's count): strait (pid 7) 99.97 µs\n",
		"CPU by API (Fetch derived): strait (pid 7) 100 µs per Produce, 100 µs per Fetch\n",
		"  - µs per Produce is measured in a produce-only run, µs per Fetch derived",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	// A run without counts (an older result file) has no such lines.
	b.Reset()
	if err := Table(&b, layerRuns()[1]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "request") {
		t.Errorf("a run without request counts talks of requests:\n%s", b.String())
	}
}

func TestLayersShowCPUPerRequest(t *testing.T) {
	var b bytes.Buffer
	if err := Layers(&b, requestRuns()[:2]); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| Kafka requests (req/s) | 1000.0 | 1000.3 |",
		"| broker CPU per request (µs) | 50.00 | – |",
		"| strait CPU per request (µs) | – | 99.97 |",
		"| strait CPU per Produce (µs) | – | 100.0 |",
		"| strait CPU per Fetch, derived (µs) | – | 100.0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("layer table lacks %q:\n%s", want, out)
		}
	}
}
