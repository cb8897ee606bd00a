package authz

// End to end through the proxy: franz-go clients produce, consume and ask
// for metadata through an in-process gateway in front of kfake, whose
// chain puts a filter that sets the connection's principal (from the
// client id, standing in for authentication) before authorization. The
// rule is the example's: every user may do everything on topics and
// groups whose names start with their user name and a dash.

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	var in filter.Interest
	for k := int16(0); k < wire.MaxKeys; k++ {
		if wire.KnownKey(k) {
			in.Requests = append(in.Requests, filter.KeyRange{Key: k})
		}
	}
	return in
}

func (principalFromClientID) OnRequest(c *filter.Context, req *filter.Request) error {
	if id := req.Header.ClientID; id != nil {
		c.SetPrincipal(*id)
	}
	req.Unchanged()
	return nil
}

// startGateway runs a gateway with the filter in front of a kfake cluster
// holding topics, and returns its address.
func startGateway(t *testing.T, f *Filter, topics ...string) string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	base := testkit.PortBlock(t, 4)
	vc, err := proxy.New(proxy.Options{
		Name: "authz", Listen: testkit.Addr(base), NodePortStart: base + 1, NodePortEnd: base + 3,
		Target:  proxy.Target{Bootstrap: cluster.ListenAddrs()},
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
	return vc.Addr().String()
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(3 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestGatewayAliceUsesAliceTopics(t *testing.T) {
	f := newFilter(t,
		allow(list("*"), "topic", list("{principal}-*"), "ALL"),
		allow(list("*"), "group", list("{principal}-*"), "ALL"),
		allow(list("carol"), "topic", list("alice-orders"), "DESCRIBE"),
		allow(list("*"), "group", list("shared-g"), "DESCRIBE"),
	)
	gw := startGateway(t, f, "alice-orders", "bob-x")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Producing to her own topic works, idempotently (InitProducerId
	// passes on WRITE to a topic).
	alice := newClient(t, gw, kgo.ClientID("alice"))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "alice-orders", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("alice producing to alice-orders: %v", err)
	}

	t.Run("produce to bob-x", func(t *testing.T) {
		err := alice.ProduceSync(ctx, &kgo.Record{Topic: "bob-x", Value: []byte("no")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("alice producing to bob-x: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})

	t.Run("metadata of all topics", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = nil
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tt := range resp.Topics {
			names = append(names, *tt.Topic)
		}
		if !slices.Equal(names, []string{"alice-orders"}) {
			t.Errorf("alice sees topics %v, want [alice-orders]", names)
		}
	})

	t.Run("consume in group bob-g", func(t *testing.T) {
		cl := newClient(t, gw, kgo.ClientID("alice"), kgo.ConsumerGroup("bob-g"), kgo.ConsumeTopics("alice-orders"))
		var got error
		for got == nil && ctx.Err() == nil {
			cl.PollFetches(ctx).EachError(func(_ string, _ int32, err error) {
				if got == nil {
					got = err
				}
			})
		}
		if !errors.Is(got, kerr.GroupAuthorizationFailed) {
			t.Errorf("alice consuming in bob-g: %v, want GROUP_AUTHORIZATION_FAILED", got)
		}
	})

	t.Run("consume in group alice-g", func(t *testing.T) {
		cl := newClient(t, gw, kgo.ClientID("alice"), kgo.ConsumerGroup("alice-g"), kgo.ConsumeTopics("alice-orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				t.Fatalf("alice consuming %s/%d in alice-g: %v", topic, p, err)
			})
			if fs.NumRecords() > 0 {
				if v := string(fs.Records()[0].Value); v != "ok" {
					t.Errorf("read %q", v)
				}
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Errorf("committing in alice-g: %v", err)
				}
				return
			}
		}
		t.Fatal("alice read nothing from alice-orders")
	})

	t.Run("bob may not read alice-orders", func(t *testing.T) {
		bob := newClient(t, gw, kgo.ClientID("bob"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"alice-orders": {0: kgo.NewOffset().AtStart()},
		}))
		var got error
		for got == nil && ctx.Err() == nil {
			bob.PollFetches(ctx).EachError(func(_ string, _ int32, err error) { got = err })
		}
		if !errors.Is(got, kerr.TopicAuthorizationFailed) {
			t.Errorf("bob reading alice-orders: %v, want TOPIC_AUTHORIZATION_FAILED", got)
		}
	})

	t.Run("carol may see alice-orders, not read it", func(t *testing.T) {
		// Metadata passes, so the refusal comes from Fetch: per
		// partition, in a sessionless fetch, every time carol asks.
		carol := newClient(t, gw, kgo.ClientID("carol"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"alice-orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
		}))
		refused := map[int32]bool{}
		for len(refused) < 2 && ctx.Err() == nil {
			carol.PollFetches(ctx).EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, kerr.TopicAuthorizationFailed) {
					t.Fatalf("carol reading %s/%d: %v, want TOPIC_AUTHORIZATION_FAILED", topic, p, err)
				}
				refused[p] = true
			})
		}
		if len(refused) < 2 {
			t.Errorf("refused partitions %v, want 0 and 1", refused)
		}
	})

	t.Run("next-gen group alice-g2", func(t *testing.T) {
		cl := newClient(t, gw, kgo.ClientID("alice"), kgo.ConsumerGroup("alice-g2"), kgo.ConsumeTopics("alice-orders"),
			kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				t.Fatalf("alice consuming %s/%d in alice-g2: %v", topic, p, err)
			})
			if fs.NumRecords() > 0 {
				return
			}
		}
		t.Fatal("alice read nothing in a KIP-848 group")
	})

	t.Run("next-gen group shared-g", func(t *testing.T) {
		// alice may find shared-g's coordinator (DESCRIBE), not join it
		// (READ): the heartbeat is refused.
		cl := newClient(t, gw, kgo.ClientID("alice"), kgo.ConsumerGroup("shared-g"), kgo.ConsumeTopics("alice-orders"), kgo.ServerSideBalancer())
		var got error
		for got == nil && ctx.Err() == nil {
			cl.PollFetches(ctx).EachError(func(_ string, _ int32, err error) {
				if got == nil {
					got = err
				}
			})
		}
		if !errors.Is(got, kerr.GroupAuthorizationFailed) {
			t.Errorf("alice consuming in shared-g with KIP-848: %v, want GROUP_AUTHORIZATION_FAILED", got)
		}
	})
}
