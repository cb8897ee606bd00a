//go:build unix

package vault

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockAttempts and lockRetry bound waiting for another `strait keys` command: 10 s in all.
const (
	lockAttempts = 100
	lockRetry    = 100 * time.Millisecond
)

// lockFile takes an exclusive advisory lock on path (created 0600 if missing), so that two commands changing
// the vault at once cannot both add version N+1 and lose one of them. The lock is on a file of its own because
// the key files themselves are replaced on every write. It returns the function that releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the vault: %w", err)
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
		return nil, fmt.Errorf("locking the vault: %s is still locked by another command after %v; try again", path, lockAttempts*lockRetry)
	}
	return nil, fmt.Errorf("locking the vault (%s): %w", path, err)
}
