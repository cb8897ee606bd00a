package interop

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

// sniDomain's names resolve to 127.0.0.1 through /etc/hosts
// (test/interop/install-deps.sh adds them), as a load balancer's DNS names
// resolve to it.
const sniDomain = "kafka.strait.test"

func needSNIHosts(t *testing.T) {
	t.Helper()
	err := checkDep("hosts:"+sniDomain, func() error {
		for i := -1; i < numBrokers; i++ {
			name := sniDomain
			if i >= 0 {
				name = fmt.Sprintf("broker-%d.%s", i, sniDomain)
			}
			addrs, err := net.LookupHost(name)
			if err != nil || len(addrs) == 0 || addrs[0] != "127.0.0.1" {
				return fmt.Errorf("%s does not resolve to 127.0.0.1 (%v, %v)", name, addrs, err)
			}
		}
		return nil
	})
	needDep(t, "host names for SNI routing", err, "add '127.0.0.1 "+sniDomain+" broker-0."+sniDomain+" broker-1."+sniDomain+" broker-2."+sniDomain+"' to /etc/hosts")
}

// TestSNIRoutingKcat: kcat (librdkafka) reaches every broker through one
// TLS port by name: it bootstraps from the bootstrap name, is told the
// brokers' names, and its TLS server name picks each broker.
func TestSNIRoutingKcat(t *testing.T) {
	needKcat(t)
	needSNIHosts(t)
	b, err := kfake.NewCluster(kfake.NumBrokers(numBrokers), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(numBrokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ca := testkit.NewCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	reg := prometheus.NewRegistry()
	port := testkit.PortBlock(t, 1)
	vc, err := proxy.New(proxy.Options{
		Name: "interop-sni", Listen: fmt.Sprintf("127.0.0.1:%d", port),
		TLS:    &tls.Config{Certificates: []tls.Certificate{ca.IssueServer(t, sniDomain, "*."+sniDomain)}, MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true},
		SNI:    &proxy.SNIRouting{BootstrapHost: sniDomain, BrokerHost: "broker-$(node)." + sniDomain},
		Target: proxy.Target{Bootstrap: b.ListenAddrs()},
		Log:    slog.New(slog.NewTextHandler(logs, nil)), Metrics: telemetry.NewKafkaMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		vc.Shutdown(ctx)
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	bootstrap := fmt.Sprintf("%s:%d", sniDomain, port)
	kcat := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		all := append([]string{"-b", bootstrap, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + caFile}, args...)
		cmd := exec.CommandContext(ctx, "kcat", all...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	md := kcat("", "-L")
	for i := range numBrokers {
		if want := fmt.Sprintf("broker %d at broker-%d.%s:%d", i, i, sniDomain, port); !strings.Contains(md, want) {
			t.Errorf("kcat -L does not list %q:\n%s", want, md)
		}
	}
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("sni-%d", i))
	}
	kcat(strings.Join(lines, "\n")+"\n", "-t", "sni-kcat", "-P")
	got := kcat("", "-t", "sni-kcat", "-C", "-e", "-o", "beginning", "-q")
	for _, l := range lines {
		if !strings.Contains(got, l+"\n") {
			t.Fatalf("kcat read back %q, missing %s", got, l)
		}
	}
}
