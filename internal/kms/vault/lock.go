package vault

import "time"

// lockAttempts and lockRetry bound waiting for another `strait keys`
// command holding the vault's lock file: 10 s in all.
const (
	lockAttempts = 100
	lockRetry    = 100 * time.Millisecond
)
