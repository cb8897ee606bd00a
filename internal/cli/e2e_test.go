package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
)

// drainWait bounds how long `strait run` and `strait demo` may take to stop
// after a signal: the default drain timeout (30s) and some slack.
const drainWait = 40 * time.Second

// The fixed addresses of `strait broker` (defaults) and
// examples/passthrough.yaml, as the README uses them.
var (
	brokerAddrs   = []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"}
	gatewayAddr   = "127.0.0.1:19092"
	nodeAddrs     = []string{"127.0.0.1:19093", "127.0.0.1:19094", "127.0.0.1:19095"}
	adminAddr     = "127.0.0.1:9190"
	fixedPortWait = 10 * time.Second
)

// needFixedPorts waits a little for addrs to be free, then skips the test
// (or fails it when STRAIT_REQUIRE_INTEROP=1) if some still are not.
func needFixedPorts(t *testing.T, addrs ...string) {
	t.Helper()
	deadline := time.Now().Add(fixedPortWait)
	for {
		var busy []string
		for _, a := range addrs {
			if !canListen(a) {
				busy = append(busy, a)
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("this test needs the fixed ports of `strait broker` and examples/passthrough.yaml, but %v are in use (another broker or gateway running?)", busy)
			if requireInterop() {
				t.Fatal(msg + "; STRAIT_REQUIRE_INTEROP=1 forbids skipping")
			}
			t.Skip(msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metricSum adds up the samples of metric whose labels include every one
// of labels (each written name="value"), and reports whether any matched.
func metricSum(exposition, metric string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		lbls := line[len(metric)+1 : end]
		ok := true
		for _, l := range labels {
			ok = ok && slices.Contains(strings.Split(lbls, ","), l)
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line[end+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// TestPassthroughExample follows the README: `strait broker`, then
// `strait run -c examples/passthrough.yaml`, then kcat against the gateway.
func TestPassthroughExample(t *testing.T) {
	needKcat(t)
	needFixedPorts(t, slices.Concat(brokerAddrs, []string{gatewayAddr, adminAddr}, nodeAddrs)...)

	broker := startStrait(t, "broker")
	broker.waitListening(brokerAddrs...)
	gw := startStrait(t, "run", "-c", "examples/passthrough.yaml")
	gw.waitListening(gatewayAddr, adminAddr)

	// Clients see only the gateway's addresses.
	md := mustKcat(t, "", "-b", gatewayAddr, "-L", "-m", "10")
	brokers := kcatBrokers(t, md)
	if len(brokers) != len(brokerAddrs) {
		t.Errorf("kcat -L lists %d brokers, want %d:\n%s", len(brokers), len(brokerAddrs), md)
	}
	for id, a := range brokers {
		if id < 0 || id >= len(nodeAddrs) || a != nodeAddrs[id] {
			t.Errorf("kcat -L lists broker %d at %s, want it at 127.0.0.1:%d:\n%s", id, a, 19093+id, md)
		}
	}
	if strings.Contains(md, "127.0.0.1:909") {
		t.Errorf("kcat -L through the gateway shows a real broker address (127.0.0.1:909x):\n%s", md)
	}

	// Keyed records go through and come back intact.
	topic := fmt.Sprintf("passthrough-e2e-%d", time.Now().UnixNano())
	input, want := keyedRecords(topic, 20)
	mustKcat(t, input, "-b", gatewayAddr, "-t", topic, "-P", "-K:")
	if got := consumeAll(t, gatewayAddr, topic); !slices.Equal(got, want) {
		t.Errorf("consumed through the gateway:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Admin endpoints.
	code, body, err := httpGet("http://" + adminAddr + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	if n, ok := metricSum(body, "strait_kafka_requests_total", `api="Produce"`, `virtual_cluster="passthrough"`); !ok || n <= 0 {
		t.Errorf("strait_kafka_requests_total{api=\"Produce\",virtual_cluster=\"passthrough\"} = %v (present: %v), want > 0", n, ok)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := httpGet("http://" + adminAddr + path); err != nil || code != 200 {
			t.Errorf("GET %s: %d %q %v, want 200", path, code, body, err)
		}
	}

	// SIGTERM drains and exits 0 within the example's drain_timeout (30s);
	// the admin listener goes away with it.
	gw.signalAndWait(syscall.SIGTERM, 30*time.Second)
	if !strings.Contains(gw.stderr.String(), "draining") {
		t.Errorf("strait run did not log that it is draining:\n%s", gw.stderr)
	}
	if code, _, err := httpGet("http://" + adminAddr + "/readyz"); err == nil {
		t.Errorf("GET /readyz after strait run exited: %d, want the connection to fail", code)
	}
}

// TestDemo runs `strait demo` on ports of its own.
func TestDemo(t *testing.T) {
	needKcat(t)
	t.Parallel()
	var listen, saslPort, brokerPort, adminPort, llmPort int
	demo := startOnFreePorts(t, func() (*proc, error) {
		listen = testkit.PortBlock(t, 4) // bootstrap and three node ports
		nodeRange := testkit.Range{Lo: listen + 1, Hi: listen + 1000}
		// The SASL listener's node ports must not overlap the first's.
		saslPort = testkit.PortBlock(t, 4, testkit.Range{Lo: listen - 1000, Hi: listen + 1000})
		saslRange := testkit.Range{Lo: saslPort + 1, Hi: saslPort + 1000}
		brokerPort = testkit.PortBlock(t, 3, nodeRange, saslRange)
		adminPort = testkit.PortBlock(t, 1, nodeRange, saslRange)
		llmPort = testkit.PortBlock(t, 3, nodeRange, saslRange) // the LLM gateway, its mock provider and the schema registry
		p := startStrait(t, "demo", "--listen", addr(listen), "--sasl-listen", addr(saslPort), "--broker-listen", addr(brokerPort), "--admin", addr(adminPort),
			"--llm-listen", addr(llmPort), "--mock-listen", addr(llmPort+1), "--registry-listen", addr(llmPort+2))
		// The self-check may take up to 15s.
		return p, p.printed(p.stdout, "Press Ctrl-C to stop.", 30*time.Second)
	})

	out := demo.stdout.String()
	for _, want := range []string{
		"Self-check: produced 3 records",
		"LLM self-check: an OpenAI-dialect request for claude-sonnet-4-5 was translated",
		"Encryption self-check: a record produced to \"secure-demo\" reads back as plaintext",
		"Validation self-check: a JSON record to \"events-demo\" went through; a broken one was refused with INVALID_RECORD.",
		"SASL self-check: user demo authenticated with SCRAM-SHA-512 and produced to \"demo-sasl\"",
		"schema registry:     http://" + addr(llmPort+2),
		"curl -s http://" + addr(llmPort) + "/v1/chat/completions",
		"kcat -b " + addr(listen) + " -L",
		"kcat -b " + addr(listen) + " -t demo -P -K:",
		"kcat -b " + addr(listen) + " -t demo -C -e",
		"http://" + addr(adminPort) + "/metrics",
		// The command as it was started, not a strait the PATH may lack.
		"  " + straitBin + " validate -c ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("strait demo did not print %q:\n%s", want, out)
		}
	}

	md := mustKcat(t, "", "-b", addr(listen), "-L", "-m", "10")
	brokers := kcatBrokers(t, md)
	if len(brokers) != 3 {
		t.Errorf("kcat -L lists %d brokers, want 3:\n%s", len(brokers), md)
	}
	for id, a := range brokers {
		if want := addr(listen + 1 + id); a != want {
			t.Errorf("kcat -L lists broker %d at %s, want the gateway's %s:\n%s", id, a, want, md)
		}
	}
	for i := range 3 {
		if strings.Contains(md, addr(brokerPort+i)+" ") || strings.Contains(md, addr(brokerPort+i)+"\n") {
			t.Errorf("kcat -L through the demo gateway shows the development broker's address %s:\n%s", addr(brokerPort+i), md)
		}
	}

	demo.signalAndWait(syscall.SIGINT, drainWait)
}

// TestRunUnreachableCluster: the gateway starts although its cluster is
// down, and clients fail cleanly instead of hanging.
func TestRunUnreachableCluster(t *testing.T) {
	needKcat(t)
	t.Parallel()
	target := closedPort(t)
	cfgPath := filepath.Join(t.TempDir(), "unreachable.yaml")
	var listen int
	gw := startOnFreePorts(t, func() (*proc, error) {
		listen = testkit.PortBlock(t, 1)
		cfg := fmt.Sprintf(`log:
  level: info
clusters:
  down:
    bootstrap_servers: ["%s"]
    connect_timeout: 2s
virtual_clusters:
  - name: unreachable
    cluster: down
    listen: "%s"
`, addr(target), addr(listen))
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startStrait(t, "run", "-c", cfgPath)
		return p, p.listening(addr(listen))
	})
	gw.waitOutput(gw.stderr, "could not learn the cluster's brokers", readyTimeout)
	if !strings.Contains(gw.stderr.String(), "level=WARN") {
		t.Errorf("strait run did not log a warning about the unreachable cluster:\n%s", gw.stderr)
	}

	// kcat gives up after its own metadata timeout; kcat() fails the test
	// if it hangs past kcatTimeout.
	r := kcat(t, "", "-b", addr(listen), "-L", "-m", "5")
	if r.err == nil {
		t.Errorf("kcat -L against a gateway whose cluster is down succeeded:\n%s", r.stdout)
	}
	gw.waitOutput(gw.stderr, "cannot reach the broker", 10*time.Second)
	if gw.exited() {
		t.Fatalf("strait run exited (%s) after clients failed to reach the cluster", gw.state())
	}
	gw.signalAndWait(syscall.SIGTERM, drainWait)
}

// TestBrokerDataDir: records produced to `strait broker --data-dir` survive
// a restart.
func TestBrokerDataDir(t *testing.T) {
	needKcat(t)
	t.Parallel()
	dir := t.TempDir()
	var port int
	var args []string
	b := startOnFreePorts(t, func() (*proc, error) {
		port = testkit.PortBlock(t, 3)
		args = []string{"broker", "--data-dir", dir, "--listen", addr(port)}
		p := startStrait(t, args...)
		return p, p.listening(addr(port), addr(port+1), addr(port+2))
	})
	b.waitOutput(b.stdout, "storing records in "+dir, readyTimeout)

	const topic = "persisted"
	input, want := keyedRecords(topic, 10)
	mustKcat(t, input, "-b", addr(port), "-t", topic, "-P", "-K:")
	b.signalAndWait(syscall.SIGTERM, 20*time.Second)

	b2 := startStrait(t, args...)
	b2.waitListening(addr(port), addr(port+1), addr(port+2))
	if got := consumeAll(t, addr(port), topic); !slices.Equal(got, want) {
		t.Errorf("after a restart with the same --data-dir, consumed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunDrainTimeoutZero: with shutdown.drain_timeout: 0s the gateway
// closes connections at once instead of waiting for requests in flight
// (docs/config.md: "0s means no waiting").
func TestRunDrainTimeoutZero(t *testing.T) {
	needKcat(t)
	t.Parallel()
	var brokerPort int
	startOnFreePorts(t, func() (*proc, error) {
		brokerPort = testkit.PortBlock(t, 3)
		p := startStrait(t, "broker", "--listen", addr(brokerPort))
		return p, p.listening(addr(brokerPort), addr(brokerPort+1), addr(brokerPort+2))
	})
	cfgPath := filepath.Join(t.TempDir(), "drain.yaml")
	var listen, adminPort int
	gw := startOnFreePorts(t, func() (*proc, error) {
		listen = testkit.PortBlock(t, 4)
		adminPort = testkit.PortBlock(t, 1, testkit.Range{Lo: listen + 1, Hi: listen + 1000})
		cfg := fmt.Sprintf(`admin:
  listen: "%s"
shutdown:
  drain_timeout: 0s
clusters:
  dev:
    bootstrap_servers: ["%s"]
virtual_clusters:
  - name: drain
    cluster: dev
    listen: "%s"
`, addr(adminPort), addr(brokerPort), addr(listen))
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startStrait(t, "run", "-c", cfgPath)
		return p, p.listening(addr(listen), addr(adminPort))
	})

	const topic = "drain"
	mustKcat(t, "k:v\n", "-b", addr(listen), "-t", topic, "-P", "-K:")
	// A consumer at the end of the topic keeps a Fetch waiting at the
	// broker for up to a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	consumer := exec.CommandContext(ctx, "kcat", "-b", addr(listen), "-t", topic, "-C", "-o", "end", "-q", "-X", "fetch.wait.max.ms=60000")
	consumer.WaitDelay = 5 * time.Second
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		consumer.Wait()
	})
	deadline := time.Now().Add(readyTimeout)
	for {
		_, body, err := httpGet("http://" + addr(adminPort) + "/metrics")
		if err == nil {
			req, _ := metricSum(body, "strait_kafka_requests_total", `api="Fetch"`)
			resp, _ := metricSum(body, "strait_kafka_responses_total", `api="Fetch"`)
			if req > resp {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Fetch in flight through the gateway after %v (last error: %v)", readyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Far less than the minute the Fetch may wait, and than the 30s
	// default drain timeout.
	gw.signalAndWait(syscall.SIGTERM, 15*time.Second)
	if !strings.Contains(gw.stderr.String(), "timeout=0s") {
		t.Errorf("strait run did not log its drain timeout of 0s:\n%s", gw.stderr)
	}
}
