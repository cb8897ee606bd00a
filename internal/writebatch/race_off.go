//go:build !race

package writebatch

const raceEnabled = false
