package result

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// workload stands for a generator's workload struct.
type workload struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	RecordSize int    `json:"record_size"`
}

func sampleMeta() Meta {
	return Meta{
		Commit:    "0123456789abcdef0123456789abcdef01234567+dirty",
		GoVersion: "go1.26.8",
		CPUModel:  "AMD EPYC 7B13",
		CPUs:      2,
		Start:     time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Host:      "bench-1",
		Command:   "strait bench kafka --rate 1000 --label passthrough",
	}
}

func sampleKafka() *Kafka {
	lat := func(base float64) Latency {
		return Latency{
			P50: base, P75: base * 1.5, P95: base * 3, P99: base * 5, P999: base * 9, Max: base * 20, Mean: base * 1.25,
			Count:     60000,
			WindowP99: []float64{base * 5, base * 4.5, base * 5.5},
			Curve:     []CurvePoint{{0, base / 2}, {50, base}, {90, base * 2.5}, {99, base * 5}, {100, base * 20}},
		}
	}
	return &Kafka{
		Label:       "passthrough",
		Meta:        sampleMeta(),
		Workload:    workload{Topic: "bench", Partitions: 6, RecordSize: 1024},
		Valid:       false,
		Problems:    []string{"backlog of 12 records at the end"},
		TargetRate:  1000,
		PublishRate: 999.5,
		ConsumeRate: 998.25,
		PublishMBps: 1.0235,
		ConsumeMBps: 1.0222,
		Published:   59970,
		Consumed:    59958,
		Errors:      3,
		ErrorKinds:  map[string]int64{"REQUEST_TIMED_OUT": 2, "timeout": 1},
		PeakBacklog: 250, FinalBacklog: 12,
		DurationS: 60, WarmupS: 10,
		PublishLatency: lat(1.5),
		E2ELatency:     lat(2.5),
		Windows: []Window{
			{StartS: 0, PublishRate: 1000, ConsumeRate: 999, PublishP99: 7.5, E2EP99: 12.5},
			{StartS: 10, PublishRate: 999, ConsumeRate: 997.5, PublishP99: 6.75, E2EP99: 11.25},
		},
		Processes: []Process{{PID: 4242, Name: "strait", CPUSeconds: 12.5, PeakRSSBytes: 52428800, MsCPUPerMBps: 101.75, CPUPerKRequests: 3.5}},
	}
}

func sampleSweep() *Sweep {
	step := func(target, achieved float64, valid bool) SweepStep {
		r := sampleKafka()
		r.TargetRate, r.PublishRate, r.Valid, r.Problems = target, achieved, valid, nil
		r.Windows, r.PublishLatency.Curve, r.E2ELatency.Curve = nil, nil, nil
		return SweepStep{Target: target, Producers: 4, Result: r}
	}
	s := &Sweep{
		Label:    "direct",
		Mode:     ModeRate,
		Meta:     sampleMeta(),
		Workload: workload{Topic: "bench", Partitions: 6, RecordSize: 1024},
		Steps:    []SweepStep{step(1000, 1000, true), step(2000, 1990, true), step(4000, 3100, false)},
	}
	Finish(s)
	return s
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("encoding differs from %s (field names are fixed within a schema version; if the change is an addition, run go test -update and review the diff)\ngot:\n%s", path, got)
	}
	return want
}

func TestKafkaGolden(t *testing.T) {
	got, err := Encode(sampleKafka())
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, "kafka.json", got)

	// Round trip: decoding the golden file and encoding it again gives
	// the same bytes, so a reader loses nothing.
	doc, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := doc.(*Kafka)
	if !ok {
		t.Fatalf("Decode returned %T, want *Kafka", doc)
	}
	if _, ok := k.Workload.(json.RawMessage); !ok {
		t.Errorf("workload decoded as %T, want json.RawMessage", k.Workload)
	}
	again, err := Encode(k)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Errorf("round trip changed the document:\n%s", again)
	}
	if k.PublishLatency.P99 != 7.5 || k.E2ELatency.WindowP99[2] != 13.75 || k.ErrorKinds["timeout"] != 1 || !k.Meta.Start.Equal(sampleMeta().Start) {
		t.Errorf("decoded values differ from the sample: %+v", k)
	}
}

