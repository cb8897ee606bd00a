//go:build !race

package datakey

const raceEnabled = false
