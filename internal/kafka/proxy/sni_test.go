package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/testkit"
)

func TestSNINames(t *testing.T) {
	s := &SNIRouting{BootstrapHost: "kafka.example.com", BrokerHost: "broker-$(node).kafka.example.com"}
	for name, want := range map[string]int32{
		"kafka.example.com": bootstrapNode, "KAFKA.example.com.": bootstrapNode,
		"broker-0.kafka.example.com": 0, "broker-12.Kafka.Example.com": 12,
	} {
		if got, ok := s.node(name); !ok || got != want {
			t.Errorf("%s: node %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "broker-.kafka.example.com", "broker-01.kafka.example.com", "broker-x.kafka.example.com",
		"broker-1.kafka.example.org", "evil-broker-1.kafka.example.com", "broker-99999999999.kafka.example.com", "broker--1.kafka.example.com"} {
		if got, ok := s.node(name); ok {
			t.Errorf("%s: node %d, want no route", name, got)
		}
	}
	if s.brokerHost(7) != "broker-7.kafka.example.com" {
		t.Errorf("brokerHost(7) = %s", s.brokerHost(7))
	}
}

// sniDialer resolves every name under .kafka.test to the gateway's one
// port, as DNS (or /etc/hosts) would in front of a load balancer.
// It dials TLS with the name as the server name, as a client's own TLS
// dialer does.
func sniDialer(addr string, tc *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	_, port, _ := net.SplitHostPort(addr)
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		h, p, err := net.SplitHostPort(host)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(h, ".kafka.test") || h == "kafka.test" {
			if p != port {
				return nil, &net.AddrError{Err: "SNI-routed clients must be told the one port", Addr: host}
			}
			cfg := tc.Clone()
			cfg.ServerName = h
			d := tls.Dialer{Config: cfg}
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", p))
		}
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	}
}

// TestSNIRouting: every broker is served on one TLS port, picked by the
// server name, with a certificate per name; clients are told the broker
// names; a name no route serves, and a client that sends none, are refused.
func TestSNIRouting(t *testing.T) {
	ca := testkit.NewCA(t)
	g := startGateway(t, func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{
			ca.IssueServer(t, "kafka.test"), ca.IssueServer(t, "*.kafka.test"),
		}, MinVersion: tls.VersionTLS12}
		o.SNI = &SNIRouting{BootstrapHost: "kafka.test", BrokerHost: "broker-$(node).kafka.test"}
	})
	_, port, _ := net.SplitHostPort(g.addr)
	ctx := testCtx(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort("kafka.test", port)), kgo.Dialer(sniDialer(g.addr, &tls.Config{RootCAs: ca.Pool})), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("sni"),
		kgo.ConsumeTopics("sni"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 30 { // over every partition, so every broker is reached
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}, Partition: int32(i % 3)}).FirstErr(); err != nil {
			t.Fatalf("produce through SNI routing: %v", err)
		}
	}
	got := 0
	for got < 30 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v (after %d)", err, got)
		}
		got += len(fs.Records())
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(md.Brokers) != 3 {
		t.Fatalf("metadata: %v, %d brokers", err, len(md.Brokers))
	}
	for _, b := range md.Brokers {
		if b.Host != fmt.Sprintf("broker-%d.kafka.test", b.NodeID) || b.Port != mustPort(t, port) {
			t.Errorf("a client was told broker %d at %s:%d, want broker-%d.kafka.test:%s", b.NodeID, b.Host, b.Port, b.NodeID, port)
		}
	}
	g.vc.mu.Lock()
	open := len(g.vc.listeners)
	g.vc.mu.Unlock()
	if open != 1 {
		t.Errorf("%d listeners open, want the one", open)
	}
	for name, sni := range map[string]string{"an unknown name": "nobody.kafka.test", "no name": ""} {
		conn, err := tls.Dial("tcp", g.addr, &tls.Config{RootCAs: ca.Pool, ServerName: sni, InsecureSkipVerify: sni == ""})
		if err == nil {
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil {
			t.Errorf("%s: the connection stayed open", name)
		}
	}
	if n := g.metric("strait_kafka_connections_refused_total", "reason", refusedSNI); n != 2 {
		t.Errorf("%v SNI refusals counted, want 2", n)
	}
}

func mustPort(t *testing.T, s string) int32 {
	t.Helper()
	var p int32
	for _, c := range s {
		p = p*10 + int32(c-'0')
	}
	return p
}
