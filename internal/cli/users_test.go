package cli_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/auth/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestUsersCommand runs `strait users` through cli.Run: registered, with its exit codes.
func TestUsersCommand(t *testing.T) {
	if code, stdout, stderr := run(t, "users", "--help"); code != 0 || !strings.Contains(stdout, "Usage: strait users <command>") {
		t.Fatalf("strait users --help: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := run(t, "users"); code != 2 || !strings.Contains(stderr, "Usage: strait users <command>") {
		t.Errorf("strait users: exit %d, stderr %q; want 2 and the usage", code, stderr)
	}
	if code, _, stderr := run(t, "users", "add", "-h"); code != 0 || stderr != "" {
		t.Errorf("strait users add -h: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run(t, "users", "list", "--store", filepath.Join(t.TempDir(), "none.store")); code != 1 ||
		!strings.HasPrefix(stderr, "strait users: credential store ") {
		t.Errorf("strait users list of a missing store: exit %d, stderr %q; want 1 and the reason", code, stderr)
	}
}

// straitIn runs the strait binary in dir with stdin as its standard input (not a terminal).
func straitIn(t *testing.T, dir, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, straitBin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("strait %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// TestUsersAddAsTheExampleDoes: `strait users add --store examples/users.store NAME` with the password on
// standard input, as examples/sasl.yaml tells, makes a store the SASL mechanisms authenticate with, and
// one that franz-go's SCRAM client logs in to.
func TestUsersAddAsTheExampleDoes(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := straitIn(t, dir, "alice-secret\n", "users", "add", "--store", "examples/users.store", "alice")
	if code != 0 || !strings.Contains(stdout, "added user alice to "+filepath.Join(dir, "examples", "users.store")) {
		t.Fatalf("strait users add: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "alice-secret") {
		t.Error("the output shows the password")
	}
	path := filepath.Join(dir, "examples", "users.store")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the store: %v; want mode 0600", err)
	}
	if stdout, _, code := straitIn(t, dir, "", "users", "list", "--store", "examples/users.store"); code != 0 || !strings.Contains(stdout, "alice") {
		t.Errorf("strait users list: exit %d, %q", code, stdout)
	}

	store, err := credstore.Open(path, credstore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if ex := sasl.NewPlain(store).Start(context.Background(), ""); !authenticates(ex, []byte("\x00alice\x00alice-secret")) {
		t.Error("PLAIN does not log alice in with the password given on standard input")
	}
	for _, client := range []struct {
		name string
		mech *sasl.SCRAM
	}{
		{"SCRAM-SHA-256", sasl.NewSCRAMSHA256(store)},
		{"SCRAM-SHA-512", sasl.NewSCRAMSHA512(store)},
	} {
		a := kscram.Auth{User: "alice", Pass: "alice-secret"}
		m := a.AsSha256Mechanism()
		if client.name == "SCRAM-SHA-512" {
			m = a.AsSha512Mechanism()
		}
		session, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
		if err != nil {
			t.Fatal(err)
		}
		ex := client.mech.Start(context.Background(), "")
		ok := false
		for range 2 {
			answer, done, err := ex.Next(msg)
			if err != nil {
				break
			}
			clientDone, next, cerr := session.Challenge(answer)
			if cerr != nil {
				break
			}
			if done {
				ok = clientDone && ex.Result().Principal == "alice"
				break
			}
			msg = next
		}
		if !ok {
			t.Errorf("%s: franz-go's client does not log alice in", client.name)
		}
	}

	// Without a password on standard input, nothing changes.
	if _, stderr, code := straitIn(t, dir, "", "users", "add", "--store", "examples/users.store", "bob"); code != 1 ||
		!strings.Contains(stderr, "no password on standard input") {
		t.Errorf("strait users add with nothing on stdin: exit %d, stderr %q", code, stderr)
	}
}

// authenticates runs a one-message exchange and reports whether it succeeded.
func authenticates(ex sasl.Exchange, msg []byte) bool {
	_, done, err := ex.Next(msg)
	return done && err == nil
}
