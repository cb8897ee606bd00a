package fieldencryption

// End to end through the proxy: franz-go clients produce and consume
// through an in-process gateway whose chain puts a filter that sets the
// connection's principal (from the client id, standing in for
// authentication) before field encryption, in front of kfake.

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/testkit"
)

// principalFromClientID stands in for authentication: every request sets
// the connection's principal to its client id.
type principalFromClientID struct{}

func (principalFromClientID) Name() string { return "test-principal" }

func (principalFromClientID) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(wire.KeyProduce, wire.KeyFetch, wire.KeyMetadata)}
}

func (principalFromClientID) OnRequest(c *filter.Context, req *filter.Request) error {
	if id := req.Header.ClientID; id != nil {
		c.SetPrincipal(*id)
	}
	req.Unchanged()
	return nil
}

// TestGatewayPrincipals: alice gets the records as produced, bob the
// placeholder, and the broker holds ciphertext.
func TestGatewayPrincipals(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "pii-people"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	broker := cluster.ListenAddrs()

	cfg := jsonConfig()
	cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", RedactWith: "***-**-****"}}
	cfg.Rules[0].Fetch = FetchRule{DecryptFor: []string{"alice"}, Others: othersRedact}
	f := newFilter(t, cfg, testKMS(t, "kek"))
	base := testkit.PortBlock(t, 4)
	vc, err := proxy.New(proxy.Options{
		Name: "fields", Listen: testkit.Addr(base), NodePortStart: base + 1, NodePortEnd: base + 3,
		Target:  proxy.Target{Bootstrap: broker},
		Filters: []filter.Filter{principalFromClientID{}, f},
		Log:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
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
	})
	gw := []string{vc.Addr().String()}

	values := [][]byte{
		[]byte(`{"id":"a1","ssn":"123-45-6789","notes":"x"}`),
		[]byte(` { "ssn" : "987-65-4321" } `),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	producer := newClient(t, gw, kgo.ClientID("alice"), kgo.DefaultProduceTopic("pii-people"))
	for _, v := range values {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	read := func(addrs []string, id string) [][]byte {
		cl := newClient(t, addrs, kgo.ClientID(id), kgo.ConsumeTopics("pii-people"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var out [][]byte
		for len(out) < len(values) {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s read %d of %d records", id, len(out), len(values))
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("%s fetching: %v", id, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Headers) != 0 && addrs[0] == gw[0] {
					t.Errorf("%s got headers %v through the gateway", id, r.Headers)
				}
				out = append(out, r.Value)
			})
		}
		return out
	}
	alice, bob, stored := read(gw, "alice"), read(gw, "bob"), read(broker, "direct")
	for i, v := range values {
		if !bytes.Equal(alice[i], v) {
			t.Errorf("alice got %q, produced %q", alice[i], v)
		}
		want := bytes.Replace(v, []byte([]string{"123-45-6789", "987-65-4321"}[i]), []byte("***-**-****"), 1)
		if !bytes.Equal(bob[i], want) {
			t.Errorf("bob got %q, want %q", bob[i], want)
		}
		if bytes.Contains(stored[i], []byte("-45-")) || bytes.Contains(stored[i], []byte("-65-")) || len(stored[i]) != len(v)-11+36 {
			t.Errorf("the broker holds %q for %q: want the ssn as a 36-character envelope", stored[i], v)
		}
	}
}

func newClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
