//go:build unix

package credstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockAttempts and lockRetry bound waiting for another `strait users` command: 10 s in all. Variables for
// the tests.
var (
	lockAttempts = 100
	lockRetry    = 100 * time.Millisecond
)

// lockDir takes an exclusive advisory lock on the store's directory, so that two commands changing the store
// at once cannot each write their change over the other's. The lock is on the directory, not the file,
// because the file is replaced on every write, and so that no lock file is left beside the store. It returns
// the function that releases it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("credential store directory %s: %w", dir, err)
	}
	for range lockAttempts {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			break
		}
		time.Sleep(lockRetry)
	}
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("locking %s: still locked by another command after %v; try again", dir, time.Duration(lockAttempts)*lockRetry)
	}
	return nil, fmt.Errorf("locking %s: %w", dir, err)
}
