package report

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/bench/result"
)

func renderPage(t *testing.T, name, title string, runs []*result.Kafka, sweeps []*result.Sweep) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, title, runs, sweeps); err != nil {
		t.Fatal(err)
	}
	if *writeHTML != "" {
		if err := os.WriteFile(filepath.Join(*writeHTML, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestHTMLLayers(t *testing.T) {
	runs := []*result.Kafka{
		fixtureRun("direct", 1, 1.2, true),
		fixtureRun("passthrough", 2, 1.5, true),
		fixtureRun("encryption <aes>", 3, 2.3, false),
	}
	page := renderPage(t, "layers.html", "Layers & more", runs, nil)

	// Self-contained: no script, no external resource of any kind.
	for _, bad := range []string{"<script", "<link", "@import", "http://", "https://"} {
		if bad == "http://" || bad == "https://" {
			// The SVG namespace is the one URL allowed: it is a name,
			// never fetched.
			page := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
			if strings.Contains(page, bad) {
				t.Errorf("page contains %q: it must not load anything", bad)
			}
			continue
		}
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: it must not load anything", bad)
		}
	}
	// Labels are escaped, never markup.
	if strings.Contains(page, "<aes>") || !strings.Contains(page, "encryption &lt;aes&gt;") {
		t.Error("a label with < > was not escaped")
	}
	if !strings.Contains(page, "<title>Layers &amp; more</title>") {
		t.Error("the title is missing or not escaped")
	}
	// One chart per series, each with one polyline per run, and the
	// percentile axis labels.
	svgs := regexp.MustCompile(`(?s)<svg viewBox="0 0 560 340".*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 2 {
		t.Fatalf("%d charts, want 2 (publish and end-to-end)", len(svgs))
	}
	for _, svg := range svgs {
		if n := strings.Count(svg, "<polyline"); n != 3 {
			t.Errorf("chart has %d lines, want 3", n)
		}
		for _, label := range []string{">0%<", ">90%<", ">99%<", ">99.9%<"} {
			if !strings.Contains(svg, label) {
				t.Errorf("chart has no %s axis label", label)
			}
		}
		// Each chart is well-formed XML on its own.
		if err := xml.Unmarshal([]byte(svg), new(any)); err != nil {
			t.Errorf("chart is not well-formed: %v", err)
		}
	}
	// The invalid run says so, with why.
	if !strings.Contains(page, "consume rate 4100 msg/s") {
		t.Error("the invalid run's problems are not on the page")
	}
	// Under each later run's percentile, its difference from the first.
	want := `<td class="num">` + ms(runs[1].PublishLatency.P99) + `<span class="delta">` +
		esc(delta(runs[1].PublishLatency.P99, runs[0].PublishLatency.P99)) + `</span></td>`
	if !strings.Contains(page, want) {
		t.Errorf("no cell %s: passthrough's p99 with its difference from direct", want)
	}
	// Passthrough's windows are all slower than direct's: the test says
	// so, for both series.
	if n := strings.Count(page, `<td class="num"><strong>yes</strong><span class="delta">p &lt; 0.0001</span></td>`); n < 2 {
		t.Errorf("%d significant differences shown, want at least 2", n)
	}
}

func TestHTMLSweep(t *testing.T) {
	s := fixtureSweep()
	var runs []*result.Kafka
	page := renderPage(t, "sweep.html", "Sweep", runs, []*result.Sweep{s})
	svgs := regexp.MustCompile(`(?s)<svg viewBox="0 0 560 340".*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 2 {
		t.Fatalf("%d charts, want 2 (rate and p99)", len(svgs))
	}
	// Two saturated steps are circled on the rate chart and on each of
	// the two p99 lines.
	if n := strings.Count(svgs[0], `class="mark"`); n != 2 {
		t.Errorf("rate chart marks %d steps, want the 2 saturated", n)
	}
	if n := strings.Count(svgs[1], `class="mark"`); n != 4 {
		t.Errorf("p99 chart marks %d points, want 4", n)
	}
	if !strings.Contains(page, "Last sustained rate: <strong>16000 msg/s</strong>") {
		t.Error("the last sustained rate is not stated")
	}
	for _, svg := range svgs {
		if err := xml.Unmarshal([]byte(svg), new(any)); err != nil {
			t.Errorf("chart is not well-formed: %v", err)
		}
	}
}

func TestHTMLNothing(t *testing.T) {
	if err := HTML(new(bytes.Buffer), "x", nil, nil); err == nil {
		t.Error("a page of nothing was written without an error")
	}
}

func TestPercentileAxis(t *testing.T) {
	for p, want := range map[float64]float64{0: 0, 90: 1, 99: 2, 99.9: 3, 99.99: 4} {
		if got := nines(p); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("nines(%v) = %v, want %v", p, got, want)
		}
	}
	var labels []string
	for _, tk := range percentileAxis(5).ticks {
		labels = append(labels, tk.label)
	}
	if got := strings.Join(labels, " "); got != "0% 90% 99% 99.9% 99.99% 99.999%" {
		t.Errorf("axis labels %q", got)
	}
}

func TestNiceAxis(t *testing.T) {
	a := niceAxis("", 0, 37.2, nil)
	var labels []string
	for _, tk := range a.ticks {
		labels = append(labels, tk.label)
	}
	if a.max != 40 || strings.Join(labels, " ") != "0 10 20 30 40" {
		t.Errorf("axis to 37.2: max %v, ticks %v; want 40 and 0 10 20 30 40", a.max, labels)
	}
	a = niceAxis("", 0, 64000, nil)
	labels = nil
	for _, tk := range a.ticks {
		labels = append(labels, tk.label)
	}
	if a.max != 80000 || strings.Join(labels, " ") != "0 20k 40k 60k 80k" {
		t.Errorf("axis to 64000: max %v, ticks %v", a.max, labels)
	}
	a = niceAxis("", 0, 7500, nil)
	labels = nil
	for _, tk := range a.ticks {
		labels = append(labels, tk.label)
	}
	if strings.Join(labels, " ") != "0 2k 4k 6k 8k" {
		t.Errorf("axis to 7500: ticks %v", labels)
	}
	a = niceAxis("", 0, 0.9, nil)
	labels = nil
	for _, tk := range a.ticks {
		labels = append(labels, tk.label)
	}
	if strings.Join(labels, " ") != "0 0.2 0.4 0.6 0.8 1" {
		t.Errorf("axis to 0.9: ticks %v", labels)
	}
	if a := niceAxis("", 0, 0, nil); a.max <= a.min {
		t.Errorf("an empty axis has no extent: %+v", a)
	}
}
