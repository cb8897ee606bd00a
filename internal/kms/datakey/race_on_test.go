//go:build race

package datakey

// raceEnabled: under the race detector sync.Pool drops objects at random,
// so Seal makes new MACs and its allocation bound does not hold.
const raceEnabled = true
