package cli

import (
	"testing"

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
