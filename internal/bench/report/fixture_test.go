package report

import (
	"flag"
	"math"
	"math/rand/v2"
	"time"

	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/bench/stats"
)

var writeHTML = flag.String("write-html", "", "also write the test pages into this directory, to look at")

var start = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// latencies records n log-normal latencies with the given median (ms) and
// spread into a recorder with 1 s windows over 30 s, and returns the
// summary, as a run of the generator would.
func latencies(seed uint64, median, spread float64, n int) result.Latency {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := stats.NewRecorder(time.Second)
	r.Start(start)
	for i := range n {
		now := start.Add(time.Duration(i) * 30 * time.Second / time.Duration(n))
		r.Tick(now)
		ms := median * math.Exp(spread*rng.NormFloat64())
		r.Record(time.Duration(ms * float64(time.Millisecond)))
	}
	r.Finish(start.Add(30 * time.Second))
	return r.Snapshot()
}

func fixtureRun(label string, seed uint64, pubMedian float64, valid bool) *result.Kafka {
	k := &result.Kafka{
		Schema: result.SchemaVersion, Kind: result.KindKafka, Label: label,
		Meta: result.Meta{Commit: "89abcdef0123456789abcdef0123456789abcdef", GoVersion: "go1.26.8",
			CPUModel: "AMD EPYC 7B13", CPUs: 2, Start: start, Host: "bench-1", Command: "strait bench kafka"},
		Valid:       valid,
		TargetRate:  5000,
		PublishRate: 4998.5, ConsumeRate: 4998.5, PublishMBps: 5.12, ConsumeMBps: 5.12,
		Published: 149955, Consumed: 149955,
		DurationS: 30, WarmupS: 5,
		PublishLatency: latencies(seed, pubMedian, 0.45, 20000),
		E2ELatency:     latencies(seed+100, pubMedian*1.8, 0.5, 20000),
		Processes:      []result.Process{{PID: 4242, Name: "strait", CPUSeconds: 9, PeakRSSBytes: 48 << 20, MsCPUPerMBps: 58.6}},
	}
	if !valid {
		k.Problems = []string{"consume rate 4100 msg/s is 18% below the publish rate", "backlog of 2300 records at the end"}
	}
	return k
}

func fixtureSweep() *result.Sweep {
	s := &result.Sweep{Label: "passthrough", Mode: result.ModeRate, Meta: fixtureRun("x", 1, 1, true).Meta}
	for i, target := range []float64{2000, 4000, 8000, 16000, 32000, 64000} {
		achieved := target
		if target > 16000 {
			achieved = 17500 + float64(i)*300
		}
		p99 := 2.5 + target/8000
		if target > 16000 {
			p99 = 40 * float64(i-2)
		}
		s.Steps = append(s.Steps, result.SweepStep{Target: target, Producers: 4, Achieved: achieved, P99: p99, E2EP99: p99 * 1.6})
	}
	result.Finish(s)
	return s
}
