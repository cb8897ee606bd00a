package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms/vault"
)

// needKeysCommand fails with what to do when `strait keys` is not wired into the command table.
func needKeysCommand(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, `unknown command "keys"`) {
		t.Fatal(`strait keys is not registered: add {"keys", ..., runKeys} to commands() in internal/cli/cli.go`)
	}
}

// TestKeysCommand runs `strait keys` through cli.Run: exit codes and the vault it leaves.
func TestKeysCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	code, stdout, stderr := run(t, "keys", "create", "--vault", dir, "orders")
	needKeysCommand(t, stderr)
	if code != 0 || !strings.Contains(stdout, "created key-encryption key orders, version 1") {
		t.Fatalf("keys create: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := run(t, "keys", "create", "--vault", dir, "orders"); code != 1 || !strings.Contains(stderr, "strait keys: ") ||
		!strings.Contains(stderr, "already exists") {
		t.Errorf("keys create of an existing key: exit %d, stderr %q; want exit 1 and the reason", code, stderr)
	}
	if code, _, _ := run(t, "keys", "rotate", "--vault", dir); code != 2 {
		t.Errorf("keys rotate without a name: exit %d, want 2", code)
	}
	if code, _, _ := run(t, "keys", "list", "-h"); code != 0 {
		t.Errorf("keys list -h: exit %d, want 0", code)
	}
	if code, stdout, stderr := run(t, "keys", "list", "--vault", dir); code != 0 || !strings.Contains(stdout, "orders") {
		t.Errorf("keys list: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestKeysRotateReachesRunningVault: a vault in use picks up a rotation made by the strait binary, another
// process, without being reopened.
func TestKeysRotateReachesRunningVault(t *testing.T) {
	needBinary(t)
	dir := filepath.Join(t.TempDir(), "vault")
	_, stderr, code := runStrait(t, time.Minute, "keys", "create", "--vault", dir, "orders")
	needKeysCommand(t, stderr)
	if code != 0 {
		t.Fatalf("strait keys create: exit %d: %s", code, stderr)
	}
	v, err := vault.Open(dir, vault.Options{ReloadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old, err := v.Wrap(ctx, "orders", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, used, err := v.DeriveKey(ctx, "orders", 0, nil); err != nil || used != 1 {
		t.Fatalf("before the rotation: version %d, %v; want 1", used, err)
	}

	if stdout, stderr, code := runStrait(t, time.Minute, "keys", "rotate", "--vault", dir, "orders"); code != 0 {
		t.Fatalf("strait keys rotate: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, used, err := v.DeriveKey(ctx, "orders", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if used == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running vault still uses version %d 10 s after the rotation", used)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := v.Unwrap(ctx, "orders", old); err != nil || len(got) != 32 {
		t.Errorf("a key wrapped before the rotation: %x, %v; want it to still unwrap", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orders.json")); err != nil {
		t.Error(err)
	}
}
