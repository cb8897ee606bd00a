package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/straitgw/strait/internal/bench/result"
)

// A percentile row of the tables: its name and how to read it from a
// Latency.
type percentile struct {
	name string
	get  func(result.Latency) float64
}

var (
	pctP50  = percentile{"p50", func(l result.Latency) float64 { return l.P50 }}
	pctP75  = percentile{"p75", func(l result.Latency) float64 { return l.P75 }}
	pctP95  = percentile{"p95", func(l result.Latency) float64 { return l.P95 }}
	pctP99  = percentile{"p99", func(l result.Latency) float64 { return l.P99 }}
	pctP999 = percentile{"p99.9", func(l result.Latency) float64 { return l.P999 }}
	pctMax  = percentile{"max", func(l result.Latency) float64 { return l.Max }}
	pctMean = percentile{"mean", func(l result.Latency) float64 { return l.Mean }}

	allPercentiles   = []percentile{pctP50, pctP75, pctP95, pctP99, pctP999, pctMax}
	tablePercentiles = []percentile{pctP50, pctP75, pctP95, pctP99, pctP999, pctMax, pctMean}
	layerPercentiles = []percentile{pctP50, pctP95, pctP99, pctP999}
)

// ms formats milliseconds with about three significant digits, but never
// fewer than two decimals below 100 ms: latencies under a millisecond are
// common and their digits matter.
func ms(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a < 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	case a < 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a < 10000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// signed formats a difference in milliseconds with its sign.
func signed(d float64) string {
	if d >= 0 {
		return "+" + ms(d)
	}
	return "-" + ms(-d)
}

// delta formats v - base, and the change in percent of base.
func delta(v, base float64) string {
	s := signed(v - base)
	if base == 0 {
		return s
	}
	pct := (v - base) / base * 100
	return s + " (" + percent(pct) + ")"
}

// percent formats a change in percent with its sign.
func percent(pct float64) string {
	if pct >= 0 {
		return fmt.Sprintf("+%.1f%%", pct)
	}
	return fmt.Sprintf("-%.1f%%", -pct)
}

// num formats a figure that is not a latency: whole numbers as such, others
// with up to three significant decimals.
// Num formats a figure as the reports do: three significant digits,
// thousands plain.
func Num(v float64) string { return num(v) }

func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// pValue formats a p-value as "p = 0.0123" or "p < 0.0001".
func pValue(p float64) string {
	if p < 0.0001 {
		return "p < 0.0001"
	}
	return "p = " + strconv.FormatFloat(p, 'f', 4, 64)
}

// textTable lays rows out in columns two spaces apart, the first column
// left-aligned and the others (numbers) right-aligned.
func textTable(b *strings.Builder, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("  " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
}

// mdRow writes one markdown table row; cells have their pipes escaped.
func mdRow(b *strings.Builder, cells ...string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" ")
		b.WriteString(strings.ReplaceAll(c, "|", `\|`))
		b.WriteString(" |")
	}
	b.WriteString("\n")
}

// mdRule writes the rule under a markdown header row: the first column
// left-aligned, the rest right-aligned (numbers).
func mdRule(b *strings.Builder, columns int) {
	b.WriteString("|---|")
	for range columns - 1 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
}

// title capitalizes the first letter of s.
func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
