package cli_test

import (
	"bytes"
	"fmt"
	"net"
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

// TestUsage: help asked for goes to stdout with exit 0, so that
// `strait --help | less` shows it; usage errors go to stderr with exit 2.
func TestUsage(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout bool     // the output is on stdout (and stderr is empty), else on stderr (and stdout is empty)
		want   []string // substrings of that output
		not    []string // not in it
	}{
		{[]string{"frobnicate"}, 2, false, []string{`unknown command "frobnicate"`, "Usage: strait <command>", "demo", "run", "validate", "broker", "version"}, nil},
		{nil, 2, false, []string{"Usage: strait <command>"}, nil},
		{[]string{"-h"}, 0, true, []string{"Usage: strait <command>"}, nil},
		{[]string{"--help"}, 0, true, []string{"Kafka clusters and LLM providers", "Usage: strait <command>", "LLM load (llm, llm-layers)"}, nil},
		{[]string{"help"}, 0, true, []string{"Usage: strait <command>"}, nil},
		{[]string{"run"}, 2, false, []string{"-c FILE is required"}, nil},
		{[]string{"validate"}, 2, false, []string{"-c FILE is required"}, nil},
		{[]string{"run", "-no-such-flag"}, 2, false, []string{"no-such-flag", "Usage of strait run"}, nil},
		{[]string{"version", "extra"}, 2, false, []string{"unexpected arguments"}, nil},
		{[]string{"version", "-h"}, 0, true, []string{"Usage of strait version"}, nil},
		{[]string{"broker", "-h"}, 0, true, []string{"-data-dir", "-listen"}, nil},
		{[]string{"broker", "--help"}, 0, true, []string{"-data-dir", "-listen"}, nil},
		{[]string{"demo", "-h"}, 0, true, []string{"-broker-listen", "-admin"}, nil},
		{[]string{"run", "-h"}, 0, true, []string{"config file"}, nil},
		{[]string{"bench"}, 2, false, []string{"Usage: strait bench <command>"}, nil},
		{[]string{"bench", "-h"}, 0, true, []string{"Usage: strait bench <command>", "llm-layers"}, nil},
		{[]string{"bench", "nope"}, 2, false, []string{`unknown command "nope"`}, nil},
		{[]string{"bench", "layers", "-h"}, 0, true, []string{"-bootstrap", "(set by the run)", "(default 5000)", "NAME=CONFIG.yaml[,payload=KIND][,schema-id=N]"}, []string{`(default "(`}},
		{[]string{"bench", "llm-layers", "-h"}, 0, true, []string{"-url", "(set by the run)"}, []string{`(default "(`}},
		{[]string{"bench", "compare", "-h"}, 0, true, []string{"-report"}, nil},
		{[]string{"keys"}, 2, false, []string{"Usage: strait keys <command>"}, nil},
		{[]string{"keys", "--help"}, 0, true, []string{"Usage: strait keys <command>", "rotate"}, nil},
		{[]string{"keys", "create", "-h"}, 0, true, []string{"Usage: strait keys create", "-vault"}, nil},
		{[]string{"keys", "create"}, 2, false, []string{"missing the key name", "Usage: strait keys create"}, nil},
		{[]string{"mock"}, 2, false, []string{"Usage: strait mock llm"}, nil},
		{[]string{"mock", "-h"}, 0, true, []string{"Usage: strait mock llm"}, nil},
		{[]string{"mock", "nope"}, 2, false, []string{`unknown mock "nope"`, "Usage: strait mock llm"}, nil},
		{[]string{"mock", "llm", "-h"}, 0, true, []string{"-listen"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"strait"}, tt.args...), " "), func(t *testing.T) {
			code, stdout, stderr := run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			out, other, where := stderr, stdout, "stderr"
			if tt.stdout {
				out, other, where = stdout, stderr, "stdout"
			}
			if other != "" {
				t.Errorf("want output on %s only; the other stream has:\n%s", where, other)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s does not contain %q:\n%s", where, w, out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out, w) {
					t.Errorf("%s contains %q:\n%s", where, w, out)
				}
			}
		})
	}
}

// The command lists align every description, however long the names.
func TestUsageAligned(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"bench", "--help"}, {"keys", "--help"}} {
		_, stdout, _ := run(t, args...)
		col := -1
		inList := false
		for _, l := range strings.Split(stdout, "\n") {
			if l == "Commands:" {
				inList = true
				continue
			}
			if !inList || !strings.HasPrefix(l, "  ") {
				inList = inList && l != ""
				continue
			}
			name := strings.Fields(l)[0]
			c := strings.Index(l, name) + len(name)
			c += len(l[c:]) - len(strings.TrimLeft(l[c:], " "))
			if col < 0 {
				col = c
			} else if c != col {
				t.Errorf("strait %s: %q starts its description at column %d, the first row at %d:\n%s", strings.Join(args, " "), name, c, col, stdout)
			}
		}
		if col < 0 {
			t.Errorf("strait %s lists no commands:\n%s", strings.Join(args, " "), stdout)
		}
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

// Examples that can run side by side (they share no listen address) have
// admin ports of their own, so the README's Kafka and LLM gateways run
// together; the Kafka examples keep the admin port their issues promised
// (127.0.0.1:9190), since scripts drive them there.
func TestExamplesAdminPorts(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(paths) < 2 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	type example struct {
		name, admin string
		listens     map[string]bool
	}
	var all []example
	for _, p := range paths {
		var cfg struct {
			Admin struct {
				Listen string `yaml:"listen"`
			} `yaml:"admin"`
			VirtualClusters []struct {
				Listen string `yaml:"listen"`
			} `yaml:"virtual_clusters"`
			LLM struct {
				Listeners []struct {
					Listen string `yaml:"listen"`
				} `yaml:"listeners"`
			} `yaml:"llm"`
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		e := example{name: filepath.Base(p), admin: cfg.Admin.Listen, listens: map[string]bool{}}
		for _, vc := range cfg.VirtualClusters {
			_, port, _ := net.SplitHostPort(vc.Listen)
			e.listens[port] = true // 0.0.0.0:19092 and 127.0.0.1:19092 clash too
		}
		for _, l := range cfg.LLM.Listeners {
			_, port, _ := net.SplitHostPort(l.Listen)
			e.listens[port] = true
		}
		all = append(all, e)
	}
	byName := map[string]example{}
	for i, a := range all {
		byName[a.name] = a
		for _, b := range all[i+1:] {
			clash := false
			for l := range a.listens {
				clash = clash || b.listens[l]
			}
			if !clash && a.admin != "" && a.admin == b.admin {
				t.Errorf("%s and %s could run side by side but both put the admin listener on %s", a.name, b.name, a.admin)
			}
		}
	}
	for _, name := range []string{"passthrough.yaml", "encryption.yaml", "validation.yaml"} {
		if got := byName[name].admin; got != "127.0.0.1:9190" {
			t.Errorf("%s: admin on %q, want 127.0.0.1:9190 as its issue and the README say", name, got)
		}
	}
	if byName["llm.yaml"].admin == byName["passthrough.yaml"].admin {
		t.Errorf("llm.yaml shares passthrough.yaml's admin port; the README runs them together")
	}
}
