package cli_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
	"github.com/twmb/franz-go/pkg/kgo"
)

const edgeExample = "examples/edge.yaml"

// proxiedDialer sends a PROXY protocol v2 header naming client before
// anything else, as a load balancer does.
func proxiedDialer(client string) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		src, _ := net.ResolveTCPAddr("tcp", client)
		h := proxyproto.HeaderProxyFromAddrs(2, src, c.RemoteAddr())
		if _, err := h.WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

// TestEdgeExample runs examples/edge.yaml as its header says: kcat on the
// first virtual cluster directly; on the second, a client behind a PROXY
// header is served while a
// direct one is refused (and logged); POST /-/reload reloads.
func TestEdgeExample(t *testing.T) {
	needKcat(t)
	b, err := os.ReadFile(filepath.Join(moduleRoot, edgeExample))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"strait broker", "strait validate -c " + edgeExample, "strait run -c " + edgeExample,
		"listen: " + gatewayAddr, "listen: " + adminAddr, "listen: 127.0.0.1:29092",
		"proxy_protocol: allowed", "proxy_protocol: required", "curl -X POST http://" + adminAddr + "/-/reload",
	} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s no longer says %q, which scripts rely on: update the test with the example", edgeExample, want)
		}
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "examples"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, edgeExample), b, 0o600); err != nil {
		t.Fatal(err)
	}
	proxied := []string{"127.0.0.1:29092", "127.0.0.1:29093", "127.0.0.1:29094", "127.0.0.1:29095"}
	needExamplePorts(t, slices.Concat(brokerAddrs, []string{gatewayAddr, adminAddr}, nodeAddrs, proxied))
	if out, err := exampleShell(dir, "strait validate -c "+edgeExample).CombinedOutput(); err != nil {
		t.Fatalf("strait validate: %v\n%s", err, out)
	}
	startExampleCommand(t, dir, "strait broker").waitListening(brokerAddrs...)
	gw := startExampleCommand(t, dir, "strait run -c "+edgeExample)
	gw.waitListening(slices.Concat([]string{gatewayAddr, adminAddr}, nodeAddrs, proxied)...)

	if out := exampleRun(t, dir, "kcat -b "+gatewayAddr+" -L"); !strings.Contains(out, "3 brokers") {
		t.Errorf("kcat -L on the first virtual cluster:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	behind, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:29092"), kgo.Dialer(proxiedDialer("203.0.113.50:41000")),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("edge-proxied"))
	if err != nil {
		t.Fatal(err)
	}
	defer behind.Close()
	if err := behind.ProduceSync(ctx, &kgo.Record{Value: []byte("via balancer")}).FirstErr(); err != nil {
		t.Fatalf("a client behind a PROXY header: %v", err)
	}
	direct, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:29092"), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if err := direct.Ping(pctx); err == nil {
		t.Error("a client without a PROXY header was served where it is required")
	}
	if !strings.Contains(gw.stderr.String(), "refused a client connection") {
		t.Errorf("the refusal of the direct client was not logged:\n%s", gw.stderr)
	}

	resp, err := http.Post("http://"+adminAddr+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /-/reload: %s", resp.Status)
	}
}
