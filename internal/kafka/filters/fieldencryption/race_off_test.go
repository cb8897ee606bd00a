//go:build !race

package fieldencryption

const raceEnabled = false
