package result

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// splitRuns are a mixed run and a produce-only run through one gateway
// (pid 10) and broker (pid 20), with counts by the gateway and the clients.
func splitRuns() (mixed, produceOnly *Kafka) {
	mixed = &Kafka{PublishRate: 3000, DurationS: 10,
		Processes:       []Process{{PID: 10, Name: "gateway", CPUSeconds: 2.2}, {PID: 20, Name: "broker", CPUSeconds: 1}},
		GatewayRequests: NewRequests(map[string]int64{APIProduce: 10000, APIFetch: 6000, "Heartbeat": 10}, 10),
		ClientRequests:  NewRequests(map[string]int64{APIProduce: 9990, APIFetch: 5990, "Heartbeat": 10}, 10),
	}
	produceOnly = &Kafka{PublishRate: 3000, DurationS: 10,
		Processes:       []Process{{PID: 10, Name: "gateway", CPUSeconds: 1.6}, {PID: 20, Name: "broker", CPUSeconds: 2}},
		GatewayRequests: NewRequests(map[string]int64{APIProduce: 16000, "Metadata": 2}, 10),
		ClientRequests:  NewRequests(map[string]int64{APIProduce: 20000}, 10),
	}
	return mixed, produceOnly
}

func TestSplitByAPIDerivesFetchFromTheProduceOnlyCost(t *testing.T) {
	mixed, po := splitRuns()
	SplitByAPI(mixed, po)
	// Gateway: 1.6 s over 16,000 Produce alone is 100 µs each; the mixed
	// run's 10,000 Produce are then 1 s of its 2.2 s, and 1.2 s over
	// 6,000 Fetch is 200 µs each.
	gw := mixed.Processes[0]
	if gw.CPUMicrosPerProduce != 100 || gw.CPUMicrosPerFetch != 200 {
		t.Errorf("gateway: %v µs per Produce, %v per Fetch; want 100, 200", gw.CPUMicrosPerProduce, gw.CPUMicrosPerFetch)
	}
	// Broker: 125 µs per Produce alone; 10,000 of them are 1.25 s, more
	// than the mixed run's 1 s: no Fetch cost, and a note says why.
	br := mixed.Processes[1]
	if br.CPUMicrosPerProduce != 125 || br.CPUMicrosPerFetch != 0 {
		t.Errorf("broker: %v µs per Produce, %v per Fetch; want 125 and none", br.CPUMicrosPerProduce, br.CPUMicrosPerFetch)
	}
	notes := strings.Join(mixed.SplitNotes, "\n")
	for _, want := range []string{"derived", "counted by the gateway", "10 other requests", "Produce requests: 1600/s of 1.9 records each in the produce-only run, 1000/s of 3.0 in the mixed one", "broker (pid 20): no µs per Fetch"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if mixed.ProduceOnly != po {
		t.Error("the produce-only run is not kept in the mixed one")
	}
}

func TestSplitByAPIUsesOneCounterForBothRuns(t *testing.T) {
	mixed, po := splitRuns()
	po.GatewayRequests = nil // say, a layer without an admin listener
	SplitByAPI(mixed, po)
	// The clients' counts for both: 1.6 s / 20,000 = 80 µs per Produce;
	// (2.2 s − 9,990 × 80 µs) / 5,990 = 233.86 µs per Fetch.
	gw := mixed.Processes[0]
	if gw.CPUMicrosPerProduce != 80 || gw.CPUMicrosPerFetch < 233.85 || gw.CPUMicrosPerFetch > 233.86 {
		t.Errorf("gateway: %v, %v; want 80 and 233.86 from the clients' counts", gw.CPUMicrosPerProduce, gw.CPUMicrosPerFetch)
	}
	if !strings.Contains(strings.Join(mixed.SplitNotes, "\n"), "counted by the client") {
		t.Errorf("notes do not say the clients counted: %q", mixed.SplitNotes)
	}
}

func TestSplitByAPINeedsBothAPIsAndTheSameProcesses(t *testing.T) {
	mixed, po := splitRuns()
	mixed.GatewayRequests.ByAPI[APIFetch], mixed.ClientRequests.ByAPI[APIFetch] = 0, 0
	SplitByAPI(mixed, po)
	if mixed.Processes[0].CPUMicrosPerProduce != 0 || !strings.Contains(strings.Join(mixed.SplitNotes, "\n"), "no split by API") {
		t.Errorf("a mixed run without Fetch was split: %+v %q", mixed.Processes[0], mixed.SplitNotes)
	}

	mixed, po = splitRuns()
	po.Processes = po.Processes[:1]
	SplitByAPI(mixed, po)
	if mixed.Processes[1].CPUMicrosPerProduce != 0 || !strings.Contains(strings.Join(mixed.SplitNotes, "\n"), "broker (pid 20): not watched in the produce-only run") {
		t.Errorf("a process the produce-only run did not watch was split: %+v %q", mixed.Processes[1], mixed.SplitNotes)
	}
}

func TestNewRequests(t *testing.T) {
	r := NewRequests(map[string]int64{APIProduce: 300, APIFetch: 100, "Metadata": 0}, 20)
	if r.Total != 400 || r.PerSecond != 20 || len(r.ByAPI) != 2 || r.API(APIFetch) != 100 {
		t.Errorf("%+v", r)
	}
	var none *Requests
	if none.API(APIProduce) != 0 {
		t.Error("a nil count has requests")
	}
}

// TestKafkaRequestsGolden fixes the names of the request fields, and that
// a file written before them reads and writes back unchanged.
func TestKafkaRequestsGolden(t *testing.T) {
	k := sampleKafka()
	mixed, po := splitRuns()
	k.ClientRequests, k.GatewayRequests = mixed.ClientRequests, mixed.GatewayRequests
	k.GatewayMetrics, k.RequestsCountedBy = "http://127.0.0.1:9190/metrics", CountedByGateway
	po.Meta, po.Label, po.Workload = k.Meta, "passthrough produce-only", k.Workload
	po.Processes = []Process{{PID: 4242, Name: "strait", CPUSeconds: 1.6}}
	SplitByAPI(k, po)
	got, err := Encode(k)
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, "kafka-requests.json", got)
	doc, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	back := doc.(*Kafka)
	if back.CountedRequests().API(APIProduce) != 10000 || back.ProduceOnly == nil || back.Processes[0].CPUMicrosPerFetch == 0 {
		t.Errorf("decoded: %+v", back)
	}
	for _, key := range []string{`"client_requests"`, `"gateway_requests"`, `"by_api"`, `"per_second"`, `"requests_counted_by": "gateway"`, `"produce_only"`, `"cpu_us_per_produce"`, `"cpu_us_per_fetch"`, `"split_notes"`} {
		if !bytes.Contains(want, []byte(key)) {
			t.Errorf("no %s", key)
		}
	}

	old, err := os.ReadFile(filepath.Join("testdata", "kafka-before-requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err = Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	if c := doc.(*Kafka).CountedRequests(); c != nil {
		t.Errorf("an older file has request counts: %+v", c)
	}
	if again, err := Encode(doc); err != nil || !bytes.Equal(again, old) {
		t.Errorf("an older file does not write back unchanged (%v):\n%s", err, again)
	}
}
