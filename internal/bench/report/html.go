package report

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/bench/stats"
)

// SweepView is a sweep as the HTML page draws it: achieved rate and
// latency percentiles against the load stepped.
type SweepView struct {
	Label string
	Meta  result.Meta
	// XTitle names what was stepped, with its unit: "target rate
	// (msg/s)" or "producers".
	XTitle string
	// RateUnit is the unit of Target and Achieved.
	RateUnit string
	// SeriesNames name the latencies in each point's P99, in order.
	SeriesNames []string
	Points      []SweepPoint
	// LastSustained is the last rate kept up with, and LastSustainedP99
	// the p99 of the first series there; 0 when none was.
	LastSustained, LastSustainedP99 float64
}

// SweepPoint is one step of a sweep.
type SweepPoint struct {
	X                  float64 // the value stepped
	Target, Achieved   float64 // rates, in RateUnit
	P99                []float64
	Saturated, Invalid bool
	Producers          int
}

// KafkaSweep converts a Kafka sweep to a SweepView.
func KafkaSweep(s *result.Sweep) SweepView {
	v := SweepView{
		Label:            s.Label,
		Meta:             s.Meta,
		XTitle:           "target rate (msg/s)",
		RateUnit:         "msg/s",
		SeriesNames:      []string{SeriesPublish, SeriesE2E},
		LastSustained:    s.LastSustained,
		LastSustainedP99: s.LastSustainedP99,
	}
	if s.Mode == result.ModeProducers {
		v.XTitle = "producers"
	}
	for _, st := range s.Steps {
		p := SweepPoint{
			X: st.Target, Target: st.Target, Achieved: st.Achieved,
			P99:       []float64{st.P99, st.E2EP99},
			Saturated: st.Saturated, Invalid: st.Result != nil && !st.Result.Valid,
			Producers: st.Producers,
		}
		if s.Mode == result.ModeProducers {
			p.X = float64(st.Producers)
		}
		v.Points = append(v.Points, p)
	}
	return v
}

// HTML writes a self-contained page of Kafka runs and sweeps. See Page.
func HTML(w io.Writer, title string, runs []*result.Kafka, sweeps []*result.Sweep) error {
	views := make([]SweepView, len(sweeps))
	for i, s := range sweeps {
		views[i] = KafkaSweep(s)
	}
	return Page(w, title, KafkaRuns(runs), views)
}

// Page writes a self-contained HTML page: the runs side by side (a table
// of their figures; for each latency series a chart of the percentile
// curves of every run and a table of percentiles with the difference from
// the first run), then for each sweep charts of achieved rate and p99
// against the load and a table of its steps. Charts are inline SVG and
// the style sheet is inline: the page needs no network and no script.
func Page(w io.Writer, title string, runs []Run, sweeps []SweepView) error {
	if len(runs) == 0 && len(sweeps) == 0 {
		return errors.New("nothing to draw: no runs and no sweeps")
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1">` + "\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(title), css)
	fmt.Fprintf(&b, "<header><h1>%s</h1>\n", esc(title))
	if m, ok := firstMeta(runs, sweeps); ok {
		fmt.Fprintf(&b, "<p class=\"meta\">%s</p>\n", esc(metaLine(m)))
	}
	b.WriteString("</header>\n")

	if len(runs) > 0 {
		writeRunsTable(&b, runs)
		writeLatency(&b, runs)
	}
	for _, s := range sweeps {
		writeSweep(&b, s)
	}
	b.WriteString(`<footer>Latencies are counted from when each request was due to be sent, not from when it was sent, ` +
		`so a stall shows in every request it delayed. Percentiles come from HdrHistograms (3 significant digits).</footer>` + "\n")
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return html.EscapeString(s) }