func TestSweepGolden(t *testing.T) {
	got, err := Encode(sampleSweep())
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, "sweep.json", got)
	doc, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := doc.(*Sweep)
	if !ok {
		t.Fatalf("Decode returned %T, want *Sweep", doc)
	}
	again, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Errorf("round trip changed the document:\n%s", again)
	}
}

// TestFieldNames checks the names the issue fixes, and that every key
// outside the free-form maps is snake_case.
func TestFieldNames(t *testing.T) {
	data, err := Encode(sampleKafka())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "kind", "meta", "workload", "target_rate", "publish_rate", "consume_rate", "errors", "valid", "publish_latency_ms", "e2e_latency_ms"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no top-level %q", k)
		}
	}
	for _, series := range []string{"publish_latency_ms", "e2e_latency_ms"} {
		lat, _ := doc[series].(map[string]any)
		for _, k := range []string{"p50", "p75", "p95", "p99", "p999", "max"} {
			if _, ok := lat[k].(float64); !ok {
				t.Errorf("%s has no number %q", series, k)
			}
		}
	}
	for _, k := range []string{"commit", "go_version", "cpu_model", "cpus", "start"} {
		if _, ok := doc["meta"].(map[string]any)[k]; !ok {
			t.Errorf("meta has no %q", k)
		}
	}
	if doc["schema"] != 1.0 || doc["kind"] != "kafka" {
		t.Errorf("schema %v, kind %v; want 1 and kafka", doc["schema"], doc["kind"])
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !snake.MatchString(k) {
					t.Errorf("key %s.%s is not snake_case", path, k)
				}
				if k == "workload" || k == "error_kinds" {
					continue // data, not schema
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", doc)
}

func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.json")
	k := sampleKafka()
	k.Schema, k.Kind = 0, "" // Write fills them in
	if err := Write(path, k); err != nil {
		t.Fatal(err)
	}
	doc, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := doc.(*Kafka)
	if !ok || got.Schema != 1 || got.Kind != KindKafka || got.Label != "passthrough" {
		t.Fatalf("Read = %T %+v, want the *Kafka written", doc, doc)
	}
	var w workload
	if err := json.Unmarshal(got.Workload.(json.RawMessage), &w); err != nil || w.Partitions != 6 {
		t.Errorf("workload = %s (%v), want partitions 6", got.Workload, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the result (no temporary left)", len(entries))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v (%v), want 0644", fi.Mode().Perm(), err)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"not json", "{", "not a result file"},
		{"no schema", `{"kind":"kafka"}`, `no "schema"`},
		{"newer schema", `{"schema":2,"kind":"kafka"}`, "schema version 2"},
		{"unknown kind", `{"schema":1,"kind":"bogus"}`, `unknown kind "bogus"; known kinds: kafka, kafka-sweep`},
		{"wrong type", `{"schema":1,"kind":"kafka","valid":"yes"}`, `decoding a "kafka" result`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode(%s) error = %v, want one containing %q", tt.doc, err, tt.want)
			}
		})
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Read of a missing file: %v, want an error naming it", err)
	}
}

func TestEncodeNaN(t *testing.T) {
	k := sampleKafka()
	k.Processes[0].MsCPUPerMBps = 1 / zero()
	if _, err := Encode(k); err == nil || !strings.Contains(err.Error(), "divided by zero") {
		t.Errorf("Encode with +Inf: %v, want an error hinting at a division by zero", err)
	}
}

func zero() float64 { return 0 }

func TestSaturated(t *testing.T) {
	tests := []struct {
		target, achieved float64
		want             bool
	}{
		{1000, 1000, false},
		{1000, 1010, false},
		{1000, 950, false}, // exactly 5% below: not more than 5%
		{1000, 949.9, true},
		{1000, 0, true},
		{100000, 95000, false},
		{100000, 94999, true},
		{0, 0, false}, // closed loop
		{0, 5000, false},
	}
	for _, tt := range tests {
		if got := Saturated(tt.target, tt.achieved); got != tt.want {
			t.Errorf("Saturated(%v, %v) = %v, want %v", tt.target, tt.achieved, got, tt.want)
		}
	}
}

