package gateway

import (
	"net/http"
	"testing"
	"time"
)

// A provider's retry-after headers are read from the network: any value
// gives a wait from zero to a bounded one, never a panic.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "1", "0.5", "-3", "1e9", "NaN", "Inf", "Wed, 21 Oct 2015 07:28:00 GMT", "120"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		if ra != "" {
			h.Set("Retry-After", ra)
		}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		d := parseRetryAfter(h)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("retry-after %q, retry-after-ms %q: wait %v", ra, ms, d)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	for _, c := range []struct {
		ra, ms string
		want   time.Duration
	}{
		{"2", "", 2 * time.Second},
		{"2", "150", 150 * time.Millisecond},
		{"", "1.5", 1500 * time.Microsecond},
		{"-1", "", 0},
		{"soon", "", 0},
		{"", "NaN", 0},
		{"86400", "", time.Hour},
		{"Wed, 01 Oct 2070 00:00:00 GMT", "", time.Hour},
	} {
		h := http.Header{}
		if c.ra != "" {
			h.Set("Retry-After", c.ra)
		}
		if c.ms != "" {
			h.Set("Retry-After-Ms", c.ms)
		}
		if got := parseRetryAfter(h); got != c.want {
			t.Errorf("retry-after %q, retry-after-ms %q: %v, want %v", c.ra, c.ms, got, c.want)
		}
	}
}
