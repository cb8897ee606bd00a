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
	Errors      int64
	Workload    struct {
		Payload  string
		SchemaID int `json:"schema_id"`
	}
	Publish   struct{ P50, P99 float64 } `json:"publish_latency_ms"`
	E2E       struct{ P50, P99 float64 } `json:"e2e_latency_ms"`
	Processes []struct {
		Name                string
		MsCPUPerMBps        float64 `json:"ms_cpu_per_mbps"`
		CPUSeconds          float64 `json:"cpu_seconds"`
		CPUMicrosPerRequest float64 `json:"cpu_us_per_request"`
		CPUMicrosPerProduce float64 `json:"cpu_us_per_produce"`
	}
	GatewayRequests *struct {
		ByAPI map[string]int64 `json:"by_api"`
	} `json:"gateway_requests"`
	RequestsCountedBy string `json:"requests_counted_by"`
	Steps             []struct {
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
		if len(r.Processes) != 1 || r.Processes[0].CPUSeconds <= 0 || r.Processes[0].CPUMicrosPerRequest <= 0 || r.RequestsCountedBy != "client" {
			t.Errorf("run %s: watched processes %+v, requests counted by %q; want the broker's CPU time and CPU per request by the clients' count", name, r.Processes, r.RequestsCountedBy)
		}
		if !strings.Contains(stdout, "p99") {
			t.Errorf("run %s: the end-of-run table has no p99:\n%s", name, stdout)
		}
	}
	page := filepath.Join(dir, "compare.html")
	stdout, stderr, code := runStrait(t, time.Minute, "bench", "compare", filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), "--report", page)
	if code != 0 || !strings.Contains(stdout, "| a ") && !strings.Contains(stdout, "a |") {
		t.Errorf("bench compare: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("bench compare --report after the files: %v", err)
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
		{[]string{"--gateway-metrics", "127.0.0.1:9190/metrics"}, "--gateway-metrics", 1},
		{[]string{"--per-api"}, "--watch-pid", 1},
	} {
		_, stderr, code := runStrait(t, time.Minute, append([]string{"bench", "kafka", "--duration", "1s"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("bench kafka %v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// onlyStalled reports whether every problem of a run is a rate that fell
// behind, which a stalled shared machine causes.
func onlyStalled(problems []string) bool {
	for _, p := range problems {
		if !strings.Contains(p, "did not keep up") {
			return false
		}
	}
	return true
}

// TestBenchLayers runs the layer table, plaintext and with SASL over TLS:
// the broker and one gateway per setup as subprocesses. The plaintext run
// adds a setup that sends Avro reference records instead of the run's
// random values, through record validation, which refuses any record that
// is not Avro with schema id 1. (One setup more costs about 3 s; the
// choice of each share's baseline has its own tests.) The SASL run splits
// the gateway's CPU per request by API (--per-api: one produce-only run
// more). Every gateway's requests are counted from its admin /metrics.
func TestBenchLayers(t *testing.T) {
	needBinary(t)
	avroLayer := []string{"--layer", "validation-avro=bench/layers/validation-avro.yaml,payload=avro,schema-id=1"}
	for _, security := range []string{"plaintext", "sasl_ssl"} {
		t.Run(security, func(t *testing.T) {
			bport := testkit.PortBlock(t, 1)
			gport := testkit.PortBlock(t, 1003) // admin, bootstrap, 1000 node ports
			out := t.TempDir()
			args := []string{"bench", "layers", "--strait", straitBin,
				"--security", security, "--broker-port", strconv.Itoa(bport), "--gateway-port", strconv.Itoa(gport + 1),
				"--rate", "300", "--warmup", "500ms", "--duration", "2s", "--quiet", "--out-dir", out}
			if security == "plaintext" {
				args = append(args, avroLayer...)
			} else {
				args = append(args, "--per-api")
			}
			stdout, stderr, code := runStrait(t, 3*time.Minute, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			// A run the harness finds invalid only because the machine
			// stalled (consumers behind for a moment of a 2 s window on a
			// shared machine) says nothing of the harness: run it once
			// more. Any other problem fails at once.
			if d, p := readBenchJSON(t, filepath.Join(out, "direct.json")), readBenchJSON(t, filepath.Join(out, "passthrough.json")); onlyStalled(d.Problems) && onlyStalled(p.Problems) && (!d.Valid || !p.Valid) {
				t.Logf("the machine stalled the run (%v, %v); running it again", d.Problems, p.Problems)
				if stdout, stderr, code = runStrait(t, 3*time.Minute, args...); code != 0 {
					t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
				}
			}
			if security == "plaintext" {
				checkAvroLayer(t, stdout, out)
			} else if strings.Contains(stdout, "payload") {
				t.Errorf("a table of one payload shows it:\n%s", stdout)
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
				if p.Name == "gateway" && p.CPUSeconds > 0 && p.MsCPUPerMBps > 0 && p.CPUMicrosPerRequest > 0 &&
					(security == "plaintext" || p.CPUMicrosPerProduce > 0) {
					gw = true
				}
			}
			if !gw {
				t.Errorf("passthrough run lacks the gateway's CPU figures: %+v", pass.Processes)
			}
			// The run read the gateway's own request counters.
			if g := pass.GatewayRequests; pass.RequestsCountedBy != "gateway" || g == nil || g.ByAPI["Produce"] <= 0 || g.ByAPI["Fetch"] <= 0 {
				t.Errorf("passthrough requests counted by %q: %+v", pass.RequestsCountedBy, g)
			}
			want := []string{"| gateway CPU per request (µs) | – |"}
			if security != "plaintext" {
				want = append(want, "| gateway CPU per Produce (µs) | – |")
			}
			for _, w := range want {
				if !strings.Contains(stdout, w) {
					t.Errorf("layer table lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// checkAvroLayer checks the table and result of the layer that sent Avro
// records in a run of random values.
func checkAvroLayer(t *testing.T, table, out string) {
	t.Helper()
	for _, want := range []string{
		"| setup | payload | p50 | p95 | p99 | p99.9 |",
		"| passthrough | random |",
		"| validation-avro | avro, schema id 1 |",
		"| validation-avro over passthrough (payload differs) |",
		"| payload | random | random | avro, schema id 1 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("layer table lacks %q:\n%s", want, table)
		}
	}
	// Validation refuses a random value: a valid run without errors
	// sent Avro with the prefix.
	v := readBenchJSON(t, filepath.Join(out, "validation-avro.json"))
	if !v.Valid || v.Errors != 0 || v.Published == 0 || v.Workload.Payload != "avro" || v.Workload.SchemaID != 1 {
		t.Errorf("validation-avro: valid %v %v, %d errors, %d published, workload %+v", v.Valid, v.Problems, v.Errors, v.Published, v.Workload)
	}
	if p := readBenchJSON(t, filepath.Join(out, "passthrough.json")); p.Workload.Payload != "random" {
		t.Errorf("passthrough sent %q, want the run's random payload", p.Workload.Payload)
	}
}

// TestBenchLLM runs `strait bench llm` against `strait mock llm`, then the
// side-by-side `strait bench llm-layers` (its own mock and gateway) for
// one translated pair, streamed.
func TestBenchLLM(t *testing.T) {
	needBinary(t)
	mockPort := testkit.PortBlock(t, 1)
	mock := startStrait(t, "mock", "llm", "--listen", testkit.Addr(mockPort), "--latency", "100ms")
	mock.waitListening(testkit.Addr(mockPort))
	dir := t.TempDir()
	out := filepath.Join(dir, "llm.json")
	stdout, stderr, code := runStrait(t, time.Minute, "bench", "llm", "--url", "http://"+testkit.Addr(mockPort),
		"--dialect", "anthropic", "--model", "claude-x", "--stream", "--h2c", "--conns", "2", "--rate", "50",
		"--warmup", "500ms", "--duration", "2s", "--quiet", "--json", out, "--watch-pid", strconv.Itoa(mock.cmd.Process.Pid))
	if code != 0 {
		t.Fatalf("bench llm: exit %d\n%s%s", code, stdout, stderr)
	}
	var r struct {
		Kind          string
		Valid         bool
		Due, Sent, OK int64
		Latency       struct{ P50 float64 }  `json:"latency_ms"`
		FirstEvent    *struct{ P50 float64 } `json:"first_event_ms"`
		Processes     []struct {
			CPUSeconds float64 `json:"cpu_seconds"`
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Kind != "llm" || !r.Valid || r.Due != 100 || r.OK != 100 || r.Latency.P50 < 100 || r.FirstEvent == nil || r.FirstEvent.P50 >= r.Latency.P50 || len(r.Processes) != 1 {
		t.Errorf("bench llm result: %s", b)
	}

	ports := testkit.PortBlock(t, 3) // mock, gateway, its admin
	stdout, stderr, code = runStrait(t, 2*time.Minute, "bench", "llm-layers", "--strait", straitBin,
		"--mock-port", strconv.Itoa(ports), "--gateway-port", strconv.Itoa(ports+1), "--pairs", "openai>anthropic",
		"--modes", "stream", "--rate", "30", "--latency", "100ms", "--warmup", "500ms", "--duration", "2s", "--quiet",
		"--http1-server", "strait")
	if code != 0 {
		t.Fatalf("bench llm-layers: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "| stream | openai→anthropic | 100.0% |") || strings.Contains(stdout, "does not count") {
		t.Errorf("llm-layers table:\n%s", stdout)
	}

	// The same over h2c, the gateway's listener served by Strait's own
	// HTTP/2 server.
	stdout, stderr, code = runStrait(t, 2*time.Minute, "bench", "llm-layers", "--strait", straitBin,
		"--mock-port", strconv.Itoa(ports), "--gateway-port", strconv.Itoa(ports+1), "--pairs", "anthropic>openai",
		"--modes", "json,stream", "--rate", "30", "--latency", "100ms", "--warmup", "500ms", "--duration", "2s", "--quiet",
		"--h2c", "--conns", "2", "--http2-server", "strait", "--gateway-env", "GOGC=off", "--gateway-env", "GOMEMLIMIT=1GiB")
	if code != 0 {
		t.Fatalf("bench llm-layers --http2-server strait: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, mode := range []string{"json", "stream"} {
		if !strings.Contains(stdout, "| "+mode+" | anthropic→openai | 100.0% |") {
			t.Errorf("llm-layers table with --http2-server strait, %s:\n%s", mode, stdout)
		}
	}
	_, stderr, code = runStrait(t, time.Minute, "bench", "llm-layers", "--gateway-env", "GOGC")
	if code == 0 || !strings.Contains(stderr, "--gateway-env") {
		t.Errorf("--gateway-env GOGC: exit %d, stderr %q; want a refusal naming the flag", code, stderr)
	}
	_, stderr, code = runStrait(t, time.Minute, "bench", "llm-layers", "--http1-server", "x/net")
	if code == 0 || !strings.Contains(stderr, "--http1-server") {
		t.Errorf("--http1-server x/net: exit %d, stderr %q; want a refusal naming the flag", code, stderr)
	}
	_, stderr, code = runStrait(t, time.Minute, "bench", "llm-layers", "--http2-server", "x/net")
	if code == 0 || !strings.Contains(stderr, "--http2-server") {
		t.Errorf("--http2-server x/net: exit %d, stderr %q; want a refusal naming the flag", code, stderr)
	}
}
