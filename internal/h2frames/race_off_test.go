//go:build !race

package h2frames

// raceEnabled reports whether the race detector is on: its
// instrumentation allocates, so allocation counts do not hold.
const raceEnabled = false
