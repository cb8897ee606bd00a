package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
)

// Table writes the plain-text summary printed at the end of a Kafka run:
// whether it counts, rates, counts, backlog, the latency percentiles and
// what each watched process used.
func Table(w io.Writer, r *result.Kafka) error {
	var b strings.Builder
	label := r.Label
	if label == "" {
		label = "run"
	}
	if r.Valid {
		fmt.Fprintf(&b, "%s: valid\n", label)
	} else {
		fmt.Fprintf(&b, "%s: INVALID, does not count\n", label)
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	target := "as fast as possible (closed loop)"
	if r.TargetRate > 0 {
		target = num(r.TargetRate) + " msg/s"
	}
	fmt.Fprintf(&b, "measured %s s after %s s of warm-up; target %s\n", num(r.DurationS), num(r.WarmupS), target)
	fmt.Fprintf(&b, "published %d (%s msg/s, %s MB/s), consumed %d (%s msg/s, %s MB/s)\n",
		r.Published, num(r.PublishRate), num(r.PublishMBps), r.Consumed, num(r.ConsumeRate), num(r.ConsumeMBps))
	fmt.Fprintf(&b, "errors %d", r.Errors)
	if len(r.ErrorKinds) > 0 {
		var kinds []string
		for _, k := range sortedKinds(r.ErrorKinds) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, r.ErrorKinds[k]))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintf(&b, "; backlog peak %d, final %d\n\n", r.PeakBacklog, r.FinalBacklog)

	writeLatencyTable(&b, KafkaRun(r).Series)
	writeProcessTable(&b, r.Processes, r.DurationS, "mc per MB/s", func(p result.Process) float64 { return p.MsCPUPerMBps })
	writeKafkaRequests(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLatencyTable writes the plain-text percentile table of series.
func writeLatencyTable(b *strings.Builder, series []Series) {
	rows := [][]string{{"latency (ms)"}}
	for _, p := range tablePercentiles {
		rows[0] = append(rows[0], p.name)
	}
	rows[0] = append(rows[0], "count")
	for _, s := range series {
		row := []string{s.Name}
		for _, p := range tablePercentiles {
			row = append(row, ms(p.get(s.Latency)))
		}
		rows = append(rows, append(row, fmt.Sprint(s.Latency.Count)))
	}
	textTable(b, rows)
}

// writeProcessTable writes what each watched process used; the last
// column is the run kind's sizing figure.
func writeProcessTable(b *strings.Builder, ps []result.Process, durationS float64, sizing string, figure func(result.Process) float64) {
	if len(ps) == 0 {
		return
	}
	b.WriteString("\n")
	rows := [][]string{{"process", "pid", "CPU s", "cores", "peak RSS MiB", sizing}}
	for _, p := range ps {
		rows = append(rows, []string{processName(p), fmt.Sprint(p.PID), num(p.CPUSeconds),
			num(cores(p, durationS)), num(float64(p.PeakRSSBytes) / (1 << 20)), num(figure(p))})
	}
	textTable(b, rows)
}

// SweepTable writes a markdown table of a sweep: each step's target,
// producers, achieved rate and p99s, whether it was saturated or invalid,
// and the last sustained rate.
func SweepTable(w io.Writer, s *result.Sweep) error {
	var b strings.Builder
	what := "target rate"
	if s.Mode == result.ModeProducers {
		what = "producer count"
	}
	heading := "Sweep of the " + what
	if s.Label != "" {
		heading += ": " + s.Label
	}
	fmt.Fprintf(&b, "## %s\n\n", heading)
	header := []string{"target (msg/s)", "producers", "achieved (msg/s)", "publish p99 (ms)", "e2e p99 (ms)", "state"}
	mdRow(&b, header...)
	b.WriteString("|---:|---:|---:|---:|---:|---|\n")
	for _, st := range s.Steps {
		var state []string
		if st.Saturated {
			state = append(state, "saturated")
		}
		if st.Result != nil && !st.Result.Valid {
			state = append(state, "invalid")
		}
		if len(state) == 0 {
			state = append(state, "sustained")
		}
		target := num(st.Target)
		if st.Target == 0 {
			target = "max"
		}
		mdRow(&b, target, fmt.Sprint(st.Producers), num(st.Achieved), ms(st.P99), ms(st.E2EP99), strings.Join(state, ", "))
	}
	b.WriteString("\n")
	if s.LastSustained > 0 {
		fmt.Fprintf(&b, "Last sustained rate: %s msg/s (publish p99 %s ms). A step is saturated when it achieves more than 5%% below its target.\n",
			num(s.LastSustained), ms(s.LastSustainedP99))
	} else {
		b.WriteString("No step was sustained: even the first achieved more than 5% below its target, or its run was invalid.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