// firstMeta returns the first metadata of the runs or sweeps that has any.
func firstMeta(runs []Run, sweeps []SweepView) (result.Meta, bool) {
	var metas []result.Meta
	for _, r := range runs {
		metas = append(metas, r.Meta)
	}
	for _, s := range sweeps {
		metas = append(metas, s.Meta)
	}
	for _, m := range metas {
		if m.GoVersion != "" || m.Commit != "" {
			return m, true
		}
	}
	return result.Meta{}, false
}

// writeRunsTable writes the runs' figures: a column per run, so that the
// table stays narrow however many metrics a kind of result has.
func writeRunsTable(b *strings.Builder, runs []Run) {
	b.WriteString("<section>\n<h2>Runs</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th></th>")
	for i, r := range runs {
		fmt.Fprintf(b, "<th class=\"num\">%s</th>", swatchLabel(i, r.Label, i))
	}
	b.WriteString("</tr></thead>\n<tbody>\n<tr><th>counts</th>")
	for _, r := range runs {
		if r.Valid {
			b.WriteString("<td class=\"num ok\">yes</td>")
		} else {
			fmt.Fprintf(b, "<td class=\"num bad\" title=\"%s\">no</td>", esc(strings.Join(r.Problems, "; ")))
		}
	}
	b.WriteString("</tr>\n")
	for _, n := range metricNames(runs) {
		fmt.Fprintf(b, "<tr><th>%s</th>", esc(metricLabel(runs, n)))
		for _, r := range runs {
			v := "–"
			if m, ok := r.metric(n); ok {
				v = num(m.Value)
			}
			fmt.Fprintf(b, "<td class=\"num\">%s</td>", esc(v))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("<tr><th>commit</th>")
	for _, r := range runs {
		fmt.Fprintf(b, "<td class=\"num\"><code>%s</code></td>", esc(shortCommit(r.Meta.Commit)))
	}
	b.WriteString("</tr>\n</tbody></table></div>\n")
	for _, note := range invalidNotes(runs) {
		fmt.Fprintf(b, "<p class=\"bad\">%s</p>\n", esc(note))
	}
	b.WriteString("</section>\n")
}

// swatchLabel is a run's label preceded by the colour and dash of its line.
func swatchLabel(lineIndex int, label string, runIndex int) string {
	color, dash := style(lineIndex)
	if label == "" {
		label = fmt.Sprintf("run %d", runIndex+1)
	}
	d := ""
	if dash != "" {
		d = ` stroke-dasharray="` + dash + `"`
	}
	return fmt.Sprintf(`<svg class="swatch" viewBox="0 0 24 10" aria-hidden="true"><line x1="1" y1="5" x2="23" y2="5" stroke="%s" stroke-width="3"%s/></svg>%s`,
		color, d, esc(label))
}

// writeLatency writes a figure per latency series: the percentile curves
// of all runs, and their percentiles.
//
// The tables go in a grid of their own below the charts, their columns as
// wide as the runs need: side by side for a few runs, one under the other
// for many, rather than cut off inside a figure.
func writeLatency(b *strings.Builder, runs []Run) {
	names := seriesNames(runs)
	b.WriteString("<section>\n<h2>Latency by percentile</h2>\n<div class=\"grid\">\n")
	for _, name := range names {
		c := latencyChart(name, runs)
		fmt.Fprintf(b, "<figure>\n<h3>%s latency</h3>\n", esc(title(name)))
		writeLegend(b, runs)
		b.WriteString(c.svg())
		b.WriteString("\n</figure>\n")
	}
	b.WriteString("</div>\n")
	fmt.Fprintf(b, "<div class=\"grid tables\" style=\"grid-template-columns: repeat(auto-fit, minmax(%dpx, 1fr))\">\n", 100+130*len(runs))
	for _, name := range names {
		fmt.Fprintf(b, "<div>\n<h3>%s latency (ms)</h3>\n", esc(title(name)))
		writePercentileTable(b, name, runs)
		b.WriteString("</div>\n")
	}
	b.WriteString("</div>\n</section>\n")
}

func writeLegend(b *strings.Builder, runs []Run) {
	b.WriteString("<ul class=\"legend\">")
	for i, r := range runs {
		fmt.Fprintf(b, "<li>%s</li>", swatchLabel(i, r.label(i), i))
	}
	b.WriteString("</ul>\n")
}

// latencyChart draws the curves of series name of every run. The maximum
// (percentile 100) is off the log axis; the table gives it.
func latencyChart(name string, runs []Run) *chart {
	maxX, maxY := 2.0, 0.0
	var lines []line
	for i, r := range runs {
		l, ok := r.series(name)
		color, dash := style(i)
		ln := line{name: r.label(i), color: color, dash: dash}
		if ok {
			for _, p := range l.Curve {
				x := nines(p.Percentile)
				if math.IsInf(x, 1) {
					continue
				}
				ln.points = append(ln.points, point{x, p.Ms})
				ln.tips = append(ln.tips, fmt.Sprintf("%s: p%s = %s ms", r.label(i), num(p.Percentile), ms(p.Ms)))
				maxX, maxY = math.Max(maxX, x), math.Max(maxY, p.Ms)
			}
		}
		lines = append(lines, ln)
	}
	n := min(int(math.Ceil(maxX-1e-9)), 6)
	return &chart{
		label: title(name) + " latency by percentile",
		x:     percentileAxis(n),
		y:     niceAxis("latency (ms)", 0, maxY*headroom, nil),
		lines: lines,
	}
}

// writePercentileTable writes the percentiles of series name, a column
// per run; below each value of a later run, its difference from the
// first.
func writePercentileTable(b *strings.Builder, name string, runs []Run) {
	b.WriteString("<div class=\"scroll\"><table class=\"pct\">\n<thead><tr><th>ms</th>")
	for i, r := range runs {
		fmt.Fprintf(b, "<th class=\"num\">%s</th>", esc(r.label(i)))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	base, bok := runs[0].series(name)
	for _, p := range tablePercentiles {
		fmt.Fprintf(b, "<tr><th>%s</th>", p.name)
		for i, r := range runs {
			l, ok := r.series(name)
			fmt.Fprintf(b, "<td class=\"num\">%s", esc(cell(ok, p.get(l))))
			if i > 0 && ok && bok {
				fmt.Fprintf(b, "<span class=\"delta\">%s</span>", esc(delta(p.get(l), p.get(base))))
			}
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	if len(runs) > 1 {
		fmt.Fprintf(b, "<tr><th title=\"two-sided Mann-Whitney U test on the per-window p99 samples\">p99 differs?</th><td></td>")
		for _, r := range runs[1:] {
			l, _ := r.series(name)
			fmt.Fprintf(b, "<td class=\"num\">%s</td>", significanceCell(base.WindowP99, l.WindowP99))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table></div>\n")
	if len(runs) > 1 {
		fmt.Fprintf(b, "<p class=\"note\">Under each value: the difference from %s. \"p99 differs?\": a two-sided Mann-Whitney U test of the per-window p99 samples against %s, significant at p &lt; %g.</p>\n",
			esc(runs[0].label(0)), esc(runs[0].label(0)), Significance)
	}
}

// significanceCell is the verdict of the per-window p99 test in a table
// cell.
func significanceCell(base, other []float64) string {
	if len(base) < MinWindows || len(other) < MinWindows {
		return fmt.Sprintf("<span class=\"delta\" title=\"fewer than %d windows: %d and %d\">n/a</span>", MinWindows, len(base), len(other))
	}
	_, p := stats.MannWhitney(other, base)
	if p < Significance {
		return "<strong>yes</strong><span class=\"delta\">" + esc(pValue(p)) + "</span>"
	}
	return "no<span class=\"delta\">" + esc(pValue(p)) + "</span>"
}

// writeSweep writes a sweep's charts and table.
func writeSweep(b *strings.Builder, s SweepView) {
	heading := "Sweep"
	if s.Label != "" {
		heading += ": " + s.Label
	}
	fmt.Fprintf(b, "<section>\n<h2>%s</h2>\n", esc(heading))
	if s.LastSustained > 0 {
		p99 := ""
		if len(s.SeriesNames) > 0 {
			p99 = fmt.Sprintf(" (%s p99 %s ms)", s.SeriesNames[0], ms(s.LastSustainedP99))
		}
		fmt.Fprintf(b, "<p>Last sustained rate: <strong>%s %s</strong>%s. Circled steps are saturated: they achieved more than 5%% below their target.</p>\n",
			esc(num(s.LastSustained)), esc(s.RateUnit), esc(p99))
	} else {
		b.WriteString("<p class=\"bad\">No step was sustained.</p>\n")
	}
	b.WriteString("<div class=\"grid\">\n")

	rate, lat := sweepCharts(s)
	b.WriteString("<figure>\n<h3>Achieved against target</h3>\n")
	writeNamedLegend(b, []string{"target", "achieved"}, []int{-1, 0})
	b.WriteString(rate.svg())
	b.WriteString("\n</figure>\n<figure>\n<h3>p99 latency</h3>\n")
	idx := make([]int, len(s.SeriesNames))
	for i := range idx {
		idx[i] = i
	}
	writeNamedLegend(b, s.SeriesNames, idx)
	b.WriteString(lat.svg())
	b.WriteString("\n</figure>\n</div>\n")

	b.WriteString("<div class=\"scroll\"><table>\n<thead><tr>")
	fmt.Fprintf(b, "<th class=\"num\">producers</th><th class=\"num\">target (%s)</th><th class=\"num\">achieved (%s)</th>",
		esc(s.RateUnit), esc(s.RateUnit))
	for _, n := range s.SeriesNames {
		fmt.Fprintf(b, "<th class=\"num\">%s p99 (ms)</th>", esc(n))
	}
	b.WriteString("<th>state</th></tr></thead>\n<tbody>\n")
	for _, p := range s.Points {
		fmt.Fprintf(b, "<tr><td class=\"num\">%d</td><td class=\"num\">%s</td><td class=\"num\">%s</td>",
			p.Producers, esc(num(p.Target)), esc(num(p.Achieved)))
		for i := range s.SeriesNames {
			v := 0.0
			if i < len(p.P99) {
				v = p.P99[i]
			}
			fmt.Fprintf(b, "<td class=\"num\">%s</td>", esc(ms(v)))
		}
		fmt.Fprintf(b, "<td%s>%s</td></tr>\n", stateClass(p), esc(stepState(p)))
	}
	b.WriteString("</tbody></table></div>\n</section>\n")
}

func stepState(p SweepPoint) string {
	var s []string
	if p.Saturated {
		s = append(s, "saturated")
	}
	if p.Invalid {
		s = append(s, "invalid")
	}
	if len(s) == 0 {
		return "sustained"
	}
	return strings.Join(s, ", ")
}

func stateClass(p SweepPoint) string {
	if p.Saturated || p.Invalid {
		return ` class="bad"`
	}
	return ` class="ok"`
}

// writeNamedLegend writes a legend of named lines; style index -1 is the
// grey dashed reference line.
func writeNamedLegend(b *strings.Builder, names []string, styles []int) {
	b.WriteString("<ul class=\"legend\">")
	for i, n := range names {
		if styles[i] < 0 {
			fmt.Fprintf(b, `<li><svg class="swatch" viewBox="0 0 24 10" aria-hidden="true"><line x1="1" y1="5" x2="23" y2="5" stroke="%s" stroke-width="3" stroke-dasharray="4 3"/></svg>%s</li>`, refColor, esc(n))
			continue
		}
		fmt.Fprintf(b, "<li>%s</li>", swatchLabel(styles[i], n, i))
	}
	b.WriteString("</ul>\n")
}

// refColor draws reference lines: what a perfect system would do.
const refColor = "#9a9a9a"

// sweepCharts returns the chart of achieved and target rate and the chart
// of p99 latencies, both against the stepped value.
func sweepCharts(s SweepView) (rate, lat *chart) {
	var xs []float64
	var maxRate, maxLat float64
	target := line{name: "target", color: refColor, dash: "4 3"}
	color, dash := style(0)
	achieved := line{name: "achieved", color: color, dash: dash}
	lats := make([]line, len(s.SeriesNames))
	for i, n := range s.SeriesNames {
		c, d := style(i)
		lats[i] = line{name: n, color: c, dash: d}
	}
	for _, p := range s.Points {
		xs = append(xs, p.X)
		maxRate = math.Max(maxRate, math.Max(p.Target, p.Achieved))
		target.points = append(target.points, point{p.X, p.Target})
		achieved.points = append(achieved.points, point{p.X, p.Achieved})
		achieved.marked = append(achieved.marked, p.Saturated)
		achieved.tips = append(achieved.tips, fmt.Sprintf("%s %s: achieved %s %s (%s)", s.XTitle, num(p.X), num(p.Achieved), s.RateUnit, stepState(p)))
		for i := range lats {
			v := 0.0
			if i < len(p.P99) {
				v = p.P99[i]
			}
			maxLat = math.Max(maxLat, v)
			lats[i].points = append(lats[i].points, point{p.X, v})
			lats[i].marked = append(lats[i].marked, p.Saturated)
			lats[i].tips = append(lats[i].tips, fmt.Sprintf("%s %s: %s p99 %s ms", s.XTitle, num(p.X), s.SeriesNames[i], ms(v)))
		}
	}
	rate = &chart{
		label: "achieved rate against " + s.XTitle,
		x:     stepAxis(s.XTitle, xs),
		y:     niceAxis("rate ("+s.RateUnit+")", 0, maxRate*headroom, nil),
		lines: []line{target, achieved},
	}
	lat = &chart{
		label: "p99 latency against " + s.XTitle,
		x:     stepAxis(s.XTitle, xs),
		y:     niceAxis("p99 latency (ms)", 0, maxLat*headroom, nil),
		lines: lats,
	}
	return rate, lat
}

// headroom keeps the highest point of a chart off its top edge.
const headroom = 1.04

// css is the page's whole style sheet.
const css = `
:root { color-scheme: light; --fg: #1d1d1f; --muted: #5f6368; --rule: #e2e2e2; --bad: #b3261e; --ok: #1e7a34; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--fg); background: #fff; max-width: 1280px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--rule); }
h3 { font-size: 15px; margin: 0 0 6px; }
.meta, footer { color: var(--muted); font-size: 12.5px; }
footer { margin-top: 32px; border-top: 1px solid var(--rule); padding-top: 8px; }
.tables { margin-top: 20px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 20px; }
figure { margin: 0; border: 1px solid var(--rule); border-radius: 8px; padding: 14px; min-width: 0; }
figure > svg { width: 100%; max-width: 760px; height: auto; display: block; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: var(--fg); }
svg .tick { font-size: 11px; fill: var(--muted); }
svg .axis { font-size: 12px; }
svg .gridline { stroke: #ececec; stroke-width: 1; }
svg .frame { fill: none; stroke: #b0b0b0; stroke-width: 1; }
svg .series { fill: none; stroke-width: 2; stroke-linejoin: round; stroke-linecap: round; }
svg .mark { fill: none; stroke: var(--bad); stroke-width: 1.5; }
.legend { list-style: none; padding: 0; margin: 0 0 6px; display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 13px; }
.swatch { width: 24px; height: 10px; margin-right: 6px; vertical-align: middle; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 10px 0; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--rule); text-align: left; white-space: nowrap; }
thead th { border-bottom: 2px solid #c8c8c8; font-weight: 600; }
tbody th { font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.delta { color: var(--muted); display: block; font-size: 11.5px; }
.note { color: var(--muted); font-size: 12px; margin: 0; }
.bad { color: var(--bad); }
.ok { color: var(--ok); }
code { font-size: 12px; }
`
