package deploy_test

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/kms/vault"
	"github.com/straitgw/strait/internal/testkit"
)

// TestValuesConfigsAreValid runs `strait validate` on the config each
// values file gives the chart (merged with the chart's defaults), with the
// files it names made under a scratch root: the chart is tested with
// configs Strait accepts, not with shapes it would refuse.
func TestValuesConfigsAreValid(t *testing.T) {
	chartValues := readYAML(t, filepath.Join(chartDir, "values.yaml"))
	for _, vf := range valuesFiles {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			cfg, _ := merge(chartValues, readYAML(t, vf))["config"].(obj)
			root := t.TempDir()
			ca := testkit.NewCA(t)
			for path, ownerOnly := range configFiles(cfg) {
				makeFixture(t, ca, filepath.Join(root, path), ownerOnly)
			}
			data, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(data), "/etc/strait/", root+"/etc/strait/")
			file := filepath.Join(root, "strait.yaml")
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "validate", "-c", file)
			cmd.Env = append(os.Environ(), runStraitEnv+"=1", "OPENAI_API_KEY=sk-test")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("strait validate: %v\n%s\n%s", err, out, text)
			}
		})
	}
}

// makeFixture makes the file the config names at path, by its name: a
// certificate or key, a CA bundle, the credential store, a vault, a schema,
// or a secret's text.
func makeFixture(t *testing.T, ca *testkit.CA, path string, ownerOnly bool) {
	t.Helper()
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case ownerOnly && strings.HasSuffix(base, ".store"):
		if _, err := credstore.AddUser(path, "alice", "alice-secret-password", 0); err != nil {
			t.Fatal(err)
		}
	case ownerOnly:
		if _, err := vault.CreateKey(path, "demo-kek"); err != nil {
			t.Fatal(err)
		}
	case base == "ca.crt":
		write(ca.PEM)
	case strings.HasSuffix(base, ".crt") || strings.HasSuffix(base, ".key"):
		stem := strings.TrimSuffix(strings.TrimSuffix(base, ".crt"), ".key")
		if _, err := os.Stat(filepath.Join(dir, stem+".crt")); err == nil {
			return // written with its pair
		}
		cert := ca.Issue(t, "strait", x509.ExtKeyUsageServerAuth)
		testkit.WritePEM(t, dir, stem, cert)
	case strings.HasSuffix(base, ".avsc"):
		write([]byte(`{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}`))
	default:
		write([]byte("secret-" + base + "\n"))
	}
}
