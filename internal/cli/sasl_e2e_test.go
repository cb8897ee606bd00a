package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/straitgw/strait/internal/testkit"
)

// TestSASLGateway runs the binary as an operator would: a broker that
// demands SCRAM-SHA-512 of the gateway, a credential store made with
// `strait users add` (password on stdin), and a gateway that terminates
// client SASL against it and logs in to the broker as itself. Clients
// authenticate with SCRAM-SHA-512 and PLAIN; a wrong password is refused.
// alice's broker connections use credentials of her own
// (upstream_identity); bob's mapped credentials are wrong, so the gateway
// refuses bob and says why.
func TestSASLGateway(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	base := testkit.PortBlock(t, 8)
	broker := testkit.Addr(base)
	gw := testkit.Addr(base + 2)
	bp := startStrait(t, "broker", "--brokers", "1", "--listen", broker, "--user", "SCRAM-SHA-512:gw:gw-secret", "--user", "SCRAM-SHA-256:alice-up:alice-up-secret")
	bp.waitListening(broker)

	store := filepath.Join(dir, "users.store")
	for _, user := range []string{"alice", "bob"} {
		add := exec.Command(straitBin, "users", "add", "--store", store, user)
		add.Stdin = strings.NewReader(user + "-pass\n")
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("strait users add: %v\n%s", err, out)
		}
	}
	pw := filepath.Join(dir, "gw-password")
	if err := os.WriteFile(pw, []byte("gw-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRAIT_TEST_ALICE_UP", "alice-up-secret")
	t.Setenv("STRAIT_TEST_BOB_UP", "not-bobs")
	cfg := filepath.Join(dir, "sasl.yaml")
	yml := fmt.Sprintf(`admin: {listen: %q}
clusters:
  local:
    bootstrap_servers: [%q]
    sasl: {mechanism: SCRAM-SHA-512, username: gw, password_file: %q}
virtual_clusters:
  - name: secure
    cluster: local
    listen: %q
    node_ports: {start: %d, end: %d}
    sasl:
      mechanisms: [SCRAM-SHA-512, PLAIN]
      credentials: %q
      failure_delay: 10ms
    upstream_identity:
      principals:
        alice: {mechanism: SCRAM-SHA-256, username: alice-up, password_env: STRAIT_TEST_ALICE_UP}
        bob: {mechanism: SCRAM-SHA-256, username: bob-up, password_env: STRAIT_TEST_BOB_UP}
`, testkit.Addr(base+1), broker, pw, gw, base+3, base+7, store)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	gp := startStrait(t, "run", "-c", cfg)
	gp.waitListening(gw)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, mech := range map[string]kgo.Opt{
		"scram": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pass"}.AsSha512Mechanism()),
		"plain": kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pass"}.AsMechanism()),
	} {
		topic := "alice-" + name
		cl, err := kgo.NewClient(kgo.SeedBrokers(gw), mech, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic),
			kgo.AllowAutoTopicCreation(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello " + name)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce through the gateway: %v", name, err)
		}
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "hello "+name {
			t.Fatalf("%s: consumed %d records, %v", name, len(fs.Records()), err)
		}
		cl.Close()
	}
	bad, err := kgo.NewClient(kgo.SeedBrokers(gw), kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	bob, err := kgo.NewClient(kgo.SeedBrokers(gw), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pass"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if err := bob.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "the cluster refused the credentials the gateway holds for principal bob") {
		t.Errorf("bob, whose upstream credentials the broker refuses: %v, want SASL_AUTHENTICATION_FAILED saying why", err)
	}
	if !strings.Contains(gp.stderr.String(), "client authenticated") || !strings.Contains(gp.stderr.String(), "principal=alice") {
		t.Errorf("the gateway's log does not say alice authenticated:\n%s", gp.stderr)
	}
	if strings.Contains(gp.stderr.String(), "alice-pass") || strings.Contains(gp.stderr.String(), "gw-secret") || strings.Contains(gp.stderr.String(), "alice-up-secret") {
		t.Error("the gateway's log shows a password")
	}
}
