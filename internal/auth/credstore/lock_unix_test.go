//go:build unix

package credstore

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockHeld: a command that cannot take the store's lock gives up after a while, saying why, and
// changes nothing.
func TestLockHeld(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	oldAttempts, oldRetry := lockAttempts, lockRetry
	lockAttempts, lockRetry = 3, time.Millisecond
	defer func() { lockAttempts, lockRetry = oldAttempts, oldRetry }()

	if _, err := AddUser(path, "bob", "pw-b", MinIterations); err == nil || !strings.Contains(err.Error(), "still locked by another command after 3ms; try again") {
		t.Fatalf("AddUser while the lock is held: %v", err)
	}
	if err := RemoveUser(path, "alice"); err == nil || !strings.Contains(err.Error(), "still locked") {
		t.Fatalf("RemoveUser while the lock is held: %v", err)
	}
	syscall.Flock(int(dir.Fd()), syscall.LOCK_UN)
	if users, err := ListUsers(path); err != nil || len(users) != 1 || users[0].Name != "alice" {
		t.Errorf("after the refused changes: %+v, %v; want alice alone", users, err)
	}
}
