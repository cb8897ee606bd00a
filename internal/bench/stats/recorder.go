package stats

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/straitgw/strait/internal/bench/result"
)

// The range and precision of every histogram: 1 µs to 1 h, three
// significant digits (a recorded value is off by at most 0.1%). A longer
// latency is recorded as 1 h; at that point the run is broken anyway.
const (
	lowestMicros  = 1
	highestMicros = int64(time.Hour / time.Microsecond)
	sigFigs       = 3
)

// Summary is what a Recorder reports: the JSON latency summary, in
// milliseconds.
type Summary = result.Latency

// Recorder records latencies and keeps the p99 of each measurement window,
// the samples that significance tests compare between runs. It is safe for
// concurrent use.
//
// A run goes: NewRecorder, any number of Record calls during warm-up,
// Start (which forgets them), Record and Tick (about once a second) during
// measurement, Finish, then Snapshot.
//
// A latency belongs to the window open when Record is called: Tick closes
// windows by the clock its caller passes in, so Tick more often than once a
// window or the records of several windows count as one.
//
// One mutex guards everything. Record holds it for about 20 ns, so even at
// millions of records a second it is free nearly all the time; on two
// processors recording flat out, Record takes about 30 ns, and spreading
// the records over several locked histograms made it slower, not faster
// (BenchmarkRecord). Tick holds it for one percentile scan of the window's
// histogram, tens of microseconds; Snapshot for about 0.2 ms
// (BenchmarkSnapshot), which is why it is for the end of a run.
type Recorder struct {
	window time.Duration

	mu       sync.Mutex
	total    *hdrhistogram.Histogram // everything since Start
	current  *hdrhistogram.Histogram // the window open now
	started  bool
	finished bool
	start    time.Time
	end      time.Time // the end of the window open now
	windows  []WindowStat
}

// WindowStat is one closed measurement window.
type WindowStat struct {
	// Start is when the window began, counted from Start.
	Start time.Duration
	// Count is how many latencies were recorded in it.
	Count int64
	// P99 is their 99th percentile in milliseconds; 0 when Count is 0.
	P99 float64
}

// NewRecorder returns a recorder whose measurement windows last window
// (10 s is a good default, and what a window of 0 or less means: long
// enough for a stable p99 at a few hundred records a second, short enough
// for tens of samples in a few minutes).
func NewRecorder(window time.Duration) *Recorder {
	if window <= 0 {
		window = 10 * time.Second
	}
	return &Recorder{window: window, total: newHistogram(), current: newHistogram()}
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(lowestMicros, highestMicros, sigFigs)
}

// Record records one latency, at microsecond resolution. A negative
// latency (a clock step) counts as 0; one over an hour counts as an hour.
func (r *Recorder) Record(d time.Duration) {
	us := int64(d / time.Microsecond)
	if us < 0 {
		us = 0
	} else if us > highestMicros {
		us = highestMicros
	}
	r.mu.Lock()
	// Neither call can fail: us is within the histograms' range.
	_ = r.total.RecordValue(us)
	_ = r.current.RecordValue(us)
	r.mu.Unlock()
}

// Start begins the measurement at now: it forgets everything recorded so
// far (the warm-up) and opens the first window.
func (r *Recorder) Start(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total.Reset()
	r.current.Reset()
	r.started, r.finished = true, false
	r.start, r.end = now, now.Add(r.window)
	r.windows = nil
}

// Tick closes every window that ended at or before now. A window with no
// records is kept in Windows but adds no p99 sample. Before Start and after
// Finish it does nothing.
func (r *Recorder) Tick(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tick(now)
}

func (r *Recorder) tick(now time.Time) {
	if !r.started || r.finished || now.Before(r.end) {
		return
	}
	// Everything recorded since the last close belongs to the window
	// ending at r.end; the windows after it, up to now, saw no Tick and
	// so are empty as far as we can tell.
	count, p99 := r.closeWindow()
	r.windows = append(r.windows, WindowStat{Start: r.end.Sub(r.start) - r.window, Count: count, P99: p99})
	r.end = r.end.Add(r.window)
	for !now.Before(r.end) {
		r.windows = append(r.windows, WindowStat{Start: r.end.Sub(r.start) - r.window})
		r.end = r.end.Add(r.window)
	}
}

