package credstore

import "time"

// lockAttempts and lockRetry bound waiting for another `strait users`
// command holding the store's lock (on its directory: the file is replaced
// on every write, and no lock file is left beside the store): 10 s in all.
// Variables for the tests.
var (
	lockAttempts = 100
	lockRetry    = 100 * time.Millisecond
)
