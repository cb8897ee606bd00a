//go:build !race

package sasl_test

const raceEnabled = false
