package report

import (
	"fmt"
	"io"
	"slices"
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
	writeLatencyTable(&b, LLMRun(r).Series)
	procs := r.Processes
	if r.Generator != nil {
		procs = append(slices.Clone(procs), *r.Generator)
	}
	writeProcessTable(&b, procs, r.DurationS, "CPU ms per 1k req", func(p result.Process) float64 { return p.CPUPerKRequests })
	writeCPUPerRequest(&b, procs)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCPUPerRequest writes the line that sizes each process by requests:
// microseconds of CPU per request answered.
func writeCPUPerRequest(b *strings.Builder, ps []result.Process) {
	var parts []string
	for _, p := range ps {
		if p.CPUMicrosPerRequest > 0 {
			parts = append(parts, fmt.Sprintf("%s (pid %d) %s µs", processName(p), p.PID, num(p.CPUMicrosPerRequest)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\nCPU per request: %s\n", strings.Join(parts, ", "))
	}
}
