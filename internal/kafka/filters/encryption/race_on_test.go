//go:build race

package encryption

// raceEnabled: under the race detector sync.Pool drops objects at random,
// so pooled decoders are rebuilt and allocation bounds do not hold.
const raceEnabled = true
