package passthrough

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/testkit"
)

func TestRoute(t *testing.T) {
	l := &Listener{opts: Options{
		Routes:  map[string]string{"kafka.example.com": "10.0.0.1:9093"},
		Pattern: &Pattern{ServerName: "broker-$(node).kafka.example.com", Upstream: "b$(node).internal:9093"},
	}}
	for name, want := range map[string]string{
		"kafka.example.com": "10.0.0.1:9093", "Kafka.Example.com.": "10.0.0.1:9093",
		"broker-0.kafka.example.com": "b0.internal:9093", "broker-17.kafka.example.com": "b17.internal:9093",
	} {
		if got, ok := l.Route(name); !ok || got != want {
			t.Errorf("%s: %q, %v; want %s", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "other.example.com", "broker-.kafka.example.com", "broker-01.kafka.example.com", "broker-x.kafka.example.com", "xbroker-1.kafka.example.com"} {
		if got, ok := l.Route(name); ok {
			t.Errorf("%s routed to %s, want no route", name, got)
		}
	}
}

// TestPassthrough: a Kafka client's TLS session goes through the listener
// to a TLS broker untouched (the certificate it checks is the broker's),
// every broker reached through the one port by its name; a name no route
// serves and a connection without TLS are refused and counted.
func TestPassthrough(t *testing.T) {
	ca := testkit.NewCA(t)
	b, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.IssueServer(t, "kafka.test", "*.kafka.test")}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	addrs := b.ListenAddrs()
	routes := map[string]string{"kafka.test": addrs[0]}
	names := map[string]string{} // broker address → its name, as DNS would say
	for i, a := range addrs {
		routes[fmt.Sprintf("broker-%d.kafka.test", i)] = a
		names[a] = fmt.Sprintf("broker-%d.kafka.test", i)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l, err := Listen(Options{Name: "edge", Listen: "127.0.0.1:0", Routes: routes, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Shutdown(context.Background()) })

	// Every broker name resolves to the listener; the client's TLS names
	// the broker.
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		name, ok := names[host]
		if !ok {
			name = "kafka.test"
		}
		d := tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool, ServerName: name}}
		return d.DialContext(ctx, network, l.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("kafka.test:9093"), kgo.Dialer(dial), kgo.AllowAutoTopicCreation(),
		kgo.DefaultProduceTopic("pass"), kgo.ConsumeTopics("pass"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 30 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}, Partition: int32(i % 3)}).FirstErr(); err != nil {
			t.Fatalf("produce through TLS passthrough: %v", err)
		}
	}
	for got := 0; got < 30; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += len(fs.Records())
	}
	if n := testutil.ToFloat64(m.ConnsTotal.WithLabelValues("edge")); n < 3 {
		t.Errorf("%v connections relayed, want one per broker at least", n)
	}

	// A name no route serves.
	if c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: ca.Pool, ServerName: "nobody.kafka.test"}); err == nil {
		c.Close()
		t.Error("a TLS handshake for an unknown name succeeded")
	}
	// Plaintext Kafka on the passthrough port.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1, 0, 4, 't', 'e', 's', 't', 0, 0, 0, 0, 0, 0})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("plaintext on the passthrough port was answered")
	}
	c.Close()
	for reason, want := range map[string]float64{refusedUnknownName: 1, refusedNoSNI: 1} {
		if n := testutil.ToFloat64(m.Refused.WithLabelValues("edge", reason)); n != want {
			t.Errorf("%s refusals %v, want %v", reason, n, want)
		}
	}
}
