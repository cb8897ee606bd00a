package proxy

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceConsumeThroughProxy(t *testing.T) {
	env := startGateway(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.DefaultProduceTopic("t1"),
		kgo.ConsumeTopics("t1"), kgo.ConsumerGroup("g1"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 200
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Repeat("v", i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("got %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Errorf("fetch %s/%d: %v", t2, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			i, _ := strconv.Atoi(string(r.Key))
			if string(r.Value) != strings.Repeat("v", i) {
				t.Errorf("record %d: value corrupted", i)
			}
			got[string(r.Key)] = true
		})
	}
	// Metadata seen by the client names only gateway addresses.
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		for _, up := range env.broker.ListenAddrs() {
			if addr == up {
				t.Errorf("client learned upstream address %s", addr)
			}
		}
	}
}
