package stats

import (
	"math"
	"time"
)

// Schedule paces open-loop load: request i is due at Start + i*Interval,
// whatever happened to the requests before it. The caller sleeps until
// Intended(i), sends, and records the latency from Intended(i) — never from
// the moment it actually sent, which is later whenever the sender fell
// behind, and by exactly the time the system under test made it wait.
type Schedule struct {
	Start    time.Time
	Interval time.Duration
}

// Intended returns when request i is due.
func (s Schedule) Intended(i int64) time.Time {
	return s.Start.Add(time.Duration(i) * s.Interval)
}

// Latency returns the latency of request i that completed at done, counted
// from when it was due.
func (s Schedule) Latency(i int64, done time.Time) time.Duration {
	return done.Sub(s.Intended(i))
}

// Index returns the last request due at or before now, or -1 if none is
// due yet: a sender that fell behind sends every request up to it without
// sleeping. With no Interval every request is due at Start, and Index
// returns math.MaxInt64 from then on.
func (s Schedule) Index(now time.Time) int64 {
	if now.Before(s.Start) {
		return -1
	}
	if s.Interval <= 0 {
		return math.MaxInt64
	}
	return int64(now.Sub(s.Start) / s.Interval)
}
