package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/kms/vault"
)

// secretVolume lays files out in dir as the kubelet lays out a Secret
// volume: a timestamped directory holding the files (mode 0440: readable by
// the pod's fsGroup), a ..data link to it, and a link per file through
// ..data; the volume's root is a world-writable tmpfs directory.
func secretVolume(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	ts := filepath.Join(dir, "..2026_01_02_03_04_05.000000001")
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ts, name), data, 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(ts, name), 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerOnlyCopy runs the chart's init container script on Secret
// volumes laid out as the kubelet lays them out, holding a credential store
// and a vault: as mounted, Strait refuses both (group or others may read
// them); at the paths the strait container sees after the copy, it opens
// both.
func TestOwnerOnlyCopy(t *testing.T) {
	r := mustRender(t, "testdata/tls-sasl.yaml")
	d, err := r.one("Deployment")
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	var initMounts []obj
	for _, ic := range list(dig(d, "spec", "template", "spec", "initContainers")) {
		if ic["name"] == "owner-only-files" {
			for _, a := range ic["command"].([]any) {
				cmd = append(cmd, a.(string))
			}
			initMounts = list(ic["volumeMounts"])
		}
	}
	if len(cmd) < 4 || cmd[0] != "/bin/sh" || cmd[1] != "-c" {
		t.Fatalf("init container command %q, want /bin/sh -c SCRIPT NAME SRC DST...", cmd)
	}
	secretOf := map[string]string{} // volume name -> Secret name
	for _, v := range list(dig(d, "spec", "template", "spec", "volumes")) {
		if s, ok := dig(v, "secret", "secretName").(string); ok {
			secretOf[v["name"].(string)] = s
		}
	}

	// The Secrets' content: a credential store with one user, a vault with
	// one KEK, made by the code strait users and strait keys run.
	scratch := t.TempDir()
	store := filepath.Join(scratch, "users.store")
	if _, err := credstore.AddUser(store, "alice", "alice-secret-password", 0); err != nil {
		t.Fatal(err)
	}
	vaultDir := filepath.Join(scratch, "vault")
	if _, err := vault.CreateKey(vaultDir, "demo-kek"); err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	content := map[string]map[string][]byte{
		"strait-users": {"users.store": read(store)},
		"strait-vault": {"demo-kek.json": read(filepath.Join(vaultDir, "demo-kek.json"))},
	}

	root := t.TempDir() // stands for the init container's filesystem
	for _, m := range initMounts {
		mp := filepath.Join(root, m["mountPath"].(string))
		if secret, ok := secretOf[m["name"].(string)]; ok {
			files := content[secret]
			if files == nil {
				t.Fatalf("the init container copies Secret %s, which holds neither the vault nor the credential store", secret)
			}
			if err := os.MkdirAll(mp, 0o755); err != nil {
				t.Fatal(err)
			}
			secretVolume(t, mp, files)
			continue
		}
		// The emptyDir it copies to.
		if err := os.MkdirAll(mp, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(mp, 0o777); err != nil {
			t.Fatal(err)
		}
	}

	// As Kubernetes mounts them, Strait refuses both.
	for _, m := range initMounts {
		switch secretOf[m["name"].(string)] {
		case "strait-users":
			if _, err := credstore.Open(filepath.Join(root, m["mountPath"].(string), "users.store"), credstore.Options{}); err == nil || !strings.Contains(err.Error(), "group or others") {
				t.Errorf("the credential store on the Secret volume: %v, want it refused as group-readable", err)
			}
		case "strait-vault":
			if _, err := vault.Open(filepath.Join(root, m["mountPath"].(string)), vault.Options{}); err == nil || !strings.Contains(err.Error(), "group or others") {
				t.Errorf("the vault on the Secret volume: %v, want it refused as group-readable", err)
			}
		}
	}

	args := []string{cmd[1], cmd[2], cmd[3]}
	for _, a := range cmd[4:] {
		args = append(args, filepath.Join(root, a))
	}
	if out, err := exec.Command("/bin/sh", args...).CombinedOutput(); err != nil {
		t.Fatalf("the init container's script: %v\n%s", err, out)
	}

	// The strait container's paths, through its mounts, to the files the
	// script wrote.
	onDisk := func(path string) string {
		t.Helper()
		res, err := r.resolve(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range initMounts {
			if m["name"] == res.volume["name"] {
				return filepath.Join(root, m["mountPath"].(string), res.inside)
			}
		}
		t.Fatalf("%s is on volume %v, which the init container does not write", path, res.volume["name"])
		return ""
	}
	credentials := dig(list(dig(r.config, "virtual_clusters"))[0], "sasl", "credentials").(string)
	if _, err := credstore.Open(onDisk(credentials), credstore.Options{}); err != nil {
		t.Errorf("the credential store at %s after the copy: %v", credentials, err)
	} else if users, err := credstore.ListUsers(onDisk(credentials)); err != nil || len(users) != 1 {
		t.Errorf("users %v, %v; want alice", users, err)
	}
	vaultPath := dig(list(dig(list(dig(r.config, "virtual_clusters"))[0], "filters"))[1], "config", "kms", "path").(string)
	if _, err := vault.Open(onDisk(vaultPath), vault.Options{}); err != nil {
		t.Errorf("the vault at %s after the copy: %v", vaultPath, err)
	}
	entries, err := os.ReadDir(onDisk(vaultPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "demo-kek.json" {
			t.Errorf("the copied vault holds %s: only the Secret's files belong there", e.Name())
		}
	}
}