func TestFinish(t *testing.T) {
	s := sampleSweep() // 1000→1000 valid, 2000→1990 valid, 4000→3100 invalid
	if s.Schema != 1 || s.Kind != KindKafkaSweep {
		t.Errorf("schema %d, kind %q; want 1, %q", s.Schema, s.Kind, KindKafkaSweep)
	}
	wantSat := []bool{false, false, true}
	for i, st := range s.Steps {
		if st.Saturated != wantSat[i] {
			t.Errorf("step %d (target %v, achieved %v): saturated %v, want %v", i, st.Target, st.Achieved, st.Saturated, wantSat[i])
		}
		if st.P99 != st.Result.PublishLatency.P99 || st.E2EP99 != st.Result.E2ELatency.P99 {
			t.Errorf("step %d: p99s %v/%v not taken from the result", i, st.P99, st.E2EP99)
		}
	}
	if s.LastSustained != 1990 || s.LastSustainedP99 != 7.5 {
		t.Errorf("last sustained %v (p99 %v), want 1990 (p99 7.5)", s.LastSustained, s.LastSustainedP99)
	}

	// A step that keeps up but whose consumers fall behind (invalid) ends
	// the sustained range too, and a later step that recovers does not
	// reopen it.
	s2 := &Sweep{Steps: []SweepStep{
		{Target: 100, Achieved: 100, P99: 1},
		{Target: 200, Achieved: 200, P99: 2, Result: &Kafka{Valid: false}},
		{Target: 300, Achieved: 300, P99: 3},
	}}
	Finish(s2)
	if s2.LastSustained != 100 || s2.LastSustainedP99 != 1 {
		t.Errorf("last sustained %v (p99 %v), want 100 (p99 1)", s2.LastSustained, s2.LastSustainedP99)
	}
	if s2.Steps[1].Saturated {
		t.Errorf("an invalid step at its target is marked saturated; saturation is the rate rule alone")
	}

	s3 := &Sweep{Steps: []SweepStep{{Target: 100, Achieved: 50, P99: 9}}}
	Finish(s3)
	if s3.LastSustained != 0 || s3.LastSustainedP99 != 0 {
		t.Errorf("first step saturated: last sustained %v, want 0", s3.LastSustained)
	}
}

func TestSetTraffic(t *testing.T) {
	// 30 CPU-seconds over 60 s is half a core, 500 millicores; at 20 MB/s
	// that is 25 per MB/s. 120000 requests: 30000 ms / 120 = 250 ms per
	// thousand.
	p := Process{CPUSeconds: 30}
	p.SetTraffic(60, 20, 120000)
	if p.MsCPUPerMBps != 25 || p.CPUPerKRequests != 250 {
		t.Errorf("coefficients %v, %v; want 25, 250", p.MsCPUPerMBps, p.CPUPerKRequests)
	}
	p.SetTraffic(60, 0, 0)
	if p.MsCPUPerMBps != 0 || p.CPUPerKRequests != 0 {
		t.Errorf("with no traffic: %v, %v; want 0, 0", p.MsCPUPerMBps, p.CPUPerKRequests)
	}
}

func TestCPUModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpuinfo")
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"
	if err := os.WriteFile(path, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := cpuModel(path); got != "AMD EPYC 7B13 64-Core Processor" {
		t.Errorf("cpuModel = %q", got)
	}
	if got := cpuModel(filepath.Join(t.TempDir(), "none")); got == "" {
		t.Errorf("cpuModel of a missing file is empty, want the architecture")
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"strait", "bench", "kafka", "--label", "two words", "--topic", "it's", ""})
	want := `strait bench kafka --label 'two words' --topic 'it'\''s' ''`
	if got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}

func TestCollectMeta(t *testing.T) {
	m := CollectMeta([]string{"strait", "bench"})
	if m.Commit == "" || m.GoVersion == "" || m.CPUModel == "" || m.CPUs < 1 || m.Start.IsZero() || m.Command != "strait bench" {
		t.Errorf("CollectMeta = %+v: a field is missing", m)
	}
}
