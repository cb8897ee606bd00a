package proxy

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestManyConcurrentClients runs 200 clients at once, each asking for
// metadata and producing a record; afterwards every connection is gone
// from the open-connections gauge.
func TestManyConcurrentClients(t *testing.T) {
	t.Parallel()
	const topic, clients = "crowd", 200
	g := startGateway(t, nil, kfake.SeedTopics(3, topic))
	ctx := testCtx(t, 45*time.Second)
	open := g.connsOpen

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DefaultProduceTopic(topic),
				kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			<-start
			meta := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			meta.Topics = append(meta.Topics, mt)
			resp, err := meta.RequestWith(ctx, cl)
			if err != nil {
				errs <- fmt.Errorf("client %d: metadata: %w", i, err)
				return
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
				errs <- fmt.Errorf("client %d: metadata topics %+v", i, resp.Topics)
				return
			}
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("from client %d", i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				errs <- fmt.Errorf("client %d: produce: %w", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	pollUntil(t, 10*time.Second, func() bool { return open() == 0 },
		func() string { return fmt.Sprintf("%v connections still open after every client closed", open()) })
	if total := g.metric("strait_kafka_connections_total"); total < clients {
		t.Errorf("%v connections accepted, want at least %d", total, clients)
	}

	want := map[string]string{}
	for i := 0; i < clients; i++ {
		want[fmt.Sprint(i)] = fmt.Sprintf("from client %d", i)
	}
	consumeExactly(t, ctx, g, topic, want)
}
