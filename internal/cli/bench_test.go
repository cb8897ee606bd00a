package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
)

// runStrait runs the binary to completion (bounded) and returns its
// output and exit code.
func runStrait(t *testing.T, limit time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(straitBin, args...)
	cmd.Dir = moduleRoot
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(limit, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

type benchJSON struct {
	Kind, Label string
	Valid       bool
	Problems    []string
	Published   int64
	Publish     struct{ P50, P99 float64 } `json:"publish_latency_ms"`
	E2E         struct{ P50, P99 float64 } `json:"e2e_latency_ms"`
	Processes   []struct {
		Name         string
		MsCPUPerMBps float64 `json:"ms_cpu_per_mbps"`
		CPUSeconds   float64 `json:"cpu_seconds"`
	}
	Steps []struct {
		Target    float64
		Saturated bool
	}
}

func readBenchJSON(t *testing.T, path string) benchJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r benchJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// TestBenchKafkaCompareSweep runs the three commands against `strait
// broker`: two short runs, their comparison, and a two-step sweep.
func TestBenchKafkaCompareSweep(t *testing.T) {
	needBinary(t)
	port := testkit.PortBlock(t, 1)
	broker := startStrait(t, "broker", "--brokers", "1", "--listen", testkit.Addr(port), "--partitions", "3")
	broker.waitListening(testkit.Addr(port))
	dir := t.TempDir()
	common := []string{"--bootstrap", testkit.Addr(port), "--rate", "300", "--warmup", "500ms", "--duration", "2s", "--window", "500ms", "--quiet"}
	for _, name := range []string{"a", "b"} {
		args := append([]string{"bench", "kafka", "--label", name, "--json", filepath.Join(dir, name+".json"), "--watch-pid", strconv.Itoa(broker.cmd.Process.Pid)}, common...)
		stdout, stderr, code := runStrait(t, time.Minute, args...)
		if code != 0 {
			t.Fatalf("bench kafka %s: exit %d\n%s%s", name, code, stdout, stderr)
		}
		r := readBenchJSON(t, filepath.Join(dir, name+".json"))
		if r.Kind != "kafka" || !r.Valid || r.Published < 500 || r.Publish.P99 <= 0 || r.E2E.P99 <= 0 {
			t.Errorf("run %s: %+v", name, r)
		}
		if len(r.Processes) != 1 || r.Processes[0].CPUSeconds <= 0 {
			t.Errorf("run %s: watched processes %+v, want the broker's CPU time", name, r.Processes)
		}
		if !strings.Contains(stdout, "p99") {
			t.Errorf("run %s: the end-of-run table has no p99:\n%s", name, stdout)
		}
	}
	stdout, stderr, code := runStrait(t, time.Minute, "bench", "compare", filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"))
	if code != 0 || !strings.Contains(stdout, "| a ") && !strings.Contains(stdout, "a |") {
		t.Errorf("bench compare: exit %d\n%s%s", code, stdout, stderr)
	}

	sweep := filepath.Join(dir, "sweep.json")
	args := append([]string{"bench", "sweep", "--from", "200", "--to", "400", "--step", "200", "--json", sweep}, common...)
	if stdout, stderr, code := runStrait(t, 2*time.Minute, args...); code != 0 {
		t.Fatalf("bench sweep: exit %d\n%s%s", code, stdout, stderr)
	}
	s := readBenchJSON(t, sweep)
	if s.Kind != "kafka-sweep" || len(s.Steps) != 2 || s.Steps[0].Target != 200 || s.Steps[1].Target != 400 {
		t.Errorf("sweep: %+v", s)
	}
}

func TestBenchKafkaBadInputIsOneLine(t *testing.T) {
	needBinary(t)
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--bootstrap", testkit.Addr(closedPort(t))}, "cannot reach the cluster", 1},
		{[]string{"--acks", "2"}, "--acks", 1},
		{[]string{"--config", "/nonexistent/client.properties"}, "--config", 1},
	} {
		_, stderr, code := runStrait(t, time.Minute, append([]string{"bench", "kafka", "--duration", "1s"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("bench kafka %v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// TestBenchLayers runs the layer table, plaintext and with SASL over TLS:
// the broker and one gateway per setup as subprocesses.
func TestBenchLayers(t *testing.T) {
	needBinary(t)
	for _, security := range []string{"plaintext", "sasl_ssl"} {
		t.Run(security, func(t *testing.T) {
			bport := testkit.PortBlock(t, 1)
			gport := testkit.PortBlock(t, 1003) // admin, bootstrap, 1000 node ports
			out := t.TempDir()
			stdout, stderr, code := runStrait(t, 3*time.Minute, "bench", "layers", "--strait", straitBin,
				"--security", security, "--broker-port", strconv.Itoa(bport), "--gateway-port", strconv.Itoa(gport+1),
				"--rate", "300", "--warmup", "500ms", "--duration", "2s", "--quiet", "--out-dir", out)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			for _, want := range []string{"direct", "passthrough", "p99"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("layer table lacks %q:\n%s", want, stdout)
				}
			}
			direct, pass := readBenchJSON(t, filepath.Join(out, "direct.json")), readBenchJSON(t, filepath.Join(out, "passthrough.json"))
			if !direct.Valid || !pass.Valid {
				t.Errorf("invalid runs: direct %v, passthrough %v", direct.Problems, pass.Problems)
			}
			var gw bool
			for _, p := range pass.Processes {
				if p.Name == "gateway" && p.CPUSeconds > 0 && p.MsCPUPerMBps > 0 {
					gw = true
				}
			}
			if !gw {
				t.Errorf("passthrough run lacks the gateway's CPU figures: %+v", pass.Processes)
			}
		})
	}
}
