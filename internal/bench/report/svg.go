package report

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// An SVG line chart, drawn by hand so the page needs no script and no
// network to show it.

// The chart's size in SVG units, and the margins around the plot area for
// tick labels and axis titles.
const (
	chartW, chartH                     = 560, 340
	marginL, marginR, marginT, marginB = 64, 30, 14, 50
	plotW, plotH                       = chartW - marginL - marginR, chartH - marginT - marginB
	tickLen                            = 4
	tickFont                           = 11 // px, as the style sheet sets it
)

// palette is a set of colours that stay apart for common colour vision
// deficiencies too, in the order lines get them.
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442"}

// dashes separate lines once the palette repeats.
var dashes = []string{"", "6 3", "2 3", "8 3 2 3"}

type point struct{ x, y float64 }

type line struct {
	name   string
	color  string
	dash   string
	points []point
	// tips are hover texts, one per point (or none).
	tips []string
	// marked points get a ring: saturated sweep steps.
	marked []bool
}

type tick struct {
	v     float64
	label string
}

type axis struct {
	title    string
	min, max float64
	ticks    []tick
	// log places values by their logarithm: for loads that double at
	// each step. min, max and ticks stay in data units.
	log bool
}

// pos returns where v falls on the axis, from 0 (min) to 1 (max).
func (a *axis) pos(v float64) float64 {
	lo, hi := a.min, a.max
	if a.log {
		v, lo, hi = math.Log10(math.Max(v, a.min)), math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return 0
	}
	return (v - lo) / (hi - lo)
}

type chart struct {
	x, y  axis
	lines []line
	label string // for screen readers
}

// style returns the colour and dash pattern of line i.
func style(i int) (color, dash string) {
	return palette[i%len(palette)], dashes[(i/len(palette))%len(dashes)]
}

// sx and sy map data to SVG coordinates.
func (c *chart) sx(x float64) float64 { return marginL + c.x.pos(x)*plotW }

func (c *chart) sy(y float64) float64 { return marginT + plotH - c.y.pos(y)*plotH }

