package report

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
)

// Layers writes the layer table of Kafka runs, one per setup from the
// bare broker up. See LayerRuns.
func Layers(w io.Writer, runs []*result.Kafka) error {
	return LayerRuns(w, KafkaRuns(runs))
}

// LayerRuns writes, for each latency series, a markdown table of p50, p95,
// p99 and p99.9 per setup, then each layer's share: the difference of each
// setup over the one before it ("passthrough over direct"), which is what
// that layer costs. Runs are in layer order, the bare system first. A run
// that does not count is marked, and so is every share it takes part in.
func LayerRuns(w io.Writer, runs []Run) error {
	if len(runs) == 0 {
		return errors.New("no layers to show: no runs")
	}
	var b strings.Builder
	header := []string{"setup"}
	for _, p := range layerPercentiles {
		header = append(header, p.name)
	}
	for _, name := range seriesNames(runs) {
		fmt.Fprintf(&b, "## %s latency (ms)\n\n", title(name))
		mdRow(&b, header...)
		mdRule(&b, len(header))
		for i, r := range runs {
			l, ok := r.series(name)
			row := []string{r.label(i)}
			for _, p := range layerPercentiles {
				row = append(row, cell(ok, p.get(l)))
			}
			mdRow(&b, row...)
		}
		b.WriteString("\n")
		if len(runs) < 2 {
			continue
		}
		fmt.Fprintf(&b, "### Each layer's share of %s latency (ms)\n\n", name)
		mdRow(&b, append([]string{"layer"}, header[1:]...)...)
		mdRule(&b, len(header))
		for i := 1; i < len(runs); i++ {
			cur, prev := runs[i], runs[i-1]
			row := []string{fmt.Sprintf("%s over %s", plainLabel(cur, i), plainLabel(prev, i-1))}
			if !cur.Valid || !prev.Valid {
				row[0] += " (invalid)"
			}
			l, ok := cur.series(name)
			pl, pok := prev.series(name)
			for _, p := range layerPercentiles {
				if ok && pok {
					row = append(row, signed(p.get(l)-p.get(pl)))
				} else {
					row = append(row, "–")
				}
			}
			mdRow(&b, row...)
		}
		b.WriteString("\n")
	}
	writeRates(&b, runs)
	for _, note := range invalidNotes(runs) {
		fmt.Fprintf(&b, "**%s**\n\n", note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRates adds a table of every setup's other figures (rates, errors,
// watched processes' CPU and memory), so the sizing coefficient of each
// layer sits next to its latency.
func writeRates(b *strings.Builder, runs []Run) {
	names := metricNames(runs)
	if len(names) == 0 {
		return
	}
	b.WriteString("## Rates and resources\n\n")
	header := []string{""}
	for i, r := range runs {
		header = append(header, r.label(i))
	}
	mdRow(b, header...)
	mdRule(b, len(header))
	for _, n := range names {
		row := []string{metricLabel(runs, n)}
		for _, r := range runs {
			m, ok := r.metric(n)
			row = append(row, cell(ok, m.Value))
		}
		mdRow(b, row...)
	}
	b.WriteString("\n")
}

// plainLabel is r's label without the invalid mark.
func plainLabel(r Run, i int) string {
	r.Valid = true
	return r.label(i)
}
