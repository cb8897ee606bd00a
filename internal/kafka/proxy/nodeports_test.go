package proxy

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

// occupy holds addr for the rest of the test, as another program would.
func occupy(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("occupying %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// canBind reports whether addr is free.
func canBind(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// TestBusyNodePortFailsStart: when a known broker's node port is taken,
// Start fails, naming the virtual cluster, the node, the address and the
// fix, and leaves no listener of its own behind.
func TestBusyNodePortFailsStart(t *testing.T) {
	t.Parallel()
	b, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	base := testkit.PortBlock(t, 11)
	busy := testkit.Addr(base + 1 + 1) // node 1
	occupy(t, busy)
	vc, err := New(Options{
		Name: "busy", Listen: testkit.Addr(base), NodePortStart: base + 1, NodePortEnd: base + 10,
		Target: Target{Bootstrap: b.ListenAddrs(), ConnectTimeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = vc.Start()
	if err == nil {
		vc.Shutdown(testCtx(t, 5*time.Second))
		t.Fatalf("Start succeeded with node 1's port %s taken", busy)
	}
	for _, want := range []string{"virtual cluster busy", "node 1", busy, "already in use", "node_ports"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error %q does not mention %q", err, want)
		}
	}
	for _, addr := range []string{testkit.Addr(base), testkit.Addr(base + 1), testkit.Addr(base + 3)} {
		if !canBind(addr) {
			t.Errorf("after the failed start, %s is still bound", addr)
		}
	}
}

// TestBusyBootstrapPortFailsStart: a taken listen port is reported as such,
// with the fix.
func TestBusyBootstrapPortFailsStart(t *testing.T) {
	t.Parallel()
	base := testkit.PortBlock(t, 2)
	occupy(t, testkit.Addr(base))
	vc, err := New(Options{Name: "busy", Listen: testkit.Addr(base), NodePortStart: base + 1, NodePortEnd: base + 1,
		Target: Target{Bootstrap: []string{"127.0.0.1:1"}}, SkipBrokerDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	err = vc.Start()
	if err == nil {
		vc.Shutdown(testCtx(t, 5*time.Second))
		t.Fatal("Start succeeded with the listen port taken")
	}
	for _, want := range []string{"virtual cluster busy", "cannot listen on " + testkit.Addr(base), "already in use", "change the virtual cluster's listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error %q does not mention %q", err, want)
		}
	}
}

// TestBusyNodePortAtRuntime: a broker that joins while the gateway runs,
// whose node port is taken, does not cost clients their connections: the
// node is advertised at the bootstrap address (never at the taken port),
// other nodes are served as before, readiness names the port, the problem
// is logged once, and all is well again once the port is free.
func TestBusyNodePortAtRuntime(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	b, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	base := testkit.PortBlock(t, 11)
	reg := prometheus.NewRegistry()
	vc, err := New(Options{
		Name: "rt", Listen: testkit.Addr(base), NodePortStart: base + 1, NodePortEnd: base + 10,
		Target:    Target{Bootstrap: b.ListenAddrs()},
		Log:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Metrics:   telemetry.NewKafkaMetrics(reg),
		nodeRetry: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vc.Shutdown(testCtx(t, 5*time.Second)) })
	if err := vc.Readiness(); err != nil {
		t.Fatalf("not ready after start: %v", err)
	}
	g := &gateway{broker: b, vc: vc, addr: vc.Addr().String(), reg: reg}

	node3 := testkit.Addr(base + 1 + 3)
	holder := occupy(t, node3)
	if _, _, err := b.AddNode(3, 0); err != nil {
		t.Fatal(err)
	}

	brokers := func(c *rawConn, corr int32) map[int32]string {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		resp := c.roundTrip(req, corr).(*kmsg.MetadataResponse)
		m := map[int32]string{}
		for _, br := range resp.Brokers {
			m[br.NodeID] = net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
		}
		return m
	}
	keeper := dialRaw(t, g.addr)
	for corr := int32(1); corr <= 3; corr++ {
		got := brokers(keeper, corr) // fails the test if the connection was closed
		if len(got) != 4 {
			t.Fatalf("metadata lists brokers %v, want 4", got)
		}
		if got[3] != g.addr {
			t.Errorf("node 3, whose port is taken, advertised at %s, want the bootstrap address %s", got[3], g.addr)
		}
		for id := int32(0); id < 3; id++ {
			if got[id] != g.nodeAddr(id) {
				t.Errorf("node %d advertised at %s, want %s", id, got[id], g.nodeAddr(id))
			}
		}
	}
	dialRaw(t, g.nodeAddr(0)).metadataWorks(1)

	err = vc.Readiness()
	if err == nil {
		t.Fatal("ready with node 3's port taken")
	}
	for _, want := range []string{"node 3", node3, "already in use", "node_ports"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("readiness %q does not mention %q", err, want)
		}
	}
	if vc.Ready() {
		t.Error("Ready() = true with node 3's port taken")
	}
	const msg = "cannot open the listener of a broker node"
	if n := strings.Count(logs.String(), msg); n != 1 {
		t.Errorf("logged %q %d times, want once:\n%s", msg, n, logs)
	}
	if !strings.Contains(logs.String(), "listen="+node3) {
		t.Errorf("the log line does not name %s:\n%s", node3, logs)
	}

	holder.Close()
	pollUntil(t, 5*time.Second, func() bool { return vc.Readiness() == nil },
		func() string { return fmt.Sprintf("still not ready after the port was freed: %v", vc.Readiness()) })
	if got := brokers(keeper, 4); got[3] != node3 {
		t.Errorf("node 3 advertised at %s once its port was free, want %s", got[3], node3)
	}
	dialRaw(t, node3).metadataWorks(1)
}
