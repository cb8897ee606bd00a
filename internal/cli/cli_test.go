package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/cli"
)

// run calls cli.Run in process and returns the exit code and both outputs.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := run(t, "version")
	if code != 0 {
		t.Fatalf("strait version: exit %d, want 0; stderr:\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "strait ") {
		t.Errorf("strait version printed %q, want it to start with %q", stdout, "strait ")
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want []string // substrings of stderr
	}{
		{[]string{"frobnicate"}, 2, []string{`unknown command "frobnicate"`, "Usage: strait <command>", "demo", "run", "validate", "broker", "version"}},
		{nil, 2, []string{"Usage: strait <command>"}},
		{[]string{"-h"}, 0, []string{"Usage: strait <command>"}},
		{[]string{"help"}, 0, []string{"Usage: strait <command>"}},
		{[]string{"run"}, 2, []string{"-c FILE is required"}},
		{[]string{"validate"}, 2, []string{"-c FILE is required"}},
		{[]string{"run", "-no-such-flag"}, 2, []string{"no-such-flag"}},
		{[]string{"version", "extra"}, 2, []string{"unexpected arguments"}},
		{[]string{"broker", "-h"}, 0, []string{"-data-dir", "-listen"}},
		{[]string{"demo", "-h"}, 0, []string{"-broker-listen", "-admin"}},
		{[]string{"run", "-h"}, 0, []string{"config file"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"strait"}, tt.args...), " "), func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// badConfig has one problem of each kind on its own line; each problem's
// line is found by the marker comment on it.
const badConfig = `admin:
  listen: 127.0.0.1:9190
  lisen: 127.0.0.1:9191          # MARK:unknown-key
clusters:
  local:
    bootstrap_servers: [127.0.0.1:9092]
virtual_clusters:
  - name: one
    cluster: nowhere               # MARK:undefined-cluster
    listen: 127.0.0.1:99999        # MARK:bad-port
    filters:
      - type: no-such-filter       # MARK:unknown-filter
`

// lineOf returns the 1-based line of text that contains marker.
func lineOf(t *testing.T, text, marker string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("marker %q not found", marker)
	return 0
}

func TestValidateReportsEveryError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(badConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		marker, path, msg string
	}{
		{"MARK:unknown-key", "admin.lisen", "unknown key"},
		{"MARK:undefined-cluster", "virtual_clusters[0].cluster", "not defined under clusters"},
		{"MARK:bad-port", "virtual_clusters[0].listen", "port"},
		{"MARK:unknown-filter", "virtual_clusters[0].filters[0].type", "unknown filter type"},
	}
	// run must refuse the config with the same report as validate.
	for _, cmd := range []string{"validate", "run"} {
		t.Run(cmd, func(t *testing.T) {
			code, stdout, stderr := run(t, cmd, "-c", path)
			if code != 1 {
				t.Fatalf("strait %s: exit %d, want 1; stdout:\n%s\nstderr:\n%s", cmd, code, stdout, stderr)
			}
			lines := strings.Split(stderr, "\n")
			last := -1
			for _, w := range want {
				prefix := fmt.Sprintf("%s:%d: %s: ", path, lineOf(t, badConfig, w.marker), w.path)
				found := -1
				for i, l := range lines {
					if strings.HasPrefix(l, prefix) && strings.Contains(l, w.msg) {
						found = i
						break
					}
				}
				if found < 0 {
					t.Errorf("no line %q...%q in stderr:\n%s", prefix, w.msg, stderr)
					continue
				}
				if found < last {
					t.Errorf("%s is reported out of file order:\n%s", w.path, stderr)
				}
				last = found
			}
		})
	}
}

func TestValidateMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	code, _, stderr := run(t, "validate", "-c", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("stderr does not name the file:\n%s", stderr)
	}
}

func TestValidateExample(t *testing.T) {
	const path = "../../examples/passthrough.yaml"
	code, stdout, stderr := run(t, "validate", "-c", path)
	if code != 0 {
		t.Fatalf("strait validate -c %s: exit %d, want 0; stderr:\n%s", path, code, stderr)
	}
	if !strings.Contains(stdout, "is valid") {
		t.Errorf("stdout %q does not say the config is valid", stdout)
	}
}

// Every example has an admin port of its own, so that the README's Kafka and
// LLM gateways (and any two examples) can run side by side.
func TestExamplesHaveTheirOwnAdminPorts(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(paths) < 2 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	seen := map[string]string{}
	for _, p := range paths {
		var cfg struct {
			Admin struct {
				Listen string `yaml:"listen"`
			} `yaml:"admin"`
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if cfg.Admin.Listen == "" {
			continue
		}
		if other, ok := seen[cfg.Admin.Listen]; ok {
			t.Errorf("%s and %s both put the admin listener on %s", other, filepath.Base(p), cfg.Admin.Listen)
		}
		seen[cfg.Admin.Listen] = filepath.Base(p)
	}
	if seen["127.0.0.1:9190"] != "passthrough.yaml" {
		t.Errorf("passthrough.yaml's admin listener is not on 127.0.0.1:9190, where the README says: %v", seen)
	}
}
