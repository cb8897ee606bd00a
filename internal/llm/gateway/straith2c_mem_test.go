//go:build !race

// The race detector's instrumentation makes every frame and allocation
// larger, so this runs without it (scripts/test runs it once so).

package gateway

import "testing"

// A request over h2c waiting on its provider holds much less memory
// behind Strait's HTTP/2 server than behind x/net's (about half: no write
// buffer per stream, no serve loop's state, a handler stack that is not
// grown), measured in one run against each other.
func TestStraitH2CHoldsLessInFlight(t *testing.T) {
	const first, n = 500, 2000
	xh, xs := h2cInFlight(t, false, first, n)
	sh, ss := h2cInFlight(t, true, first, n)
	t.Logf("per request in flight over h2c: x/net's server %.0f B heap + %.0f B stack, Strait's %.0f + %.0f", xh, xs, sh, ss)
	if sh+ss > 0.75*(xh+xs) {
		t.Errorf("a request in flight holds %.0f B behind Strait's HTTP/2 server and %.0f B behind x/net's: want at most three quarters", sh+ss, xh+xs)
	}
}
