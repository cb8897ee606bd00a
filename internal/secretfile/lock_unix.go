//go:build unix

package secretfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock takes an exclusive advisory lock (flock) on path, a directory or a
// file (created 0600 when create is set), trying attempts times retry
// apart while another command holds it. It returns the function that
// releases it. The lock guards against two commands changing the same
// files at once; it is on a path that is never replaced, since the files
// themselves are replaced on every write.
func Lock(path string, create bool, attempts int, retry time.Duration) (unlock func(), err error) {
	var f *os.File
	if create {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	} else {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	for range attempts {
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
		time.Sleep(retry)
	}
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%s is still locked by another command after %v; try again", path, time.Duration(attempts)*retry)
	}
	return nil, fmt.Errorf("%s: %w", path, err)
}
