//go:build race

package fieldencryption

// raceEnabled: under the race detector sync.Pool drops objects at random,
// so the pooled scratch is made anew and allocation bounds do not hold.
const raceEnabled = true
