package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// keys runs `strait keys args...` in process.
func keys(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runKeys(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func mustKeys(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := keys(t, args...)
	if err != nil {
		t.Fatalf("strait keys %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout, stderr
}

// materials returns the base64 key material of every KEK file in dir, to check that no output shows it.
func materials(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no key files in %s (%v)", dir, err)
	}
	var out []string
	for _, f := range files {
		var doc struct{ Versions []struct{ Key string } }
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range doc.Versions {
			out = append(out, v.Key)
		}
	}
	return out
}

func TestKeysCreateRotateList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	var printed strings.Builder
	step := func(args ...string) string {
		t.Helper()
		stdout, stderr := mustKeys(t, args...)
		printed.WriteString(stdout + stderr)
		return stdout
	}

	out := step("create", "--vault", dir, "orders")
	if want := "created key-encryption key orders, version 1, in " + dir; !strings.Contains(out, want) {
		t.Errorf("create printed %q, want it to contain %q", out, want)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "orders.json"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	step("create", "payments", "--vault", dir) // flags may follow the name

	out = step("rotate", "--vault", dir, "orders")
	if !strings.Contains(out, "version 2 is now the newest") || !strings.Contains(out, "The previous version stays") {
		t.Errorf("first rotate printed %q", out)
	}
	out = step("rotate", "--vault", dir, "orders")
	if !strings.Contains(out, "version 3 is now the newest") || !strings.Contains(out, "The 2 previous versions stay") {
		t.Errorf("second rotate printed %q", out)
	}

	out = step("list", "--vault", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^NAME\s+VERSION\s+CREATED$`),
		regexp.MustCompile(`^orders\s+1\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
		regexp.MustCompile(`^orders\s+2\s+\S+Z$`),
		regexp.MustCompile(`^orders\s+3\s+\S+Z\s+newest$`),
		regexp.MustCompile(`^payments\s+1\s+\S+Z\s+newest$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("list printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("list line %d = %q, want it to match %s", i, lines[i], re)
		}
	}

	out = step("list", "--json", "--vault", dir)
	var listed []struct {
		Name     string
		Versions []struct {
			Version int
			Created time.Time
		}
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(listed) != 2 || listed[0].Name != "orders" || len(listed[0].Versions) != 3 || listed[0].Versions[2].Version != 3 ||
		listed[1].Name != "payments" || time.Since(listed[1].Versions[0].Created) > time.Hour {
		t.Errorf("list --json = %+v", listed)
	}

	for _, m := range materials(t, dir) {
		if strings.Contains(printed.String(), m) || strings.Contains(printed.String(), m[:12]) {
			t.Fatalf("key material was printed:\n%s", printed.String())
		}
	}
}

func TestKeysVaultFromEnvironment(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys.json")
	t.Setenv("STRAIT_VAULT", file)
	mustKeys(t, "create", "orders")
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("single-file vault %s: %v, %v; want a 0600 file", file, fi, err)
	}
	out, _ := mustKeys(t, "list")
	if !strings.Contains(out, "orders") {
		t.Errorf("list with STRAIT_VAULT printed %q", out)
	}
	// --vault wins over the environment.
	dir := filepath.Join(t.TempDir(), "other")
	mustKeys(t, "create", "--vault", dir, "payments")
	if out, _ := mustKeys(t, "list"); strings.Contains(out, "payments") {
		t.Errorf("the key created with --vault went to $STRAIT_VAULT: %q", out)
	}
}

func TestKeysErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	mustKeys(t, "create", "--vault", dir, "orders")
	tests := []struct {
		name    string
		args    []string
		usage   bool   // want errUsage
		message string // in the error, or in stderr for usage errors
	}{
		{"create twice", []string{"create", "--vault", dir, "orders"}, false, `"orders" already exists`},
		{"create twice: the hint names the vault", []string{"create", "--vault", dir, "orders"}, false, "'" + selfCommand() + " keys rotate --vault " + dir + " orders'"},
		{"rotate missing", []string{"rotate", "--vault", dir, "nope"}, false, "'" + selfCommand() + " keys create --vault " + dir + " nope'"},
		{"invalid name", []string{"create", "--vault", dir, "a/b"}, false, `invalid key name "a/b"`},
		{"list missing vault", []string{"list", "--vault", dir + "-none"}, false, "does not exist"},
		{"no name", []string{"create", "--vault", dir}, true, "missing the key name"},
		{"two names", []string{"rotate", "--vault", dir, "orders", "payments"}, true, "unexpected arguments"},
		{"unknown flag", []string{"list", "--secret"}, true, "flag provided but not defined"},
		{"unknown command", []string{"delete", "orders"}, true, `unknown command "delete"`},
		{"no command", nil, true, "Usage: strait keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := keys(t, tt.args...)
			if tt.usage {
				if !errors.Is(err, errUsage) || !strings.Contains(stderr, tt.message) {
					t.Errorf("err = %v, stderr = %q; want a usage error saying %q", err, stderr, tt.message)
				}
				return
			}
			if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %v, want one saying %q", err, tt.message)
			}
		})
	}
	if stdout, stderr, err := keys(t, "rotate", "-h"); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout, "Usage: strait keys rotate") || stderr != "" {
		t.Errorf("rotate -h: err = %v, stdout = %q, stderr = %q; want the help on stdout", err, stdout, stderr)
	}

	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := keys(t, "list", "--vault", dir)
	if err == nil || !strings.Contains(err.Error(), "mode 0755") || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Errorf("list of a group-readable vault: err = %v, want the mode and the fix", err)
	}
}

func TestKeysListEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := mustKeys(t, "list", "--vault", dir)
	if stdout != "" || !strings.Contains(stderr, "no key-encryption keys in "+dir+"; create one with '"+selfCommand()+" keys create --vault "+dir+" NAME'") {
		t.Errorf("list of an empty vault: stdout %q, stderr %q", stdout, stderr)
	}
	if out, _ := mustKeys(t, "list", "--json", "--vault", dir); strings.TrimSpace(out) != "[]" {
		t.Errorf("list --json of an empty vault = %q, want []", out)
	}
}
