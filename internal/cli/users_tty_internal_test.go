//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/straitgw/strait/internal/testkit"
)

// openPTY returns the two ends of a new pseudo-terminal: what a user types is written to master, and the
// program reads it from tty.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("numbering the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, tty
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// echoOff reports whether the terminal has echo turned off, as it is while a password is read.
func echoOff(t *testing.T, tty *os.File) bool {
	var tio syscall.Termios
	if err := ioctl(tty, syscall.TCGETS, unsafe.Pointer(&tio)); err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&syscall.ECHO == 0
}

// typeAt waits for the prompt to be printed and echo to be off, then types line.
func typeAt(t *testing.T, master, tty *os.File, prompts *testkit.SyncBuffer, prompt string, line string) error {
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasSuffix(prompts.String(), prompt) || !echoOff(t, tty) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no prompt %q with echo off after 10 s; printed %q", prompt, prompts.String())
		}
		time.Sleep(time.Millisecond)
	}
	_, err := master.WriteString(line)
	return err
}

// addOnTerminal runs `strait users add` with a terminal as standard input and types the two lines at its
// prompts. It returns the command's output, what the terminal showed, and the command's error.
func addOnTerminal(t *testing.T, path, first, second string) (out, shown string, err error) {
	master, tty := openPTY(t)
	old := usersStdin
	usersStdin = tty
	defer func() { usersStdin = old }()

	var stdout bytes.Buffer
	prompts := &testkit.SyncBuffer{}
	typed := make(chan error, 1)
	go func() {
		err := typeAt(t, master, tty, prompts, "Password for alice: ", first)
		if err == nil {
			err = typeAt(t, master, tty, prompts, "The same again: ", second)
		}
		typed <- err
	}()
	err = runUsers(context.Background(), []string{"add", "--store", path, "alice"}, &stdout, prompts)
	if terr := <-typed; terr != nil {
		t.Fatal(terr)
	}
	tty.Close()
	echoed, _ := io.ReadAll(master) // ends with EIO once the terminal is closed and drained
	return stdout.String() + prompts.String(), string(echoed), err
}

// TestUsersAddPromptsWithoutEcho: on a terminal, the password is asked for twice, and what is typed is not
// shown.
func TestUsersAddPromptsWithoutEcho(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	out, shown, err := addOnTerminal(t, path, "typed-secret\n", "typed-secret\n")
	if err != nil {
		t.Fatalf("users add on a terminal: %v\n%s", err, out)
	}
	if !strings.Contains(out, "added user alice") {
		t.Errorf("output %q", out)
	}
	if strings.Contains(shown, "typed-secret") || strings.Contains(out, "typed-secret") {
		t.Errorf("the password was echoed: terminal %q, output %q", shown, out)
	}
	if !verify(t, path, "alice", "typed-secret") {
		t.Error("the typed password does not log alice in")
	}
}

func TestUsersAddPromptsMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	_, _, err := addOnTerminal(t, path, "typed-secret\n", "typed-secreT\n")
	if err == nil || !strings.Contains(err.Error(), "the two passwords differ; nothing was changed") {
		t.Fatalf("different passwords: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was created anyway: %v", err)
	}
}
