package stats

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// within reports whether got is want within HdrHistogram's precision of
// three significant digits (plus one microsecond of truncation).
func within(got, want float64) bool {
	return math.Abs(got-want) <= want*0.001+0.001
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// TestCoordinatedOmission simulates one open-loop sender and a server
// that stalls. Requests are due every millisecond and take 100 µs, but
// request 100 takes 800 ms. The sender cannot send while it waits, so the
// 799 requests due during the stall go out late, back to back, when it
// ends. Each of them waited for the stall as much as a user would have.
func TestCoordinatedOmission(t *testing.T) {
	const n = 1000
	sched := Schedule{Start: t0, Interval: time.Millisecond}
	fromIntended := NewRecorder(time.Second)
	fromSend := NewRecorder(time.Second)
	fromIntended.Start(t0)
	fromSend.Start(t0)

	free := t0 // when the sender can send next
	var stalled []time.Duration
	for i := range int64(n) {
		due := sched.Intended(i)
		send := due
		if free.After(send) {
			send = free
		}
		service := 100 * time.Microsecond
		if i == 100 {
			service = 800*time.Millisecond + 100*time.Microsecond
		}
		done := send.Add(service)
		free = done
		fromIntended.Record(sched.Latency(i, done))
		fromSend.Record(done.Sub(send))
		if i >= 100 && i < 900 { // due during the stall
			stalled = append(stalled, sched.Latency(i, done))
		}
	}

	// Request i in 100..899 completes at 800.1 ms + (i-100)·0.1 ms, due
	// at i ms: latency 800.1 - 0.9·(i-100) ms, at least 81 ms.
	if low := slices.Min(stalled); low < 81*time.Millisecond {
		t.Fatalf("simulation: least latency of a request due during the stall = %v, want >= 81ms", low)
	}
	got := fromIntended.Snapshot()
	if got.Count != n {
		t.Errorf("count = %d, want %d", got.Count, n)
	}
	// 800 of 1000 records (80%) are at least 81 ms, so p50 and p75 are
	// too; the top 1% are requests 100..109, at least 792 ms.
	for _, c := range []struct {
		name string
		v    float64
		min  float64
	}{{"p50", got.P50, 81}, {"p75", got.P75, 81}, {"p99", got.P99, 792}, {"max", got.Max, 800}} {
		if c.v < c.min*0.999 {
			t.Errorf("from intended time: %s = %v ms, want >= %v ms: the stall is hidden", c.name, c.v, c.min)
		}
	}

	// Measured from the actual send, the stall is one slow request: p99
	// is the 100 µs service time. This is the error the Schedule avoids.
	naive := fromSend.Snapshot()
	if !within(naive.P99, 0.1) || !within(naive.Max, 800.1) {
		t.Errorf("from send time: p99 %v ms, max %v ms; want 0.1 and 800.1", naive.P99, naive.Max)
	}
}

func TestRecorderPercentiles(t *testing.T) {
	r := NewRecorder(time.Second)
	r.Start(t0)
	// 1..10000 ms, each once: percentile q is q·100 ms.
	for i := 1; i <= 10000; i++ {
		r.Record(time.Duration(i) * time.Millisecond)
	}
	s := r.Snapshot()
	want := map[string][2]float64{
		"p50": {s.P50, 5000}, "p75": {s.P75, 7500}, "p95": {s.P95, 9500},
		"p99": {s.P99, 9900}, "p999": {s.P999, 9990}, "max": {s.Max, 10000}, "mean": {s.Mean, 5000.5},
	}
	for name, v := range want {
		if !within(v[0], v[1]) {
			t.Errorf("%s = %v ms, want %v within 0.1%%", name, v[0], v[1])
		}
	}
	if s.Count != 10000 {
		t.Errorf("count = %d, want 10000", s.Count)
	}
	// The curve starts at the minimum, rises, and ends at the maximum.
	c := s.Curve
	if len(c) < 10 || c[0].Percentile != 0 || c[len(c)-1].Percentile != 100 {
		t.Fatalf("curve %v: want >= 10 points from percentile 0 to 100", c)
	}
	if !within(c[0].Ms, 1) || !within(c[len(c)-1].Ms, 10000) {
		t.Errorf("curve runs from %v to %v ms, want 1 to 10000", c[0].Ms, c[len(c)-1].Ms)
	}
	for i := 1; i < len(c); i++ {
		if c[i].Percentile <= c[i-1].Percentile || c[i].Ms < c[i-1].Ms {
			t.Fatalf("curve not increasing at %d: %v then %v", i, c[i-1], c[i])
		}
	}
	// With 10000 records, the curve stops short of 99.99%: past it the
	// data says nothing the maximum does not.
	if p := c[len(c)-2].Percentile; p < 99.9 || p > 99.99 {
		t.Errorf("last curve point before the maximum at %v%%, want between 99.9 and 99.99", p)
	}
}

func TestRecorderClampsAndRounds(t *testing.T) {
	r := NewRecorder(time.Second)
	r.Record(-5 * time.Millisecond)
	r.Record(2 * time.Hour)
	s := r.Snapshot()
	if s.Count != 2 {
		t.Fatalf("count = %d, want 2", s.Count)
	}
	if c := r.Curve(); c[0].Ms != 0 {
		t.Errorf("a negative latency counts as %v ms, want 0", c[0].Ms)
	}
	if !within(s.Max, 3600000) {
		t.Errorf("two hours count as %v ms, want 3600000 (the histogram's top)", s.Max)
	}
	if empty := NewRecorder(time.Second).Snapshot(); empty.Count != 0 || empty.Max != 0 || empty.Curve != nil {
		t.Errorf("empty snapshot = %+v, want zero", empty)
	}
}

func TestRecorderStartForgetsWarmup(t *testing.T) {
	r := NewRecorder(time.Second)
	for range 100 {
		r.Record(time.Second)
	}
	r.Start(t0)
	r.Record(time.Millisecond)
	if s := r.Snapshot(); s.Count != 1 || !within(s.Max, 1) {
		t.Errorf("after Start: count %d, max %v ms; want 1 record of 1 ms", s.Count, s.Max)
	}
}

func TestRecorderWindows(t *testing.T) {
	const w = 10 * time.Second
	r := NewRecorder(w)
	r.Tick(t0.Add(time.Hour)) // before Start: nothing to close
	r.Start(t0)

	// Window 0 [0,10s): 100 records, 99 of 1 ms and one of 50 ms.
	for range 99 {
		r.Record(time.Millisecond)
	}
	r.Record(50 * time.Millisecond)
	r.Tick(t0.Add(9 * time.Second)) // not over yet
	if got := r.WindowP99(); len(got) != 0 {
		t.Fatalf("window closed early: %v", got)
	}
	r.Tick(t0.Add(10 * time.Second))
	// Window 1 [10s,20s): nothing. Window 2 [20s,30s): 2 ms records.
	r.Tick(t0.Add(21 * time.Second)) // closes window 1, empty
	for range 10 {
		r.Record(2 * time.Millisecond)
	}
	r.Tick(t0.Add(30 * time.Second))
	// Window 3 [30s,40s): the run ends at 36 s, more than half a window:
	// it counts.
	r.Record(7 * time.Millisecond)
	r.Finish(t0.Add(36 * time.Second))
	// After Finish: counted in the totals, in no window.
	r.Record(9 * time.Millisecond)
	r.Tick(t0.Add(time.Hour))

	got := r.WindowP99()
	want := []float64{1, 2, 7}
	if len(got) != len(want) {
		t.Fatalf("WindowP99 = %v, want %v", got, want)
	}
	for i := range want {
		if !within(got[i], want[i]) {
			t.Errorf("WindowP99[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	ws := r.Windows()
	wantStarts := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}
	wantCounts := []int64{100, 0, 10, 1}
	if len(ws) != len(wantStarts) {
		t.Fatalf("Windows = %+v, want %d windows", ws, len(wantStarts))
	}
	for i := range ws {
		if ws[i].Start != wantStarts[i] || ws[i].Count != wantCounts[i] {
			t.Errorf("window %d = %+v, want start %v, count %d", i, ws[i], wantStarts[i], wantCounts[i])
		}
	}
	s := r.Snapshot()
	if s.Count != 112 || !within(s.Max, 50) {
		t.Errorf("totals: count %d, max %v; want 112 and 50 ms", s.Count, s.Max)
	}
	if len(s.WindowP99) != 3 {
		t.Errorf("Snapshot WindowP99 = %v, want the 3 samples", s.WindowP99)
	}
}

func TestRecorderShortLastWindowAddsNoSample(t *testing.T) {
	r := NewRecorder(10 * time.Second)
	r.Start(t0)
	r.Record(time.Millisecond)
	r.Tick(t0.Add(10 * time.Second))
	r.Record(3 * time.Millisecond)
	r.Finish(t0.Add(14 * time.Second)) // 4 s of a 10 s window
	if got := r.WindowP99(); len(got) != 1 || !within(got[0], 1) {
		t.Errorf("WindowP99 = %v, want only the full window's [1]", got)
	}
	if s := r.Snapshot(); s.Count != 2 {
		t.Errorf("count = %d, want 2: the short window's record still counts", s.Count)
	}
}

func TestRecorderLateTickSkipsAhead(t *testing.T) {
	// A Tick two and a half windows late closes one window with all the
	// records and two empty ones, and the next window ends on the grid.
	r := NewRecorder(time.Second)
	r.Start(t0)
	r.Record(4 * time.Millisecond)
	r.Tick(t0.Add(3500 * time.Millisecond))
	r.Record(5 * time.Millisecond)
	r.Tick(t0.Add(3999 * time.Millisecond))
	if ws := r.Windows(); len(ws) != 3 || ws[0].Count != 1 || ws[1].Count != 0 || ws[2].Count != 0 {
		t.Fatalf("Windows = %+v, want [1 record, empty, empty]", ws)
	}
	r.Tick(t0.Add(4 * time.Second))
	ws := r.Windows()
	if len(ws) != 4 || ws[3].Start != 3*time.Second || ws[3].Count != 1 {
		t.Errorf("Windows = %+v, want a fourth starting at 3s with 1 record", ws)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	const goroutines, each = 8, 5000
	r := NewRecorder(time.Second)
	r.Start(t0)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r.Record(time.Duration(g*each+i) * time.Microsecond)
			}
		})
	}
	// Ticks and snapshots while recording: the race detector checks them.
	for i := range 20 {
		r.Tick(t0.Add(time.Duration(i) * time.Second))
		_ = r.Snapshot()
		runtime.Gosched()
	}
	wg.Wait()
	r.Finish(t0.Add(20 * time.Second))
	s := r.Snapshot()
	if s.Count != goroutines*each {
		t.Errorf("count = %d, want %d", s.Count, goroutines*each)
	}
	var inWindows int64
	for _, w := range r.Windows() {
		inWindows += w.Count
	}
	if inWindows != goroutines*each {
		t.Errorf("windows hold %d records, want all %d (the last window lasted a full window)", inWindows, goroutines*each)
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{Start: t0, Interval: 250 * time.Microsecond}
	if got := s.Intended(4000); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("Intended(4000) = %v, want start + 1s", got)
	}
	if got := s.Latency(4, t0.Add(3*time.Millisecond)); got != 2*time.Millisecond {
		t.Errorf("Latency(4, start+3ms) = %v, want 2ms", got)
	}
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{{-time.Nanosecond, -1}, {0, 0}, {249 * time.Microsecond, 0}, {250 * time.Microsecond, 1}, {time.Second, 4000}} {
		if got := s.Index(t0.Add(c.at)); got != c.want {
			t.Errorf("Index(start%+v) = %d, want %d", c.at, got, c.want)
		}
	}
	if got := (Schedule{Start: t0}).Index(t0); got != math.MaxInt64 {
		t.Errorf("Index without an interval = %d, want every request due", got)
	}
}

// BenchmarkRecord measures Record from every processor at once: the worst
// case for its one lock.
func BenchmarkRecord(b *testing.B) {
	r := NewRecorder(time.Second)
	r.Start(t0)
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			d += 7 * time.Microsecond
			if d > time.Second {
				d = 0
			}
			r.Record(d)
		}
	})
}

// BenchmarkSnapshot measures a Snapshot of a histogram holding a spread of
// values, the time Record may wait behind it.
func BenchmarkSnapshot(b *testing.B) {
	r := NewRecorder(time.Second)
	r.Start(t0)
	for i := range 100000 {
		r.Record(time.Duration(i*i%1000003) * time.Microsecond)
	}
	b.ResetTimer()
	for b.Loop() {
		_ = r.Snapshot()
	}
}
