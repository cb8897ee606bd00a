package cli

import (
	"path/filepath"
	"testing"

	"github.com/straitgw/strait/internal/kms/vault"

	"github.com/straitgw/strait/internal/bench/result"
)

func TestMedianRoundPrefersValidRoundsAndTakesTheMiddleP99(t *testing.T) {
	run := func(label string, p99 float64, valid bool) *result.Kafka {
		return &result.Kafka{Label: label, Valid: valid, PublishLatency: result.Latency{P99: p99}}
	}
	for _, tc := range []struct {
		rounds []*result.Kafka
		want   string
	}{
		{[]*result.Kafka{run("a", 9, true), run("b", 1, true), run("c", 5, true)}, "c"},
		{[]*result.Kafka{run("a", 9, true), run("b", 1, true)}, "b"},                     // the lower middle
		{[]*result.Kafka{run("a", 9, true), run("b", 1, false), run("c", 5, true)}, "c"}, // b does not count
		{[]*result.Kafka{run("a", 9, false), run("b", 1, false)}, "b"},                   // none counts: still one
		{[]*result.Kafka{run("a", 3, true)}, "a"},
	} {
		if got := medianRound(tc.rounds).Label; got != tc.want {
			t.Errorf("median of %v: %s, want %s", labels(tc.rounds), got, tc.want)
		}
	}
}

func labels(rs []*result.Kafka) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Label)
	}
	return out
}

// Every layer config in bench/layers loads with the environment `strait
// bench layers` gives it (the schemas it writes included), so a layer run
// does not fail minutes in on a config error.
func TestBenchLayerConfigsLoad(t *testing.T) {
	dir := t.TempDir()
	if err := writeBenchSchemas(filepath.Join(dir, "schemas")); err != nil {
		t.Fatal(err)
	}
	if _, err := vault.CreateKey(filepath.Join(dir, "vault"), "bench-kek"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRAIT_BENCH_BROKER", "127.0.0.1:9")
	t.Setenv("STRAIT_BENCH_LISTEN", "127.0.0.1:10")
	t.Setenv("STRAIT_BENCH_ADMIN", "127.0.0.1:8")
	t.Setenv("STRAIT_BENCH_VAULT", filepath.Join(dir, "vault"))
	t.Setenv("STRAIT_BENCH_SCHEMAS", filepath.Join(dir, "schemas"))
	paths, err := filepath.Glob("../../bench/layers/*.yaml")
	if err != nil || len(paths) < 5 {
		t.Fatalf("bench/layers: %v %v", paths, err)
	}
	for _, p := range paths {
		if _, _, err := loadConfig(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
