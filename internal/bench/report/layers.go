package report

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
)

// Layers writes the layer table of Kafka runs, one per setup from the
// bare broker up, each layer's share measured over the setup before it.
// See LayerTable.
func Layers(w io.Writer, runs []*result.Kafka) error {
	return LayerRuns(w, KafkaRuns(runs))
}

// LayerRuns writes the layer table of runs in layer order, the bare
// system first, each layer's share measured over the setup before it.
func LayerRuns(w io.Writer, runs []Run) error {
	layers := make([]Layer, len(runs))
	for i, r := range runs {
		layers[i] = Layer{Run: r, Over: i - 1}
	}
	return LayerTable(w, layers)
}

// Layer is one setup of a layer table.
type Layer struct {
	Run
	// Payload names what the setup's producers sent ("random", "avro,
	// schema id 1"). The tables show it when the setups' payloads differ.
	Payload string
	// Over is the index of the earlier setup this one's share is measured
	// over: the same system without the layer, sending the same payload
	// if the run has such a setup. The first setup has none.
	Over int
}

// LayerTable writes, for each latency series, a markdown table of p50,
// p95, p99 and p99.9 per setup, then each layer's share: the difference of
// each setup over its baseline ("passthrough over direct"), which is what
// that layer costs. When the setups' payloads differ, the tables show each
// setup's payload, and a share taken over a setup of another payload says
// so. A run that does not count is marked, and so is every share it takes
// part in.
func LayerTable(w io.Writer, layers []Layer) error {
	if len(layers) == 0 {
		return errors.New("no layers to show: no runs")
	}
	for i, l := range layers[1:] {
		if l.Over < 0 || l.Over > i {
			return fmt.Errorf("layer %s: its share is measured over setup %d, which is not an earlier setup", plainLabel(l.Run, i+1), l.Over)
		}
	}
	runs := runsOf(layers)
	payloads := payloadsDiffer(layers)
	var b strings.Builder
	header := []string{"setup"}
	if payloads {
		header = append(header, "payload")
	}
	shareHeader := []string{"layer"}
	for _, p := range layerPercentiles {
		header = append(header, p.name)
		shareHeader = append(shareHeader, p.name)
	}
	for _, name := range seriesNames(runs) {
		fmt.Fprintf(&b, "## %s latency (ms)\n\n", title(name))
		mdRow(&b, header...)
		layerRule(&b, len(header), payloads)
		for i, l := range layers {
			lat, ok := l.series(name)
			row := []string{l.label(i)}
			if payloads {
				row = append(row, l.Payload)
			}
			for _, p := range layerPercentiles {
				row = append(row, cell(ok, p.get(lat)))
			}
			mdRow(&b, row...)
		}
		b.WriteString("\n")
		if len(layers) < 2 {
			continue
		}
		fmt.Fprintf(&b, "### Each layer's share of %s latency (ms)\n\n", name)
		mdRow(&b, shareHeader...)
		mdRule(&b, len(shareHeader))
		for i := 1; i < len(layers); i++ {
			mdRow(&b, shareRow(layers, i, name)...)
		}
		b.WriteString("\n")
	}
	writeRates(&b, layers, payloads)
	for _, note := range invalidNotes(runs) {
		fmt.Fprintf(&b, "**%s**\n\n", note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shareRow is the row of layer i's share of the series called name: its
// difference over its baseline at each percentile.
func shareRow(layers []Layer, i int, name string) []string {
	cur, base := layers[i], layers[layers[i].Over]
	label := fmt.Sprintf("%s over %s", plainLabel(cur.Run, i), plainLabel(base.Run, cur.Over))
	if cur.Payload != base.Payload {
		label += " (payload differs)"
	}
	if !cur.Valid || !base.Valid {
		label += " (invalid)"
	}
	row := []string{label}
	l, ok := cur.series(name)
	bl, bok := base.series(name)
	for _, p := range layerPercentiles {
		if ok && bok {
			row = append(row, signed(p.get(l)-p.get(bl)))
		} else {
			row = append(row, "–")
		}
	}
	return row
}

func runsOf(layers []Layer) []Run {
	runs := make([]Run, len(layers))
	for i, l := range layers {
		runs[i] = l.Run
	}
	return runs
}

// payloadsDiffer reports whether the setups did not all send the same
// payload, so that the tables must say which each sent.
func payloadsDiffer(layers []Layer) bool {
	for _, l := range layers[1:] {
		if l.Payload != layers[0].Payload {
			return true
		}
	}
	return false
}

// layerRule is the rule under a setup table's header: the setup and, when
// shown, the payload left-aligned, the figures right-aligned.
func layerRule(b *strings.Builder, columns int, payload bool) {
	if !payload {
		mdRule(b, columns)
		return
	}
	b.WriteString("|---")
	mdRule(b, columns-1)
}

// writeRates adds a table of every setup's other figures (rates, errors,
// watched processes' CPU and memory), so the sizing coefficient of each
// layer sits next to its latency; first its payload, if they differ.
func writeRates(b *strings.Builder, layers []Layer, payloads bool) {
	runs := runsOf(layers)
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
	if payloads {
		row := []string{"payload"}
		for _, l := range layers {
			row = append(row, l.Payload)
		}
		mdRow(b, row...)
	}
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
