package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
)

// LLMTable writes the plain-text summary printed at the end of an LLM run:
// whether it counts, requests due, sent and answered, statuses and errors,
// the latency percentiles and what each watched process used.
func LLMTable(w io.Writer, r *result.LLM) error {
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
	fmt.Fprintf(&b, "measured %s s after %s s of warm-up; target %s req/s\n", num(r.DurationS), num(r.WarmupS), num(r.TargetRate))
	fmt.Fprintf(&b, "due %d, sent %d, ok %d (%s req/s), errors %d; peak in flight %d\n",
		r.Due, r.Sent, r.OK, num(r.Throughput), r.Errors, r.PeakInflight)
	if len(r.Statuses) > 0 {
		var parts []string
		for _, k := range sortedKinds(r.Statuses) {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, r.Statuses[k]))
		}
		fmt.Fprintf(&b, "statuses: %s\n", strings.Join(parts, ", "))
	}
	if len(r.ErrorKinds) > 0 {
		var parts []string
		for _, k := range sortedKinds(r.ErrorKinds) {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, r.ErrorKinds[k]))
		}
		fmt.Fprintf(&b, "errors: %s\n", strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	rows := [][]string{{"latency (ms)"}}
	for _, p := range tablePercentiles {
		rows[0] = append(rows[0], p.name)
	}
	rows[0] = append(rows[0], "count")
	for _, s := range LLMRun(r).Series {
		row := []string{s.Name}
		for _, p := range tablePercentiles {
			row = append(row, ms(p.get(s.Latency)))
		}
		rows = append(rows, append(row, fmt.Sprint(s.Latency.Count)))
	}
	textTable(&b, rows)
	if len(r.Processes) > 0 {
		b.WriteString("\n")
		rows := [][]string{{"process", "pid", "CPU s", "cores", "peak RSS MiB", "CPU ms per 1k req"}}
		for _, p := range r.Processes {
			rows = append(rows, []string{processName(p), fmt.Sprint(p.PID), num(p.CPUSeconds),
				num(cores(p, r.DurationS)), num(float64(p.PeakRSSBytes) / (1 << 20)), num(p.CPUPerKRequests)})
		}
		textTable(&b, rows)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
