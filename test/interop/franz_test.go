package interop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var franzCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// TestFranzGo round-trips records with franz-go's kgo: a topic created
// through the gateway with six partitions, an idempotent producer per
// codec, and a group consumer.
func TestFranzGo(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	for _, c := range franzCodecs {
		t.Run(c.name, func(t *testing.T) {
			franzRoundTrip(t, e, c.name, c.codec, 600, nil)
		})
	}
	// acks=0: no produce responses, many requests in flight.
	t.Run("zstd-acks0", func(t *testing.T) {
		franzRoundTrip(t, e, "zstd", kgo.ZstdCompression(), 600,
			[]kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()})
	})
}

// franzRoundTrip produces n records through the gateway with codec (named
// codecName) and
// consumes them back in a fresh group. extra options apply to both clients.
func franzRoundTrip(t *testing.T, e *env, codecName string, codec kgo.CompressionCodec, n int, extra []kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := topicName(t, "t")
	recs := makeRecords(recordSpec{prefix: topic, n: n, headers: true})

	base := append([]kgo.Opt{kgo.SeedBrokers(e.addr), kgo.ClientID("strait-interop-franz")}, extra...)
	prod, err := kgo.NewClient(append(base,
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(5*time.Millisecond),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	createTopic(ctx, t, prod, topic)
	for _, r := range recs {
		kr := &kgo.Record{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		prod.Produce(ctx, kr, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Key, err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	cons, err := kgo.NewClient(append(base,
		kgo.ConsumeTopics(topic),
		kgo.ConsumerGroup(topic+"-g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []record
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("consumed %d of %d records before the deadline", len(got), n)
			break
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			rec := record{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, header{Key: h.Key, Value: h.Value})
			}
			got = append(got, rec)
		})
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("commit: %v", err)
	}
	verify(t, recs, got, checkOpts{headers: true, partitions: numPartitions})
	checkStored(t, e, topic, recs, checkOpts{headers: true, partitions: numPartitions}, codecName)
}

// createTopic creates topic with numPartitions partitions through the
// gateway.
func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = numPartitions
	rt.ReplicationFactor = 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
}
