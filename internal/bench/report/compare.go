package report

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/bench/stats"
)

// Significance is the level below which a p-value counts as significant.
const Significance = 0.05

// MinWindows is the fewest per-window samples each run needs before a
// difference is tested. Below four a side, a two-sided Mann-Whitney test
// cannot reach p < 0.05 whatever the data (3 against 3 gives at best
// p = 0.1); five leaves a little room.
const MinWindows = 5

// Compare writes a markdown comparison of Kafka runs; the first is the
// baseline. See CompareRuns.
func Compare(w io.Writer, runs []*result.Kafka) error {
	return CompareRuns(w, KafkaRuns(runs))
}

// CompareRuns writes a markdown comparison of runs, the first being the
// baseline: for each latency series a table of percentiles with a column
// per run and the difference from the baseline (absolute and percent),
// then whether the difference in per-window p99 is significant (a
// two-sided Mann-Whitney U test at p < 0.05); then a table of the other
// metrics.
func CompareRuns(w io.Writer, runs []Run) error {
	if len(runs) == 0 {
		return errors.New("nothing to compare: no runs")
	}
	var b strings.Builder
	base := runs[0]
	header := []string{""}
	for i, r := range runs {
		header = append(header, r.label(i))
		if i > 0 {
			header = append(header, "Δ "+r.label(i))
		}
	}
	fmt.Fprintf(&b, "Baseline: %s. Δ is each run minus the baseline.\n\n", base.label(0))
	for i, r := range runs {
		if line := metaLine(r.Meta); line != "" {
			fmt.Fprintf(&b, "- %s: %s\n", r.label(i), line)
		}
	}
	if machines := distinct(runs, func(m result.Meta) string { return fmt.Sprintf("%s × %d", m.CPUModel, m.CPUs) }); len(machines) > 1 {
		fmt.Fprintf(&b, "\n**The runs were made on different machines (%s): differences may be the machines'.**\n", strings.Join(machines, "; "))
	}
	b.WriteString("\n")

	for _, name := range seriesNames(runs) {
		fmt.Fprintf(&b, "## %s latency (ms)\n\n", title(name))
		mdRow(&b, header...)
		mdRule(&b, len(header))
		for _, p := range tablePercentiles {
			row := []string{p.name}
			bl, bok := base.series(name)
			for i, r := range runs {
				l, ok := r.series(name)
				row = append(row, cell(ok, p.get(l)))
				if i > 0 {
					if ok && bok {
						row = append(row, delta(p.get(l), p.get(bl)))
					} else {
						row = append(row, "")
					}
				}
			}
			mdRow(&b, row...)
		}
		b.WriteString("\n")
		if len(runs) > 1 {
			fmt.Fprintf(&b, "Per-window p99, Mann-Whitney U (two-sided, significant at p < %g):\n\n", Significance)
			bl, _ := base.series(name)
			for i, r := range runs[1:] {
				l, _ := r.series(name)
				fmt.Fprintf(&b, "- %s vs %s: %s\n", r.label(i+1), base.label(0), significance(bl.WindowP99, l.WindowP99))
			}
			b.WriteString("\n")
		}
	}

	if names := metricNames(runs); len(names) > 0 {
		b.WriteString("## Throughput and resources\n\n")
		mdRow(&b, header...)
		mdRule(&b, len(header))
		for _, name := range names {
			bm, bok := base.metric(name)
			row := []string{metricLabel(runs, name)}
			for i, r := range runs {
				m, ok := r.metric(name)
				if ok {
					row = append(row, num(m.Value))
				} else {
					row = append(row, "–")
				}
				if i > 0 {
					row = append(row, metricDelta(ok && bok, m.Value, bm.Value))
				}
			}
			mdRow(&b, row...)
		}
		b.WriteString("\n")
	}

	for _, note := range invalidNotes(runs) {
		fmt.Fprintf(&b, "**%s**\n\n", note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// distinct returns the different values of key over the runs' metadata,
// ignoring runs without any.
func distinct(runs []Run, key func(result.Meta) string) []string {
	var out []string
	for _, r := range runs {
		if r.Meta.CPUModel == "" && r.Meta.CPUs == 0 {
			continue
		}
		if k := key(r.Meta); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// metricLabel is the name of a metric with its unit, from the first run
// that gives one.
func metricLabel(runs []Run, name string) string {
	for _, r := range runs {
		if m, ok := r.metric(name); ok && m.Unit != "" {
			return name + " (" + m.Unit + ")"
		}
	}
	return name
}

// cell formats a latency, or a dash when the run lacks the series.
func cell(ok bool, v float64) string {
	if !ok {
		return "–"
	}
	return ms(v)
}

func metricDelta(ok bool, v, base float64) string {
	if !ok {
		return ""
	}
	d := v - base
	if d == 0 {
		return "0"
	}
	s := "+" + num(d)
	if d < 0 {
		s = "-" + num(-d)
	}
	if base != 0 {
		s += " (" + percent(d/base*100) + ")"
	}
	return s
}

// significance tests whether two runs' per-window p99 samples differ and
// says so in words.
func significance(base, other []float64) string {
	if len(base) < MinWindows || len(other) < MinWindows {
		return fmt.Sprintf("n/a (fewer than %d windows: %d and %d; run longer or with a shorter --window)", MinWindows, len(base), len(other))
	}
	u, p := stats.MannWhitney(other, base)
	verdict := "not significant"
	if p < Significance {
		verdict = "**significant**"
	}
	return fmt.Sprintf("U = %s of %d, %s: %s (median window p99 %s → %s ms; %d and %d windows)",
		num(u), len(base)*len(other), pValue(p), verdict, ms(median(base)), ms(median(other)), len(base), len(other))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
