package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a bytes.Buffer safe for the summary timer's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func countContaining(lines []string, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// A flood of the same warning from one client is one full line and then a
// summary with the count, however many connections the client opens.
func TestThrottleFoldsAFloodFromOnePeer(t *testing.T) {
	var buf syncBuffer
	// The interval does not end during the flood however slow the machine:
	// the test ends it below.
	h := NewThrottle(slog.NewTextHandler(&buf, nil), time.Hour).(*throttle)
	log := slog.New(h)
	before := testutil.ToFloat64(logSuppressed.WithLabelValues("WARN"))

	for i := range 2000 {
		// A new connection each time: same host, another port.
		c := log.With("client", fmt.Sprintf("10.0.0.7:%d", 40000+i))
		c.Warn("closing connection", "err", errors.New("connection reset by peer"))
	}
	lines := buf.lines()
	if n := countContaining(lines, `msg="closing connection"`); n != 1 {
		t.Fatalf("%d lines written during the flood, want the first one only:\n%s", n, strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], "connection reset by peer") || !strings.Contains(lines[0], "client=10.0.0.7:40000") {
		t.Fatalf("the first occurrence is not in full: %s", lines[0])
	}
	if got := testutil.ToFloat64(logSuppressed.WithLabelValues("WARN")) - before; got != 1999 {
		t.Fatalf("suppressed counter rose by %v, want 1999", got)
	}

	// When the interval ends, one summary line carries the count. End it
	// now: fire the summary timer the flood started.
	h.s.mu.Lock()
	if len(h.s.keys) != 1 {
		h.s.mu.Unlock()
		t.Fatalf("%d keys held for one peer and one message, want 1", len(h.s.keys))
	}
	for _, e := range h.s.keys {
		if e.timer == nil {
			h.s.mu.Unlock()
			t.Fatal("no summary timer running after lines were held back")
		}
		e.timer.Reset(0)
	}
	h.s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for countContaining(buf.lines(), "repeated=1999") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no summary line with the count:\n%s", strings.Join(buf.lines(), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(buf.lines()); n != 2 {
		t.Fatalf("%d lines, want the first occurrence and one summary:\n%s", n, strings.Join(buf.lines(), "\n"))
	}
}

// Other peers, other messages and lines below warn are not held back by
// one peer's flood.
func TestThrottleKeepsOtherPeersAndMessages(t *testing.T) {
	var buf syncBuffer
	log := slog.New(NewThrottle(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), time.Hour))
	a := log.With("client", "10.0.0.1:1000")
	b := log.With("client", "10.0.0.2:1000")
	for range 100 {
		a.Warn("closing connection")
		a.Info("connection open")
	}
	b.Warn("closing connection")
	a.Warn("cannot reach the broker")
	a.Error("closing connection")
	log.Warn("record refused", "client", "10.0.0.3:5")
	log.Warn("record refused", "client", "10.0.0.3:6")

	lines := buf.lines()
	for _, want := range []struct {
		sub string
		n   int
	}{
		{`level=WARN msg="closing connection" client=10.0.0.1`, 1},
		{`msg="connection open"`, 100},
		{`level=WARN msg="closing connection" client=10.0.0.2`, 1},
		{`msg="cannot reach the broker"`, 1},
		{`level=ERROR msg="closing connection"`, 1},
		{`msg="record refused"`, 1},
	} {
		if got := countContaining(lines, want.sub); got != want.n {
			t.Errorf("%d lines with %q, want %d", got, want.sub, want.n)
		}
	}
}

// After a quiet interval the next occurrence is written in full again.
func TestThrottleWritesAgainAfterQuietInterval(t *testing.T) {
	var buf syncBuffer
	h := NewThrottle(slog.NewTextHandler(&buf, nil), time.Minute)
	// The throttle reads each record's time, so the test stamps its own.
	at := time.Unix(1000, 0)
	for _, d := range []time.Duration{0, 2 * time.Minute} {
		r := slog.NewRecord(at.Add(d), slog.LevelWarn, "x", 0)
		r.AddAttrs(slog.String("peer", "p"))
		if err := h.Handle(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if n := countContaining(buf.lines(), `msg=x`); n != 2 {
		t.Fatalf("%d lines, want the line again after a quiet interval:\n%s", n, strings.Join(buf.lines(), "\n"))
	}
}

// Many distinct peers do not grow the throttle without bound.
func TestThrottleBoundsItsMemory(t *testing.T) {
	var buf syncBuffer
	h := NewThrottle(slog.NewTextHandler(&buf, nil), time.Hour).(*throttle)
	log := slog.New(h)
	for i := range 3 * maxThrottleKeys {
		log.Warn("closing connection", "client", fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
	}
	h.s.mu.Lock()
	n := len(h.s.keys)
	h.s.mu.Unlock()
	if n > maxThrottleKeys+1 {
		t.Fatalf("%d keys held, want at most %d", n, maxThrottleKeys+1)
	}
	if got := len(buf.lines()); got > maxThrottleKeys+1 {
		t.Fatalf("%d lines written for %d peers past the key limit, want the overflow folded", got, 3*maxThrottleKeys)
	}
}

// A full throttle forgets the peers whose interval is over, so that a new
// peer's line is keyed by its host again rather than folded.
func TestThrottleFreesKeysAfterTheirInterval(t *testing.T) {
	var buf syncBuffer
	h := NewThrottle(slog.NewTextHandler(&buf, nil), time.Minute).(*throttle)
	at := time.Unix(1000, 0)
	warn := func(at time.Time, msg, peer string) {
		t.Helper()
		r := slog.NewRecord(at, slog.LevelWarn, msg, 0)
		r.AddAttrs(slog.String("peer", peer))
		if err := h.Handle(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxThrottleKeys {
		warn(at, "filler", fmt.Sprint("p", i))
	}
	// Full: new peers share one key per message.
	warn(at, "x", "new1")
	warn(at.Add(time.Second), "x", "new2")
	if n := countContaining(buf.lines(), `msg=x`); n != 1 {
		t.Fatalf("%d lines from new peers of a full throttle, want 1 (folded)", n)
	}
	// The fillers' interval is over: the next new peer has a key of its own.
	warn(at.Add(2*time.Minute), "x", "new3")
	warn(at.Add(2*time.Minute), "x", "new4")
	if n := countContaining(buf.lines(), `msg=x`); n != 3 {
		t.Fatalf("%d lines from new peers after the interval, want 3 (each its own key)", n)
	}
	h.s.mu.Lock()
	n := len(h.s.keys)
	h.s.mu.Unlock()
	if n > 4 {
		t.Errorf("%d keys held after the interval, want the fillers forgotten", n)
	}
}
