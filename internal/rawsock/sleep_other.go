//go:build !linux

package rawsock

import "time"

// Sleep sleeps d.
func Sleep(d time.Duration) { time.Sleep(d) }
