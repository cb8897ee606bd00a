package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
)

// Run is one benchmark run as the reports see it.
type Run struct {
	Label string
	// Valid says whether the run counts; Problems says why not.
	Valid    bool
	Problems []string
	Meta     result.Meta
	// Series are the run's latency distributions, in display order. Runs
	// compared with each other match series by Name.
	Series []Series
	// Metrics are other figures worth comparing (rates, errors, CPU), in
	// display order, matched by Name too.
	Metrics []Metric
}

// Series is one named latency distribution, such as "publish".
type Series struct {
	Name    string
	Latency result.Latency
}

// Metric is one named figure of a run. Unit is shown after the name.
type Metric struct {
	Name  string
	Unit  string
	Value float64
}

// Names of the Kafka series.
const (
	SeriesPublish = "publish"
	SeriesE2E     = "end-to-end"
)

// KafkaRun converts a Kafka result to a Run.
func KafkaRun(k *result.Kafka) Run {
	r := Run{
		Label:    k.Label,
		Valid:    k.Valid,
		Problems: k.Problems,
		Meta:     k.Meta,
		Series: []Series{
			{SeriesPublish, k.PublishLatency},
			{SeriesE2E, k.E2ELatency},
		},
		Metrics: []Metric{
			{"target rate", "msg/s", k.TargetRate},
			{"publish rate", "msg/s", k.PublishRate},
			{"consume rate", "msg/s", k.ConsumeRate},
			{"publish throughput", "MB/s", k.PublishMBps},
			{"errors", "", float64(k.Errors)},
			{"peak backlog", "records", float64(k.PeakBacklog)},
		},
	}
	if c := k.CountedRequests(); c != nil {
		r.Metrics = append(r.Metrics, Metric{"Kafka requests", "req/s", c.PerSecond})
	}
	r.Metrics = append(r.Metrics, processMetrics(k.Processes, k.DurationS, Metric{Name: "CPU per MB/s", Unit: "mc"},
		func(p result.Process) float64 { return p.MsCPUPerMBps }, kafkaRequestMetrics)...)
	return r
}

// processMetrics are each watched process's CPU, sizing figure (named and
// measured by sizing and figure), the figures more returns (if not nil)
// and peak memory.
func processMetrics(ps []result.Process, durationS float64, sizing Metric, figure func(result.Process) float64, more func(result.Process) []Metric) []Metric {
	var out []Metric
	for _, p := range ps {
		name := processName(p)
		out = append(out,
			Metric{name + " CPU", "cores", cores(p, durationS)},
			Metric{name + " " + sizing.Name, sizing.Unit, figure(p)},
		)
		if more != nil {
			out = append(out, more(p)...)
		}
		out = append(out, Metric{name + " peak RSS", "MiB", float64(p.PeakRSSBytes) / (1 << 20)})
	}
	return out
}

// KafkaRuns converts Kafka results to Runs.
func KafkaRuns(ks []*result.Kafka) []Run {
	out := make([]Run, len(ks))
	for i, k := range ks {
		out[i] = KafkaRun(k)
	}
	return out
}

func processName(p result.Process) string {
	if p.Name == "" {
		return fmt.Sprintf("pid %d", p.PID)
	}
	return p.Name
}

// cores is the average number of cores p used over durationS seconds.
func cores(p result.Process, durationS float64) float64 {
	if durationS <= 0 {
		return 0
	}
	return p.CPUSeconds / durationS
}

// label is r's label for tables: "run N" when it has none, marked when
// the run does not count.
func (r Run) label(i int) string {
	l := r.Label
	if l == "" {
		l = fmt.Sprintf("run %d", i+1)
	}
	if !r.Valid {
		l += " (invalid)"
	}
	return l
}

// series returns r's series called name, if it has one.
func (r Run) series(name string) (result.Latency, bool) {
	for _, s := range r.Series {
		if s.Name == name {
			return s.Latency, true
		}
	}
	return result.Latency{}, false
}

func (r Run) metric(name string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// seriesNames returns the names of the series of all runs, in the order
// they first appear.
func seriesNames(runs []Run) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range runs {
		for _, s := range r.Series {
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	return names
}

func metricNames(runs []Run) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range runs {
		for _, m := range r.Metrics {
			if !seen[m.Name] {
				seen[m.Name] = true
				names = append(names, m.Name)
			}
		}
	}
	return names
}

// invalidNotes returns one line per run that does not count, saying why.
func invalidNotes(runs []Run) []string {
	var out []string
	for i, r := range runs {
		if r.Valid {
			continue
		}
		why := "no reason recorded"
		if len(r.Problems) > 0 {
			why = strings.Join(r.Problems, "; ")
		}
		out = append(out, fmt.Sprintf("%s does not count: %s.", r.label(i), strings.TrimSuffix(why, ".")))
	}
	return out
}

// sortedKinds returns the keys of m sorted, for stable output.
func sortedKinds(m map[string]int64) []string {
	return slices.Sorted(maps.Keys(m))
}

// metaLine is the run's provenance in one line.
func metaLine(m result.Meta) string {
	var parts []string
	if m.Commit != "" {
		parts = append(parts, "commit "+shortCommit(m.Commit))
	}
	if m.GoVersion != "" {
		parts = append(parts, m.GoVersion)
	}
	if m.CPUModel != "" {
		parts = append(parts, fmt.Sprintf("%s × %d", m.CPUModel, m.CPUs))
	}
	if m.Host != "" {
		parts = append(parts, "on "+m.Host)
	}
	if !m.Start.IsZero() {
		parts = append(parts, "started "+m.Start.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	return strings.Join(parts, " · ")
}

func shortCommit(c string) string {
	rev, dirty := strings.CutSuffix(c, "+dirty")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// Names of the LLM series.
const (
	SeriesLatency    = "complete answer"
	SeriesFirstEvent = "first event"
)

// LLMRun converts an LLM result to a Run.
func LLMRun(l *result.LLM) Run {
	r := Run{
		Label:    l.Label,
		Valid:    l.Valid,
		Problems: l.Problems,
		Meta:     l.Meta,
		Series:   []Series{{SeriesLatency, l.Latency}},
		Metrics: []Metric{
			{"target rate", "req/s", l.TargetRate},
			{"throughput", "req/s", l.Throughput},
			{"due", "requests", float64(l.Due)},
			{"sent", "requests", float64(l.Sent)},
			{"ok", "requests", float64(l.OK)},
			{"errors", "", float64(l.Errors)},
			{"peak in flight", "requests", float64(l.PeakInflight)},
		},
	}
	if l.FirstEvent != nil {
		r.Series = append(r.Series, Series{SeriesFirstEvent, *l.FirstEvent})
	}
	r.Metrics = append(r.Metrics, processMetrics(l.Processes, l.DurationS, Metric{Name: "CPU per 1,000 requests", Unit: "ms"},
		func(p result.Process) float64 { return p.CPUPerKRequests }, nil)...)
	return r
}

// AnyRun converts a result document (*result.Kafka or *result.LLM) to a
// Run; ok is false for other documents.
func AnyRun(doc any) (Run, bool) {
	switch d := doc.(type) {
	case *result.Kafka:
		return KafkaRun(d), true
	case *result.LLM:
		return LLMRun(d), true
	}
	return Run{}, false
}
