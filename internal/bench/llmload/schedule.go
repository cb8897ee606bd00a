package llmload

import (
	"math"
	"time"
)

// schedule gives the intended send time of request i: a linear ramp from
// rampFrom to rate over warmup, then rate. Request times are the points
// where the integral of the rate reaches 0, 1, 2, ...
type schedule struct {
	start    time.Time
	warmup   float64 // seconds
	from, to float64 // requests per second
}

func newSchedule(start time.Time, w Workload) schedule {
	from := w.RampFrom
	if from <= 0 || w.Warmup <= 0 {
		from = w.Rate
	}
	return schedule{start: start, warmup: w.Warmup.Seconds(), from: from, to: w.Rate}
}

// rampCount is how many requests the warm-up holds.
func (s schedule) rampCount() float64 { return (s.from + s.to) / 2 * s.warmup }

// at returns request i's intended time, in seconds from start.
func (s schedule) at(i int64) float64 {
	n := float64(i)
	if n >= s.rampCount() {
		return s.warmup + (n-s.rampCount())/s.to
	}
	// During the ramp the rate is from + k·t with k = (to-from)/warmup,
	// so the count is from·t + k·t²/2; solve for t.
	k := (s.to - s.from) / s.warmup
	if math.Abs(k) < 1e-12 {
		return n / s.from
	}
	return (-s.from + math.Sqrt(s.from*s.from+2*k*n)) / k
}

// Intended returns request i's intended send time.
func (s schedule) Intended(i int64) time.Time {
	return s.start.Add(time.Duration(s.at(i) * float64(time.Second)))
}
