//go:build !linux

package llmload

import "time"

// pollSleep sleeps d.
func pollSleep(d time.Duration) { time.Sleep(d) }