// closeWindow empties the current window and returns how many latencies
// it held and their p99 in milliseconds. r.mu must be held.
func (r *Recorder) closeWindow() (count int64, p99 float64) {
	count = r.current.TotalCount()
	if count > 0 {
		p99 = ms(r.current.ValueAtPercentile(99))
	}
	r.current.Reset()
	return count, p99
}

// Finish ends the measurement at now: it closes the complete windows, as
// Tick does, and then the last, partial one — but that one adds a p99
// sample only if it lasted at least half a window and has a record. A
// shorter window's p99 rests on fewer records than the others' and would
// only add noise to a significance test. Latencies recorded after Finish
// (requests that were in flight at the end and complete later) still count
// in Snapshot's totals, so a slow tail is not cut off; they belong to no
// window. Finish before Start does nothing.
func (r *Recorder) Finish(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.finished {
		return
	}
	r.tick(now)
	begin := r.end.Add(-r.window)
	count, p99 := r.closeWindow()
	if now.Sub(begin) >= r.window/2 && count > 0 {
		r.windows = append(r.windows, WindowStat{Start: begin.Sub(r.start), Count: count, P99: p99})
	}
	r.finished = true
}

// Windows returns every closed window, in order, empty ones included, so
// that a caller can line them up with its own per-window counters. The
// last, partial window is among them only if Finish counted it.
func (r *Recorder) Windows() []WindowStat {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]WindowStat(nil), r.windows...)
}

// WindowP99 returns the p99 of each closed window that had records, in
// milliseconds, in order.
func (r *Recorder) WindowP99() []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.windowP99()
}

func (r *Recorder) windowP99() []float64 {
	var out []float64
	for _, w := range r.windows {
		if w.Count > 0 {
			out = append(out, w.P99)
		}
	}
	return out
}

// Snapshot summarizes everything recorded since Start (or since the
// recorder was made, if Start was never called): the percentiles, the
// window samples and the curve.
func (r *Recorder) Snapshot() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := summarize(r.total)
	s.WindowP99 = r.windowP99()
	s.Curve = curve(r.total)
	return s
}

// Curve returns the percentile distribution of everything recorded since
// Start, for plots.
func (r *Recorder) Curve() []result.CurvePoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return curve(r.total)
}

// summaryPercentiles are the percentiles of a Summary, in its field order.
var summaryPercentiles = []float64{50, 75, 95, 99, 99.9, 100}

func summarize(h *hdrhistogram.Histogram) Summary {
	n := h.TotalCount()
	if n == 0 {
		return Summary{}
	}
	v := h.ValueAtPercentilesSlice(summaryPercentiles)
	return Summary{
		P50:   ms(v[0]),
		P75:   ms(v[1]),
		P95:   ms(v[2]),
		P99:   ms(v[3]),
		P999:  ms(v[4]),
		Max:   ms(v[5]),
		Mean:  math.Round(h.Mean()) / 1000,
		Count: n,
	}
}

// The curve has curveTicks points per halving of the distance to 100%
// (50%, 75%, 87.5%, ... with points between), down to the resolution of
// the data — a percentile past 1-1/count says nothing new — and at most
// curveMaxNines nines.
const (
	curveTicks    = 5
	curveMaxNines = 6
)

// curve returns h's percentile distribution: points ever closer to 100%,
// then the maximum at 100.
func curve(h *hdrhistogram.Histogram) []result.CurvePoint {
	n := h.TotalCount()
	if n == 0 {
		return nil
	}
	var ps []float64
	floor := math.Max(1/float64(n), math.Pow(10, -curveMaxNines))
	for k := 0; ; k++ {
		tail := math.Exp2(-float64(k) / curveTicks) // the fraction above the point
		if tail < floor {
			break
		}
		ps = append(ps, 100*(1-tail))
	}
	ps = append(ps, 100)
	v := h.ValueAtPercentilesSlice(ps)
	out := make([]result.CurvePoint, len(ps))
	for i := range ps {
		out[i] = result.CurvePoint{Percentile: roundTo(ps[i], 6), Ms: ms(v[i])}
	}
	return out
}

// ms converts microseconds to milliseconds.
func ms(us int64) float64 { return float64(us) / 1000 }

// roundTo rounds x to d decimal places, so that JSON shows 99.21875 rather
// than 99.21874999999999.
func roundTo(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}