// svg renders the chart.
func (c *chart) svg() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		chartW, chartH, html.EscapeString(c.label))
	b.WriteString("\n")
	// Grid and ticks.
	for _, t := range c.y.ticks {
		y := c.sy(t.v)
		fmt.Fprintf(&b, `<line class="gridline" x1="%s" y1="%s" x2="%s" y2="%s"/>`, f(marginL), f(y), f(marginL+plotW), f(y))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`,
			f(marginL-tickLen-3), f(y), html.EscapeString(t.label))
		b.WriteString("\n")
	}
	for _, t := range c.x.ticks {
		x := c.sx(t.v)
		fmt.Fprintf(&b, `<line class="gridline" x1="%s" y1="%s" x2="%s" y2="%s"/>`, f(x), f(marginT), f(x), f(marginT+plotH))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`,
			f(x), f(marginT+plotH+tickLen+tickFont+1), html.EscapeString(t.label))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%d" width="%d" height="%d"/>`, marginL, marginT, plotW, plotH)
	b.WriteString("\n")
	// Axis titles.
	fmt.Fprintf(&b, `<text class="axis" x="%s" y="%d" text-anchor="middle">%s</text>`,
		f(marginL+plotW/2.0), chartH-8, html.EscapeString(c.x.title))
	fmt.Fprintf(&b, `<text class="axis" transform="translate(14 %s) rotate(-90)" text-anchor="middle">%s</text>`,
		f(marginT+plotH/2.0), html.EscapeString(c.y.title))
	b.WriteString("\n")
	// Lines, clipped to the plot area.
	b.WriteString(`<clipPath id="` + c.clipID() + `"><rect x="` + strconv.Itoa(marginL) + `" y="` + strconv.Itoa(marginT-2) +
		`" width="` + strconv.Itoa(plotW+2) + `" height="` + strconv.Itoa(plotH+4) + `"/></clipPath>` + "\n")
	fmt.Fprintf(&b, `<g clip-path="url(#%s)">`, c.clipID())
	b.WriteString("\n")
	for _, l := range c.lines {
		if len(l.points) == 0 {
			continue
		}
		var pts []string
		for _, p := range l.points {
			pts = append(pts, f(c.sx(p.x))+","+f(c.sy(p.y)))
		}
		dash := ""
		if l.dash != "" {
			dash = ` stroke-dasharray="` + l.dash + `"`
		}
		fmt.Fprintf(&b, `<polyline class="series" points="%s" stroke="%s"%s/>`, strings.Join(pts, " "), l.color, dash)
		b.WriteString("\n")
		for i, p := range l.points {
			tip := ""
			if i < len(l.tips) {
				tip = "<title>" + html.EscapeString(l.tips[i]) + "</title>"
			}
			r := 2.5
			if len(l.points) > 40 {
				r = 1.5 // dense curves: dots would hide the line
			}
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="%s">%s</circle>`, f(c.sx(p.x)), f(c.sy(p.y)), f(r), l.color, tip)
			if i < len(l.marked) && l.marked[i] {
				fmt.Fprintf(&b, `<circle class="mark" cx="%s" cy="%s" r="6"/>`, f(c.sx(p.x)), f(c.sy(p.y)))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("</g>\n</svg>")
	return b.String()
}

// clipID is an id unique to the chart's content, so that two charts on
// one page do not share a clip path.
func (c *chart) clipID() string {
	h := uint32(2166136261)
	for _, s := range []string{c.label, c.x.title, c.y.title} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint32(s[i])) * 16777619
		}
	}
	for _, l := range c.lines {
		h = (h ^ uint32(len(l.points))) * 16777619
	}
	return "clip" + strconv.FormatUint(uint64(h), 36)
}

// f formats an SVG coordinate.
func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceAxis returns an axis from 0 (or lo, if negative) to a round number
// at least hi, with about five ticks at round steps, labelled by format
// (nil: numbers, in k or M where that reads better).
func niceAxis(title string, lo, hi float64, format func(float64) string) axis {
	lo = math.Min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	a := axis{title: title, min: math.Floor(lo/step) * step, max: math.Ceil(hi/step) * step}
	var vs []float64
	for i := 0; i <= 20; i++ {
		v := a.min + float64(i)*step
		if v > a.max+step/1e6 {
			break
		}
		vs = append(vs, v)
	}
	a.ticks = ticks(vs, format)
	return a
}

// ticks labels values with format, or, when format is tickNumber and
// every value is a whole number of thousands (or millions), in k (or M):
// an axis reads 0 20k 40k, or 0 2500 5000, never 0 2500 5k.
func ticks(vs []float64, format func(float64) string) []tick {
	out := make([]tick, len(vs))
	unit, suffix := 1.0, ""
	if format == nil {
		format = tickNumber
		for _, u := range []struct {
			v float64
			s string
		}{{1e6, "M"}, {1e3, "k"}} {
			all := slices.ContainsFunc(vs, func(v float64) bool { return math.Abs(v) >= u.v })
			for _, v := range vs {
				all = all && math.Mod(v, u.v) == 0
			}
			if all {
				unit, suffix = u.v, u.s
				break
			}
		}
	}
	for i, v := range vs {
		if v == 0 {
			out[i] = tick{0, "0"}
			continue
		}
		out[i] = tick{v, format(v/unit) + suffix}
	}
	return out
}

// niceStep rounds a raw tick step up to 1, 2, 2.5 or 5 times a power of
// ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsInf(raw, 0) || math.IsNaN(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// stepAxis returns the axis of the values a sweep stepped: logarithmic
// with a tick at each step when they grow by a factor of 8 or more (rates
// that double at each step), else linear from 0.
func stepAxis(title string, xs []float64) axis {
	lo, hi := math.Inf(1), 0.0
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if len(xs) == 0 || lo <= 0 || hi/lo < 8 {
		return niceAxis(title, 0, hi, nil)
	}
	// A margin of a seventh of a doubling either side keeps the end
	// points off the frame.
	a := axis{title: title, min: lo / 1.1, max: hi * 1.1, log: true}
	distinct := slices.Compact(slices.Sorted(slices.Values(xs)))
	every := (len(distinct) + 7) / 8 // at most 8 labels
	var vs []float64
	for i, x := range distinct {
		if i%every == 0 {
			vs = append(vs, x)
		}
	}
	a.ticks = ticks(vs, nil)
	return a
}

// tickNumber formats a tick value without needless decimals.
func tickNumber(v float64) string {
	// Ten significant digits hide the float error of min + i*step.
	return strconv.FormatFloat(v, 'g', 10, 64)
}

// The percentile axis of latency charts, as HdrHistogram plots draw it:
// position log10(1/(1-q)), so 0%, 90%, 99%, 99.9% ... are equally spaced
// and the tail gets the room it deserves.

// nines returns the position of percentile p (0 to 100) on the axis; +Inf
// at 100.
func nines(p float64) float64 {
	if p >= 100 {
		return math.Inf(1)
	}
	return math.Log10(100 / (100 - p))
}

// percentileAxis returns the axis up to the given number of nines.
func percentileAxis(maxNines int) axis {
	a := axis{title: "percentile (log scale: each step is ten times rarer)", min: 0, max: float64(maxNines)}
	for n := 0; n <= maxNines; n++ {
		a.ticks = append(a.ticks, tick{float64(n), nineLabel(n)})
	}
	return a
}

// nineLabel is the percentile n nines out: 0%, 90%, 99%, 99.9%, ...
func nineLabel(n int) string {
	switch n {
	case 0:
		return "0%"
	case 1:
		return "90%"
	case 2:
		return "99%"
	}
	return "99." + strings.Repeat("9", n-2) + "%"
}
