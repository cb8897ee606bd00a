package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultThrottleInterval is how long repeats of a warning from one peer
// are folded into a single summary line.
const DefaultThrottleInterval = 10 * time.Second

// maxThrottleKeys bounds the throttle's memory when warnings come from very
// many peers; past it, lines are keyed by message alone.
const maxThrottleKeys = 4096

// logSuppressed counts the lines the throttle held back. It is one
// process-wide collector, registered by NewRegistry, because the logger is
// built before any registry exists.
var logSuppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "strait_log_lines_suppressed_total",
	Help: "Warning and error log lines folded into a summary line because the same line repeated for the same peer.",
}, []string{"level"})

// peerAttrs are the attribute keys that name the other end of a
// connection; the throttle keys repeated lines by their host.
var peerAttrs = map[string]bool{"client": true, "peer": true, "remote": true}

// NewThrottle wraps next so that a warning or error repeated for the same
// peer (the host of a "client", "peer" or "remote" attribute) within
// interval is written once in full; the repeats are counted, and when the
// interval ends one summary line says how many there were. One client that
// resets a thousand connections a second, or a consumer refetching a
// partition that cannot be decrypted, thus costs a line per interval, not a
// disk. Lines below warn pass through untouched.
func NewThrottle(next slog.Handler, interval time.Duration) slog.Handler {
	if interval <= 0 {
		return next
	}
	return &throttle{next: next, s: &throttleState{interval: interval, keys: map[throttleKey]*throttled{}, now: time.Now}}
}

type throttle struct {
	next slog.Handler
	peer string // host of the peer attribute given through WithAttrs
	s    *throttleState
}

type throttleKey struct {
	level slog.Level
	msg   string
	peer  string
}

type throttled struct {
	until      time.Time // repeats before this are held back
	suppressed int
	first      time.Time // when the suppressed run began
	h          slog.Handler
	timer      *time.Timer
}

type throttleState struct {
	interval time.Duration
	now      func() time.Time
	mu       sync.Mutex
	keys     map[throttleKey]*throttled
	// nextSweep is when a sweep of a full map may next free a key: until
	// then lines from new peers fold into the message's key without
	// walking the map each time.
	nextSweep time.Time
}

func (t *throttle) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t *throttle) WithAttrs(as []slog.Attr) slog.Handler {
	c := *t
	c.next = t.next.WithAttrs(as)
	for _, a := range as {
		if peerAttrs[a.Key] {
			c.peer = peerHost(a.Value)
		}
	}
	return &c
}

func (t *throttle) WithGroup(name string) slog.Handler {
	c := *t
	c.next = t.next.WithGroup(name)
	return &c
}

func (t *throttle) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return t.next.Handle(ctx, r)
	}
	peer := t.peer
	r.Attrs(func(a slog.Attr) bool {
		if peerAttrs[a.Key] {
			peer = peerHost(a.Value)
		}
		return true
	})
	if !t.s.admit(throttleKey{r.Level, r.Message, peer}, t.next, r.Time) {
		logSuppressed.WithLabelValues(r.Level.String()).Inc()
		return nil
	}
	return t.next.Handle(ctx, r)
}

// admit reports whether a line may be written now; if not, it counts it and
// makes sure a summary follows when the interval ends.
func (s *throttleState) admit(k throttleKey, h slog.Handler, at time.Time) bool {
	if at.IsZero() {
		at = s.now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[k]
	if e == nil {
		if len(s.keys) >= maxThrottleKeys {
			if !at.Before(s.nextSweep) {
				s.sweep(at)
			}
			if len(s.keys) >= maxThrottleKeys {
				// Too many distinct peers to remember: fall back to one
				// key per message so the flood is still bounded.
				k.peer = "*"
				if e = s.keys[k]; e != nil {
					return s.hold(k, e, h, at)
				}
			}
		}
		s.keys[k] = &throttled{until: at.Add(s.interval)}
		return true
	}
	if !at.Before(e.until) && e.suppressed == 0 {
		e.until = at.Add(s.interval)
		return true
	}
	return s.hold(k, e, h, at)
}

func (s *throttleState) hold(k throttleKey, e *throttled, h slog.Handler, at time.Time) bool {
	if e.suppressed == 0 {
		e.first = at
	}
	e.suppressed++
	e.h = h
	if e.timer == nil {
		wait := e.until.Sub(at)
		if wait < 0 {
			wait = 0
		}
		e.timer = time.AfterFunc(wait, func() { s.summarize(k) })
	}
	return false
}

// summarize writes the summary line of a key whose interval ended with
// lines held back, and starts a new interval so that a flood that goes on
// yields one summary per interval.
func (s *throttleState) summarize(k throttleKey) {
	s.mu.Lock()
	e := s.keys[k]
	if e == nil {
		s.mu.Unlock()
		return
	}
	e.timer = nil
	n, h, since := e.suppressed, e.h, e.first
	if n == 0 {
		delete(s.keys, k)
		s.mu.Unlock()
		return
	}
	e.suppressed = 0
	now := s.now()
	e.until = now.Add(s.interval)
	s.mu.Unlock()

	r := slog.NewRecord(now, k.level, k.msg, 0)
	r.AddAttrs(
		slog.Int("repeated", n),
		slog.String("over", roundDuration(now.Sub(since))),
		slog.String("note", fmt.Sprintf("this line repeated %d more times; repeats are logged once per %s per peer", n, s.interval)),
	)
	_ = h.Handle(context.Background(), r)
}

// sweep forgets keys whose interval is over and that hold nothing back,
// and notes when the first of those kept can be forgotten. (A key holding
// lines back is summarized at the end of its interval and starts another,
// so it lasts at least that long.)
func (s *throttleState) sweep(now time.Time) {
	next := now.Add(s.interval)
	for k, e := range s.keys {
		switch {
		case e.suppressed > 0:
		case !now.Before(e.until):
			delete(s.keys, k)
		case e.until.Before(next):
			next = e.until
		}
	}
	s.nextSweep = next
}

func peerHost(v slog.Value) string {
	s := v.Resolve().String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

func roundDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
