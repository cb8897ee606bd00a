package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// TestReloadAuthorization: a running gateway takes new authorization
// rules on SIGHUP and on POST /-/reload, and a client connected before
// keeps its connections and gets the new decisions; a config with an error,
// or one that changes what needs a restart, is refused and the running one
// stays.
func TestReloadAuthorization(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	base := testkit.PortBlock(t, 8)
	broker, adminAddr, gw := testkit.Addr(base), testkit.Addr(base+1), testkit.Addr(base+2)
	bp := startStrait(t, "broker", "--brokers", "1", "--listen", broker)
	bp.waitListening(broker)
	store := filepath.Join(dir, "users.store")
	add := exec.Command(straitBin, "users", "add", "--store", store, "alice")
	add.Stdin = strings.NewReader("alice-pass\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("strait users add: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "strait.yaml")
	write := func(names, listen string) {
		t.Helper()
		yml := fmt.Sprintf(`admin: {listen: %q}
clusters:
  local:
    bootstrap_servers: [%q]
virtual_clusters:
  - name: reload
    cluster: local
    listen: %q
    node_ports: {start: %d, end: %d}
    sasl: {mechanisms: [PLAIN], credentials: %q, failure_delay: 10ms}
    filters:
      - type: authorization
        config:
          rules:
            - {effect: allow, principals: ["*"], resource: topic, names: [%s], operations: [ALL]}
            - {effect: allow, principals: ["*"], resource: group, names: ["*"], operations: [ALL]}
            - {effect: allow, principals: ["*"], resource: cluster, operations: [IDEMPOTENT_WRITE, DESCRIBE, CREATE]}
`, adminAddr, broker, listen, base+3, base+7, store, names)
		if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`"alice-*"`, gw)
	gp := startStrait(t, "run", "-c", cfg)
	gp.waitListening(gw, adminAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(gw), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pass"}.AsMechanism()),
		kgo.AllowAutoTopicCreation(), kgo.RecordRetries(3), kgo.UnknownTopicRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(topic string) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("alice-a"); err != nil {
		t.Fatalf("produce to alice-a: %v", err)
	}
	if err := produce("shared-a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to shared-a before the reload: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	opened := metric(t, adminAddr, "strait_kafka_connections_total")

	write(`"alice-*", "shared-*"`, gw)
	if err := gp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, adminAddr, `strait_config_reloads_total{outcome="applied"}`, 1)
	if err := produce("shared-a"); err != nil {
		t.Errorf("produce to shared-a after the reload allowed it: %v", err)
	}
	if now := metric(t, adminAddr, "strait_kafka_connections_total"); now != opened {
		t.Errorf("%v client connections opened by the reload, want none (the client keeps its connections)", now-opened)
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
	write(`"alice-*"`, gw) // back: shared-* refused again
	if code, body := post(); code != http.StatusOK {
		t.Fatalf("POST /-/reload: %d %s", code, body)
	}
	if err := produce("shared-b"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to shared-b after POST /-/reload took the rule away: %v", err)
	}

	os.WriteFile(cfg, []byte("clusters: [\n"), 0o600)
	if code, body := post(); code != http.StatusBadRequest || !strings.Contains(body, "not valid") {
		t.Errorf("a broken config: %d %q, want 400 saying it is not valid", code, body)
	}
	write(`"*"`, testkit.Addr(base+8))
	if code, body := post(); code != http.StatusBadRequest || !strings.Contains(body, "virtual_clusters[0] (reload) changed, which takes a restart") {
		t.Errorf("a new listen address: %d %q, want 400 saying it takes a restart", code, body)
	}
	if err := produce("shared-c"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("after refused reloads the rules changed: %v", err)
	}
	for outcome, want := range map[string]float64{"applied": 2, "invalid": 1, "restart_needed": 1} {
		if n := metric(t, adminAddr, `strait_config_reloads_total{outcome="`+outcome+`"}`); n != want {
			t.Errorf("reloads %s: %v, want %v", outcome, n, want)
		}
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
