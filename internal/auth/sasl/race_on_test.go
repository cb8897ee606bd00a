//go:build race

package sasl_test

// raceEnabled: the race detector slows PBKDF2 and HMAC tenfold and unevenly, so the timing tests skip.
const raceEnabled = true
