package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/auth/credstore"
)

// users runs `strait users args...` in process, with stdin as standard input.
func users(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	old := usersStdin
	usersStdin = strings.NewReader(stdin)
	defer func() { usersStdin = old }()
	var out, errOut bytes.Buffer
	err = runUsers(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func mustUsers(t *testing.T, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := users(t, stdin, args...)
	if err != nil {
		t.Fatalf("strait users %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout, stderr
}

// verify reports whether the store at path lets name log in with password.
func verify(t *testing.T, path, name, password string) bool {
	t.Helper()
	s, err := credstore.Open(path, credstore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s.VerifyPlain(name, password)
}

func TestUsersAddRemoveList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	var printed strings.Builder
	step := func(stdin string, args ...string) string {
		t.Helper()
		stdout, stderr := mustUsers(t, stdin, args...)
		printed.WriteString(stdout + stderr)
		return stdout
	}

	out := step("alice-pw\n", "add", "--store", path, "alice")
	if want := "added user alice to " + path + " (SCRAM-SHA-256 and SCRAM-SHA-512, 8192 iterations)"; !strings.Contains(out, want) {
		t.Errorf("add printed %q, want it to contain %q", out, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the store: %v, %v; want mode 0600", fi, err)
	}
	step("bob-pw\r\n", "add", "bob", "--store", path, "--iterations", "4096") // flags may follow the name; CR LF
	step("carol-pw", "add", "--store", path, "carol")                         // no line ending at all

	out = step("alice-new\nignored second line\n", "add", "--store", path, "alice")
	if !strings.Contains(out, "replaced the password of user alice in "+path) {
		t.Errorf("adding alice again printed %q, want it to say her password was replaced", out)
	}
	for _, c := range []struct {
		name, password string
		want           bool
	}{{"alice", "alice-new", true}, {"alice", "alice-pw", false}, {"bob", "bob-pw", true}, {"bob", "bob-pw\r", false}, {"carol", "carol-pw", true}} {
		if got := verify(t, path, c.name, c.password); got != c.want {
			t.Errorf("%s with %q: %v, want %v", c.name, c.password, got, c.want)
		}
	}

	out = step("", "list", "--store", path)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^NAME\s+MECHANISMS\s+ITERATIONS$`),
		regexp.MustCompile(`^alice\s+SCRAM-SHA-256,SCRAM-SHA-512\s+8192$`),
		regexp.MustCompile(`^bob\s+SCRAM-SHA-256,SCRAM-SHA-512\s+4096$`),
		regexp.MustCompile(`^carol\s+SCRAM-SHA-256,SCRAM-SHA-512\s+8192$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("list printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("list line %d = %q, want it to match %s", i, lines[i], re)
		}
	}

	out = step("", "list", "--json", "--store", path)
	var listed []struct {
		Name       string
		Mechanisms []struct {
			Name       string
			Iterations int
		}
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(listed) != 3 || listed[1].Name != "bob" || len(listed[1].Mechanisms) != 2 || listed[1].Mechanisms[1].Name != "SCRAM-SHA-512" ||
		listed[1].Mechanisms[1].Iterations != 4096 {
		t.Errorf("list --json = %+v", listed)
	}

	out = step("", "remove", "--store", path, "bob")
	if !strings.Contains(out, "removed user bob from "+path) {
		t.Errorf("remove printed %q", out)
	}
	if verify(t, path, "bob", "bob-pw") {
		t.Error("bob can still log in after his removal")
	}

	data, _ := os.ReadFile(path)
	for _, secret := range []string{"alice-pw", "alice-new", "bob-pw", "carol-pw"} {
		if strings.Contains(printed.String(), secret) || bytes.Contains(data, []byte(secret)) {
			t.Errorf("the output or the store holds the password %q", secret)
		}
	}
}

func TestUsersListEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := mustUsers(t, "", "list", "--store", path)
	if stdout != "" || !strings.Contains(stderr, "no users in "+path) || !strings.Contains(stderr, "users add --store "+path+" NAME") {
		t.Errorf("list of an empty store: stdout %q, stderr %q", stdout, stderr)
	}
	stdout, _ = mustUsers(t, "", "list", "--json", "--store", path)
	if strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list --json of an empty store: %q, want []", stdout)
	}
}

func TestUsersErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.store")
	mustUsers(t, "alice-pw\n", "add", "--store", path, "alice")
	loose := filepath.Join(dir, "loose.store")
	if err := os.WriteFile(loose, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRAIT_USERS", "")

	tests := []struct {
		name  string
		stdin string
		args  []string
		usage bool   // a usage error (exit 2) rather than a failure (exit 1)
		want  string // in the error, or for a usage error in stderr
	}{
		{"no store", "pw\n", []string{"add", "alice"}, true, "--store FILE is required"},
		{"no store for list", "", []string{"list"}, true, "--store FILE is required"},
		{"no name", "pw\n", []string{"add", "--store", path}, true, "missing the user name"},
		{"two names", "pw\n", []string{"add", "--store", path, "alice", "bob"}, true, "unexpected arguments"},
		{"bad flag", "pw\n", []string{"add", "--store", path, "--nope", "alice"}, true, "nope"},
		{"bad iterations", "pw\n", []string{"add", "--store", path, "--iterations", "100", "alice"}, false, "--iterations 100: want 4096 to 16384"},
		{"bad name", "pw\n", []string{"add", "--store", path, "al\u00a0ice"}, false, "SASLprep"},
		{"no password", "", []string{"add", "--store", path, "bob"}, false, "no password on standard input"},
		{"empty first line", "\nbob-pw\n", []string{"add", "--store", path, "bob"}, false, "no password on standard input"},
		{"long password", strings.Repeat("p", 1025) + "\n", []string{"add", "--store", path, "bob"}, false, "at most 1024"},
		{"very long line", strings.Repeat("p", 5000), []string{"add", "--store", path, "bob"}, false, "longer than a password may be (1024 bytes)"},
		{"tab in the password", "bob\tpw\n", []string{"add", "--store", path, "bob"}, false, "SASLprep"},
		{"missing directory", "pw\n", []string{"add", "--store", filepath.Join(dir, "nope", "users.store"), "bob"}, false, "nope"},
		{"loose store", "pw\n", []string{"add", "--store", loose, "bob"}, false, "chmod 600 " + loose},
		{"list of a loose store", "", []string{"list", "--store", loose}, false, "chmod 600 " + loose},
		{"list of a missing store", "", []string{"list", "--store", filepath.Join(dir, "none.store")}, false, "does not exist: add a user with"},
		{"remove of an unknown user", "", []string{"remove", "--store", path, "bob"}, false, `no user "bob" in ` + path + ": see '"},
		{"remove from a missing store", "", []string{"remove", "--store", filepath.Join(dir, "none.store"), "bob"}, false, "does not exist"},
		{"unknown command", "", []string{"rename"}, true, `unknown command "rename"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := users(t, tt.stdin, tt.args...)
			switch {
			case tt.usage && !errors.Is(err, errUsage):
				t.Fatalf("err = %v, want a usage error", err)
			case tt.usage && !strings.Contains(stderr, tt.want):
				t.Fatalf("stderr %q does not say %q", stderr, tt.want)
			case !tt.usage && (err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want a failure saying %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "pw") && !strings.Contains(tt.want, "pw") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
	if verify(t, path, "bob", "pw") || !verify(t, path, "alice", "alice-pw") {
		t.Error("a refused command changed the store")
	}
}

// TestUsersStoreFromEnvironment: $STRAIT_USERS is the default --store.
func TestUsersStoreFromEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	t.Setenv("STRAIT_USERS", path)
	mustUsers(t, "alice-pw\n", "add", "alice")
	if !verify(t, path, "alice", "alice-pw") {
		t.Error("alice was not added to $STRAIT_USERS")
	}
}

func TestUsersHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"add", "-h"}, {"remove", "--help"}, {"list", "-h"}} {
		stdout, stderr, err := users(t, "", args...)
		if !errors.Is(err, flag.ErrHelp) || stderr != "" || !strings.Contains(stdout, "Usage: strait users") {
			t.Errorf("strait users %v: %v; stdout %q; stderr %q", args, err, stdout, stderr)
		}
	}
	stdout, stderr, err := users(t, "")
	if !errors.Is(err, errUsage) || stdout != "" || !strings.Contains(stderr, "Usage: strait users <command>") {
		t.Errorf("strait users: %v; stdout %q; stderr %q", err, stdout, stderr)
	}
}

// TestFirstLineReadsNoMore: the password is the first line, and nothing after it is consumed past the
// bound, whatever follows.
func TestFirstLineReadsNoMore(t *testing.T) {
	r := strings.NewReader("pw\n" + strings.Repeat("x", 1<<20))
	if got, err := firstLine(r); err != nil || got != "pw" {
		t.Fatalf("firstLine = %q, %v", got, err)
	}
	if rest, _ := io.ReadAll(r); len(rest) < 1<<20-maxPasswordLine {
		t.Errorf("firstLine read %d bytes past the bound", 1<<20+3-len(rest))
	}
}
