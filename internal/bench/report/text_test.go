package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/bench/result"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n%s", path, got)
	}
}

// lat returns a latency summary with round numbers and window samples.
func lat(p50, p95, p99, p999 float64, windows ...float64) result.Latency {
	return result.Latency{P50: p50, P75: (p50 + p95) / 2, P95: p95, P99: p99, P999: p999, Max: p999 * 2, Mean: p50 * 1.1, Count: 1000, WindowP99: windows}
}

// layerRuns are three setups; passthrough adds 0.9, 2.9, 10.2 and 15 ms
// over direct at p50, p95, p99 and p99.9.
func layerRuns() []*result.Kafka {
	direct := &result.Kafka{Label: "direct", Valid: true, TargetRate: 1000, PublishRate: 1000, ConsumeRate: 1000,
		PublishLatency: lat(1, 2, 3, 5, 1, 2, 3, 4, 5), E2ELatency: lat(2, 4, 6, 10, 1, 2, 3, 4, 5)}
	pass := &result.Kafka{Label: "passthrough", Valid: true, TargetRate: 1000, PublishRate: 1000, ConsumeRate: 1000,
		PublishLatency: lat(1.9, 4.9, 13.2, 20, 6, 7, 8, 9, 10), E2ELatency: lat(3, 6, 9, 12, 1.5, 2.5, 3.5, 4.5, 5.5),
		Processes: []result.Process{{PID: 7, Name: "strait", CPUSeconds: 6, PeakRSSBytes: 32 << 20, MsCPUPerMBps: 100}}, DurationS: 60}
	enc := &result.Kafka{Label: "encrypt", Valid: false, Problems: []string{"backlog of 5 records at the end"},
		TargetRate: 1000, PublishRate: 990, ConsumeRate: 900,
		PublishLatency: lat(2.5, 6, 15, 30, 1, 2, 3), E2ELatency: lat(4, 8, 12, 20)}
	direct.Meta = result.Meta{Commit: "0123456789abcdef0123", GoVersion: "go1.26.8", CPUModel: "AMD EPYC 7B13", CPUs: 2, Host: "a", Start: start}
	pass.Meta, enc.Meta = direct.Meta, direct.Meta
	return []*result.Kafka{direct, pass, enc}
}

func TestCompare(t *testing.T) {
	var b bytes.Buffer
	runs := layerRuns()
	runs[2].Meta.CPUs = 8
	if err := Compare(&b, runs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	golden(t, "compare.md", out)
	for _, want := range []string{
		"| p50 | 1.00 | 1.90 | +0.900 (+90.0%) | 2.50 | +1.50 (+150.0%) |",
		// Windows 6..10 against 1..5: every pair favours passthrough,
		// U = 25 of 25; exact p = 2/252.
		"- passthrough vs direct: U = 25 of 25, p = 0.0079: **significant**",
		// End to end, shifted by 0.5: U = 15 and 87 of the 252
		// orderings give U >= 15, so p = 2·87/252 = 0.6905.
		"- passthrough vs direct: U = 15 of 25, p = 0.6905: not significant",
		"- encrypt (invalid) vs direct: n/a (fewer than 5 windows: 5 and 3;",
		"| consume rate (msg/s) | 1000 | 1000 | 0 | 900 | -100 (-10.0%) |",
		"| strait CPU (cores) | – |",
		"**encrypt (invalid) does not count: backlog of 5 records at the end.**",
		"- direct: commit 0123456789ab · go1.26.8 · AMD EPYC 7B13 × 2 · on a · started 2026-12-01 10:00:00 UTC\n",
		"**The runs were made on different machines (AMD EPYC 7B13 × 2; AMD EPYC 7B13 × 8)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
	if err := Compare(&b, nil); err == nil {
		t.Error("Compare of no runs succeeded")
	}
}

func TestLayers(t *testing.T) {
	var b bytes.Buffer
	if err := Layers(&b, layerRuns()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	golden(t, "layers.md", out)
	for _, want := range []string{
		"| direct | 1.00 | 2.00 | 3.00 | 5.00 |",
		"### Each layer's share of publish latency (ms)",
		"| passthrough over direct | +0.900 | +2.90 | +10.20 | +15.00 |",
		"| encrypt over passthrough (invalid) | +0.600 | +1.10 | +1.80 | +10.00 |",
		"| passthrough over direct | +1.00 | +2.00 | +3.00 | +2.00 |", // end to end
	} {
		if !strings.Contains(out, want) {
			t.Errorf("layer table lacks %q", want)
		}
	}
	if err := Layers(&b, nil); err == nil {
		t.Error("Layers of no runs succeeded")
	}
}

func TestTable(t *testing.T) {
	runs := layerRuns()
	runs[1].Errors, runs[1].ErrorKinds = 3, map[string]int64{"timeout": 1, "NOT_LEADER_FOR_PARTITION": 2}
	var b bytes.Buffer
	if err := Table(&b, runs[1]); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	golden(t, "table.txt", out)
	for _, want := range []string{
		"passthrough: valid\n",
		"errors 3 (NOT_LEADER_FOR_PARTITION 2, timeout 1)",
		"latency (ms)   p50   p75   p95    p99  p99.9    max  mean  count\n",
		"publish       1.90  3.40  4.90  13.20  20.00  40.00  2.09   1000\n",
		// 6 CPU-seconds over 60 s: 0.1 cores.
		"strait     7      6  0.100            32          100\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	b.Reset()
	if err := Table(&b, runs[2]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "encrypt: INVALID, does not count\n  - backlog of 5 records at the end\n") {
		t.Errorf("an invalid run's table does not say so:\n%s", b.String())
	}
}

func TestSweepTable(t *testing.T) {
	var b bytes.Buffer
	if err := SweepTable(&b, fixtureSweep()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	golden(t, "sweep.md", out)
	for _, want := range []string{
		"| 16000 | 4 | 16000 | 4.50 | 7.20 | sustained |",
		"| 32000 | 4 | 18700 | 80.00 | 128.0 | saturated |",
		"Last sustained rate: 16000 msg/s (publish p99 4.50 ms).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sweep table lacks %q", want)
		}
	}
	none := &result.Sweep{Steps: []result.SweepStep{{Target: 100, Achieved: 10}}}
	result.Finish(none)
	b.Reset()
	if err := SweepTable(&b, none); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No step was sustained") {
		t.Errorf("a sweep with no sustained step does not say so:\n%s", b.String())
	}
}
