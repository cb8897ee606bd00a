package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/straitgw/strait/internal/testkit"
)

// TestReload: a running gateway takes a changed config on SIGHUP, on POST
// /-/reload and when the file changes. New authorization rules apply to a
// client connected before, on its connections; a virtual cluster whose
// settings changed is replaced (its clients reconnect), an added one
// starts, a removed one closes; a config with an error, or one that changes
// what needs a restart, is refused and the running one stays.
func TestReload(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	base := testkit.PortBlock(t, 16)
	// base+14 is the TLS passthrough listener's; base+15 is spare.
	broker, adminAddr, gw, extra := testkit.Addr(base), testkit.Addr(base+1), testkit.Addr(base+2), testkit.Addr(base+8)
	pass := testkit.Addr(base + 14)
	bp := startStrait(t, "broker", "--brokers", "1", "--listen", broker)
	bp.waitListening(broker)
	store := filepath.Join(dir, "users.store")
	add := exec.Command(straitBin, "users", "add", "--store", store, "alice")
	add.Stdin = strings.NewReader("alice-pass\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("strait users add: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "strait.yaml")
	type conf struct {
		names    string // the topics alice may use
		maxConns int    // the first virtual cluster's max_connections
		extra    bool   // a second virtual cluster and a TLS passthrough listener
		logLevel string
	}
	write := func(c conf) {
		t.Helper()
		yml := fmt.Sprintf(`admin: {listen: %q}
log: {level: %s}
clusters:
  local:
    bootstrap_servers: [%q]
virtual_clusters:
  - name: reload
    cluster: local
    listen: %q
    node_ports: {start: %d, end: %d}
    max_connections: %d
    sasl: {mechanisms: [PLAIN], credentials: %q, failure_delay: 10ms}
    filters:
      - type: authorization
        config:
          rules:
            - {effect: allow, principals: ["*"], resource: topic, names: [%s], operations: [ALL]}
            - {effect: allow, principals: ["*"], resource: group, names: ["*"], operations: [ALL]}
            - {effect: allow, principals: ["*"], resource: cluster, operations: [IDEMPOTENT_WRITE, DESCRIBE, CREATE]}
`, adminAddr, c.logLevel, broker, gw, base+3, base+7, c.maxConns, store, c.names)
		if c.extra {
			yml += fmt.Sprintf(`  - name: extra
    cluster: local
    listen: %q
    node_ports: {start: %d, end: %d}
tls_passthrough:
  - name: edge
    listen: %q
    routes: {kafka.example.com: %q}
`, extra, base+9, base+13, pass, broker)
		}
		if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := conf{names: `"alice-*"`, maxConns: 100, logLevel: "info"}
	write(c)
	gp := startStrait(t, "run", "-c", cfg)
	gp.waitListening(gw, adminAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(gw), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pass"}.AsMechanism()),
		kgo.AllowAutoTopicCreation(), kgo.RecordRetries(5), kgo.UnknownTopicRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(cl *kgo.Client, topic string) error {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce(cl, "alice-a"); err != nil {
		t.Fatalf("produce to alice-a: %v", err)
	}
	if err := produce(cl, "shared-a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to shared-a before the reload: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	opened := metric(t, adminAddr, "strait_kafka_connections_total")
	applied := func() float64 { return metric(t, adminAddr, `strait_config_reloads_total{outcome="applied"}`) }

	// New rules, by SIGHUP: the connected client gets them on its own
	// connections.
	c.names = `"alice-*", "shared-*"`
	write(c)
	if err := gp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, adminAddr, `strait_config_reloads_total{outcome="applied"}`, 1)
	if err := produce(cl, "shared-a"); err != nil {
		t.Errorf("produce to shared-a after the reload allowed it: %v", err)
	}
	if now := metric(t, adminAddr, "strait_kafka_connections_total"); now != opened {
		t.Errorf("%v client connections opened by a rules reload, want none (the client keeps its connections)", now-opened)
	}

	post := func() (int, string) {
		resp, err := http.Post("http://"+adminAddr+"/-/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Rules taken away, by POST.
	c.names = `"alice-*"`
	write(c)
	if code, body := post(); code != http.StatusOK {
		t.Fatalf("POST /-/reload: %d %s", code, body)
	}
	if err := produce(cl, "shared-b"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to shared-b after POST /-/reload took the rule away: %v", err)
	}

	// Refused: a broken file, and a change that takes a restart.
	os.WriteFile(cfg, []byte("clusters: [\n"), 0o600)
	if code, body := post(); code != http.StatusBadRequest || !strings.Contains(body, "not valid") {
		t.Errorf("a broken config: %d %q, want 400 saying it is not valid", code, body)
	}
	c.logLevel = "debug"
	write(c)
	if code, body := post(); code != http.StatusBadRequest || !strings.Contains(body, "log changed, which takes a restart") {
		t.Errorf("a new log level: %d %q, want 400 saying it takes a restart", code, body)
	}
	c.logLevel = "info"

	// A virtual cluster's own setting: it is replaced, its clients
	// reconnect and carry on; a second virtual cluster is added, by the
	// file change alone.
	before := applied()
	c.maxConns, c.extra = 50, true
	write(c)
	waitMetric(t, adminAddr, `strait_config_reloads_total{outcome="applied"}`, before+1)
	if err := produce(cl, "alice-b"); err != nil {
		t.Errorf("produce after the virtual cluster was replaced: %v", err)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(extra), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := produce(other, "any"); err != nil {
		t.Errorf("produce through the added virtual cluster: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", pass, 5*time.Second); err != nil {
		t.Errorf("the added TLS passthrough listener: %v", err)
	} else {
		conn.Close()
	}
	// Removed: its port closes.
	c.extra = false
	write(c)
	if code, body := post(); code != http.StatusOK {
		t.Fatalf("POST /-/reload removing a virtual cluster: %d %s", code, body)
	}
	for _, addr := range []string{extra, pass} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				break
			}
			conn.Close()
			if time.Now().After(deadline) {
				t.Fatalf("%s still accepts connections after its listener was removed", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for outcome, least := range map[string]float64{"invalid": 1, "restart_needed": 1} {
		if n := metric(t, adminAddr, `strait_config_reloads_total{outcome="`+outcome+`"}`); n < least {
			t.Errorf("reloads %s: %v, want at least %v", outcome, n, least)
		}
	}
	if strings.Contains(gp.stderr.String(), "alice-pass") {
		t.Error("the gateway's log shows a password")
	}
}

// metric reads one sample (name with its labels, as exposed) from the
// admin listener's /metrics; 0 when it is absent.
func metric(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !(name == series || strings.HasPrefix(name, series+"{")) {
			continue
		}
		var v float64
		fmt.Sscan(value, &v)
		sum += v
	}
	return sum
}

func waitMetric(t *testing.T, admin, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, admin, series) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach %v", series, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
