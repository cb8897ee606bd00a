package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// skimmer passes Produce requests to topics starting with "pass-" unread;
// it records what it was offered and what it had to decode.
type skimmer struct {
	mu               sync.Mutex
	offered, decoded []string
}

func (*skimmer) Name() string { return "skimmer" }
func (*skimmer) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(wire.KeyProduce)}
}

// topic names a topic by name, or from v13 by ID.
func topic(c *filter.Context, name string, id [16]byte) string {
	if name != "" {
		return name
	}
	n, _ := c.TopicName(id)
	return n
}

func (s *skimmer) PassRequest(c *filter.Context, h filter.Header, body []byte, _ bool) bool {
	p, ok := wire.SkimProduce(body, h.Version)
	name := topic(c, string(p.Name), p.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = append(s.offered, name)
	return ok && strings.HasPrefix(name, "pass-")
}

func (s *skimmer) OnRequest(c *filter.Context, req *filter.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range req.Body.(*kmsg.ProduceRequest).Topics {
		s.decoded = append(s.decoded, topic(c, t.Topic, t.TopicID))
	}
	req.Unchanged()
	return nil
}

// TestRequestSkimmer: a request every subscribed filter passes is relayed
// unread (OnRequest never sees it) and reaches the broker intact; one it
// does not pass is decoded as before.
func TestRequestSkimmer(t *testing.T) {
	s := &skimmer{}
	g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{s} })
	ctx := testCtx(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"pass-a", "decode-b"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v-" + topic)}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	s.mu.Lock()
	offered, decoded := strings.Join(s.offered, ","), strings.Join(s.decoded, ",")
	s.mu.Unlock()
	if !strings.Contains(offered, "pass-a") || !strings.Contains(offered, "decode-b") {
		t.Errorf("the skimmer was offered %q, want both topics", offered)
	}
	if strings.Contains(decoded, "pass-a") || !strings.Contains(decoded, "decode-b") {
		t.Errorf("OnRequest decoded %q: want decode-b only", decoded)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.ConsumeTopics("pass-a"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs := cons.PollFetches(fctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v-pass-a" {
		t.Errorf("consumed %d records from pass-a (%v), want the one produced", len(recs), fs.Err0())
	}
}
