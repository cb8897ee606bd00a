package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const saslExample = "examples/sasl.yaml"

// TestSASLExample runs examples/sasl.yaml as its header says, on its own
// ports, in a working directory holding a copy of it (so its store,
// examples/users.store, is made there): strait validate says the store is
// missing; `strait users add` with the password on stdin makes it; then
// alice, over SASL_PLAINTEXT with PLAIN (kcat's librdkafka), produces to and consumes
// alice-orders through the gateway, is refused bob-orders, and a client
// that does not authenticate gets nothing.
func TestSASLExample(t *testing.T) {
	needKcat(t)
	b, err := os.ReadFile(filepath.Join(moduleRoot, saslExample))
	if err != nil {
		t.Fatal(err)
	}
	header := string(b)
	for _, want := range []string{
		"strait users add --store examples/users.store alice", "strait broker", "strait validate -c " + saslExample,
		"strait run -c " + saslExample, "-X security.protocol=SASL_PLAINTEXT", "-X sasl.mechanisms=PLAIN",
		"listen: " + gatewayAddr, "listen: " + adminAddr, "bootstrap_servers: [" + brokerAddrs[0] + "]",
		"credentials: examples/users.store", "[SCRAM-SHA-512, SCRAM-SHA-256, PLAIN]",
	} {
		if !strings.Contains(header, want) {
			t.Fatalf("%s no longer says %q, which scripts rely on: update the test with the example", saslExample, want)
		}
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "examples"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, saslExample), b, 0o600); err != nil {
		t.Fatal(err)
	}
	needExamplePorts(t, slices.Concat(brokerAddrs, []string{gatewayAddr, adminAddr}, nodeAddrs))

	out, err := exampleShell(dir, "strait validate -c "+saslExample).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "strait users add --store") {
		t.Errorf("strait validate before the store exists: %v\n%s\nwant it to say how to make the store", err, out)
	}
	exampleRun(t, dir, "echo alice-pass | strait users add --store examples/users.store alice")
	if out, err := exampleShell(dir, "strait validate -c "+saslExample).CombinedOutput(); err != nil {
		t.Fatalf("strait validate with the store: %v\n%s", err, out)
	}
	startExampleCommand(t, dir, "strait broker").waitListening(brokerAddrs...)
	gw := startExampleCommand(t, dir, "strait run -c "+saslExample)
	gw.waitListening(slices.Concat([]string{gatewayAddr, adminAddr}, nodeAddrs)...)

	alice := "kcat -b " + gatewayAddr + " -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=PLAIN -X sasl.username=alice -X sasl.password=alice-pass"
	exampleRun(t, dir, "echo hello | "+alice+" -t alice-orders -P")
	if got := exampleRun(t, dir, alice+" -t alice-orders -C -e"); got != "hello\n" {
		t.Errorf("alice read %q from alice-orders, want hello", got)
	}
	scram := strings.Replace(alice, "sasl.mechanisms=PLAIN", "sasl.mechanisms=SCRAM-SHA-512", 1)
	if got := exampleRun(t, dir, scram+" -t alice-orders -C -e"); got != "hello\n" {
		t.Errorf("alice read %q from alice-orders with SCRAM-SHA-512, want hello", got)
	}
	out, err = exampleShell(dir, "echo hi | "+alice+" -t bob-orders -P").CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Errorf("alice producing to bob-orders: %v\n%s\nwant a topic authorization failure", err, out)
	}
	out, err = exampleShell(dir, "timeout 10 kcat -b "+gatewayAddr+" -m 5 -t alice-orders -C -e").CombinedOutput()
	if err == nil || strings.Contains(string(out), "hello") {
		t.Errorf("a client that does not authenticate read alice-orders: %v\n%s", err, out)
	}
	if strings.Contains(gw.stderr.String(), "alice-pass") {
		t.Error("the gateway's log shows alice's password")
	}
}
