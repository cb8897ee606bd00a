package validation

// End-to-end tests: franz-go clients produce through an in-process gateway
// running the filter, in front of an in-process kfake cluster, with schemas
// in a development registry; other clients read the cluster directly to see
// what it stored.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/testkit"
)

// startBroker starts a one-broker kfake cluster with the given topics, of
// partitions partitions each.
func startBroker(t *testing.T, partitions int, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// startGateway starts a virtual cluster with filter f in front of the
// broker and returns its bootstrap address.
func startGateway(t *testing.T, broker []string, f filter.Filter) string {
	t.Helper()
	base := testkit.PortBlock(t, 4)
	lvl := slog.LevelError
	if testing.Verbose() {
		lvl = slog.LevelDebug
	}
	vc, err := proxy.New(proxy.Options{
		Name:          "val",
		Listen:        testkit.Addr(base),
		NodePortStart: base + 1,
		NodePortEnd:   base + 3,
		Target:        proxy.Target{Bootstrap: broker},
		Filters:       []filter.Filter{f},
		Log:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			vc.Shutdown(ctx)
		})
	})
	return vc.Addr().String()
}

func client(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RequestTimeoutOverhead(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// stored reads n records of topic straight from the broker, within 15 s.
func stored(t *testing.T, broker []string, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := client(t, broker, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s before the deadline", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// endOffsets asks the broker directly for the end offset of each partition
// of topic.
func endOffsets(t *testing.T, broker []string, topic string, partitions int) []int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(p), -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client(t, broker))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, partitions)
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatal(err)
		}
		out[p.Partition] = p.Offset
	}
	return out
}

// rawProduce sends req through the gateway as one Produce v9 request (topics
// by name) and returns the answer; acks=0 returns nil.
func rawProduce(t *testing.T, gw string, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(0, req.Version)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := client(t, []string{gw}, kgo.MaxVersions(vs)).Request(ctx, req)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	if resp == nil {
		return nil
	}
	return resp.(*kmsg.ProduceResponse)
}

// gatewayFixture is a broker, a registry with the test schemas, and a
// gateway validating orders-* (topic-name strategy, any format) and
// events-* (JSON), as examples/validation.yaml does.
type gatewayFixture struct {
	broker                  []string
	gw                      string
	reg                     *testRegistry
	avroID, protoID, jsonID int
}

func newGatewayFixture(t *testing.T, partitions int, topics ...string) *gatewayFixture {
	t.Helper()
	x := &gatewayFixture{reg: startRegistry(t)}
	x.avroID = x.reg.register(t, "orders-avro-value", sr.TypeAvro, avroOrder)
	x.protoID = x.reg.register(t, "orders-proto-value", sr.TypeProtobuf, protoOrder)
	x.jsonID = x.reg.register(t, "orders-json-value", sr.TypeJSON, jsonOrder)
	cfg := Config{Rules: []Rule{
		{Topics: []string{"orders*"}, Value: &PartRule{Schema: &SchemaRule{Strategy: "topic-name"}}},
		{Topics: []string{"events*"}, Value: &PartRule{JSON: &JSONRule{}}},
	}}
	cfg.Registry = &schema.RegistryConfig{URL: x.reg.url}
	x.broker = startBroker(t, partitions, topics...)
	x.gw = startGateway(t, x.broker, newFilter(t, cfg))
	return x
}

func produceSync(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// Valid records of every format land byte for byte; invalid ones come back
// to the producer as INVALID_RECORD and never reach the broker.
func TestGatewayFormats(t *testing.T) {
	x := newGatewayFixture(t, 1, "orders-avro", "orders-proto", "orders-json", "events-1", "plain")
	valid := map[string][]byte{
		"orders-avro":  prefixed(x.avroID, nil, avroBody(t, "o-1", 5)),
		"orders-proto": prefixed(x.protoID, []int{0}, protoBody("o-1", 5)),
		"orders-json":  prefixed(x.jsonID, nil, []byte(`{"id":"o-1","amount":5}`)),
		"events-1":     []byte(`{"kind":"click"}`),
		"plain":        []byte("not checked"),
	}
	invalid := map[string][]byte{
		"orders-avro":  prefixed(x.protoID, []int{0}, protoBody("o-1", 5)), // registered, under another subject
		"orders-proto": prefixed(x.protoID, []int{0}, []byte{0x08, 0x01}),  // field 1 is a string
		"orders-json":  []byte(`{"id":"o-1","amount":5}`),                  // no prefix
		"events-1":     []byte(`{"kind":`),
	}
	cl := client(t, []string{x.gw})
	for topic, v := range valid {
		if err := produceSync(t, cl, &kgo.Record{Topic: topic, Value: v}); err != nil {
			t.Errorf("%s: valid record refused: %v", topic, err)
		}
	}
	for topic, v := range invalid {
		// A producer of its own, since a refusal fails what it has
		// buffered for the partition.
		if err := produceSync(t, client(t, []string{x.gw}), &kgo.Record{Topic: topic, Value: v}); !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("%s: invalid record: err %v, want INVALID_RECORD", topic, err)
		}
	}
	for topic, v := range valid {
		got := stored(t, x.broker, topic, 1)
		if !bytes.Equal(got[0].Value, v) {
			t.Errorf("%s: stored %q, produced %q", topic, got[0].Value, v)
		}
		if end := endOffsets(t, x.broker, topic, 1)[0]; end != 1 {
			t.Errorf("%s: %d records stored, want the valid one", topic, end)
		}
	}
}

// The answer a client gets for a refused partition: INVALID_RECORD, the
// error_message and the KIP-467 record errors, with the other partitions
// of the same request written and answered by the broker; with acks=0
// only the refused partition is lost.
func TestGatewayPartitionAnswers(t *testing.T) {
	x := newGatewayFixture(t, 2, "events-mixed", "events-noack")
	good := makeBatch(t, 0, 0, rec{value: []byte(`{"ok":1}`)}, rec{value: []byte(`[]`)})
	bad := makeBatch(t, 0, 0, rec{value: []byte(`{"ok":1}`)}, rec{value: []byte(`oops`)})

	resp := rawProduce(t, x.gw, produceReq(9, -1, map[string]map[int32][]byte{"events-mixed": {0: bad, 1: good}}))
	var refused, written *kmsg.ProduceResponseTopicPartition
	for i := range resp.Topics[0].Partitions {
		p := &resp.Topics[0].Partitions[i]
		switch p.Partition {
		case 0:
			refused = p
		case 1:
			written = p
		}
	}
	if refused == nil || written == nil {
		t.Fatalf("answer %+v, want both partitions", resp.Topics)
	}
	const want = "value: invalid JSON at byte 0: unexpected 'o', want a value (topic events-mixed, record 1 of the batch, rules[1] (events*))"
	if refused.ErrorCode != kerr.InvalidRecord.Code || deref(refused.ErrorMessage) != "strait record-validation: "+want ||
		len(refused.ErrorRecords) != 1 || refused.ErrorRecords[0].RelativeOffset != 1 || deref(refused.ErrorRecords[0].ErrorMessage) != want {
		t.Errorf("refused partition: code %d, message %q, record errors %+v", refused.ErrorCode, deref(refused.ErrorMessage), refused.ErrorRecords)
	}
	if written.ErrorCode != 0 || written.BaseOffset != 0 {
		t.Errorf("written partition: code %d, base offset %d", written.ErrorCode, written.BaseOffset)
	}
	if got := endOffsets(t, x.broker, "events-mixed", 2); got[0] != 0 || got[1] != 2 {
		t.Errorf("end offsets %v, want [0 2]", got)
	}

	// acks=0: no answer; the good partition is written, the bad one not.
	req := produceReq(9, 0, map[string]map[int32][]byte{"events-noack": {0: bad, 1: good}})
	rawProduce(t, x.gw, req)
	waitFor(t, 10*time.Second, "the acks=0 batch to be written", func() bool {
		return endOffsets(t, x.broker, "events-noack", 2)[1] == 2
	})
	if got := endOffsets(t, x.broker, "events-noack", 2); got[0] != 0 {
		t.Errorf("the refused acks=0 partition holds %d records", got[0])
	}
}

// Every codec through the gateway, from franz-go: valid batches land, a
// batch with one invalid record is refused whole.
func TestGatewayEveryCodec(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	}
	var topics []string
	for _, c := range codecs {
		topics = append(topics, "orders-avro-"+c.name)
	}
	x := newGatewayFixture(t, 1, topics...)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "orders-avro-" + c.name
			// topic-name strategy: each topic has its own subject, and
			// its own schema (a registry gives equal schemas one id).
			id := x.reg.register(t, topic+"-value", sr.TypeAvro, strings.Replace(avroOrder, `"Order"`, `"Order`+c.name+`"`, 1))
			var rs []*kgo.Record
			for i := range 40 {
				rs = append(rs, &kgo.Record{Topic: topic, Value: prefixed(id, nil, avroBody(t, fmt.Sprintf("order-%d", i), i))})
			}
			opts := []kgo.Opt{kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(50 * time.Millisecond)}
			if err := produceSync(t, client(t, []string{x.gw}, opts...), rs...); err != nil {
				t.Fatalf("valid records refused: %v", err)
			}
			// New records: a produced record keeps the context it was
			// produced with.
			var bad []*kgo.Record
			for i := range 10 {
				bad = append(bad, &kgo.Record{Topic: topic, Value: rs[i].Value})
			}
			bad[5].Value = prefixed(id, nil, []byte{0xff})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			for i, r := range client(t, []string{x.gw}, opts...).ProduceSync(ctx, bad...) {
				if !errors.Is(r.Err, kerr.InvalidRecord) {
					t.Errorf("record %d of a batch with an invalid record: err %v, want INVALID_RECORD", i, r.Err)
				}
			}
			got := stored(t, x.broker, topic, len(rs))
			for i, r := range got {
				if !bytes.Equal(r.Value, rs[i].Value) {
					t.Fatalf("record %d stored as %x", i, r.Value)
				}
			}
			if end := endOffsets(t, x.broker, topic, 1)[0]; end != int64(len(rs)) {
				t.Errorf("%d records stored, want %d", end, len(rs))
			}
		})
	}
}

// An idempotent producer (franz-go's default) whose batch is refused goes
// on producing to the same partition: the refused batch leaves no gap in
// the sequence the broker expects.
func TestGatewayIdempotentProducerContinues(t *testing.T) {
	x := newGatewayFixture(t, 1, "events-idem")
	cl := client(t, []string{x.gw})
	rec := func(v string) *kgo.Record { return &kgo.Record{Topic: "events-idem", Value: []byte(v)} }
	if err := produceSync(t, cl, rec(`1`), rec(`2`)); err != nil {
		t.Fatal(err)
	}
	if err := produceSync(t, cl, rec(`bad`)); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("invalid record: err %v, want INVALID_RECORD", err)
	}
	for i := 3; i <= 5; i++ {
		if err := produceSync(t, cl, rec(fmt.Sprint(i))); err != nil {
			t.Fatalf("record %d after the refusal: %v", i, err)
		}
	}
	got := stored(t, x.broker, "events-idem", 5)
	var values []string
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	if fmt.Sprint(values) != "[1 2 3 4 5]" {
		t.Errorf("stored %v, want [1 2 3 4 5]", values)
	}
}

// A transactional producer whose batch is refused goes on with its
// transactions, and a read_committed consumer never sees a record of the
// refused batch: whether the application then aborts (as the Java producer
// requires after a failed send) or commits what was written (franz-go lets
// it).
func TestGatewayTransactionalProducer(t *testing.T) {
	x := newGatewayFixture(t, 2, "events-tx")
	cl := client(t, []string{x.gw}, kgo.TransactionalID("strait-validation-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := func(p int32, v string) *kgo.Record {
		return &kgo.Record{Topic: "events-tx", Partition: p, Value: []byte(v)}
	}
	txn := func(end kgo.TransactionEndTry, rs ...*kgo.Record) error {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		perr := cl.ProduceSync(ctx, rs...).FirstErr()
		if err := cl.EndTransaction(ctx, end); err != nil && end == kgo.TryAbort {
			t.Fatalf("aborting: %v", err)
		}
		return perr
	}
	if err := txn(kgo.TryCommit, rec(0, `1`)); err != nil {
		t.Fatal(err)
	}
	if err := txn(kgo.TryAbort, rec(0, `"aborted"`), rec(0, `nope`)); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("invalid record in a transaction: err %v, want INVALID_RECORD", err)
	}
	// Committed regardless: partition 1's record is written and
	// committed, partition 0's refused batch is not.
	if err := txn(kgo.TryCommit, rec(0, `"refused with its batch"`), rec(0, `nope`), rec(1, `2`)); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("invalid record in a transaction: err %v, want INVALID_RECORD", err)
	}
	if err := txn(kgo.TryCommit, rec(0, `3`)); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
	got := stored(t, x.broker, "events-tx", 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var values []string
	for _, r := range got {
		values = append(values, fmt.Sprintf("%d:%s", r.Partition, r.Value))
	}
	slices.Sort(values)
	if fmt.Sprint(values) != "[0:1 0:3 1:2]" {
		t.Errorf("committed %v, want [0:1 0:3 1:2]", values)
	}
}

// While the registry is down a record whose schema is not cached is not
// written: the producer gets KAFKA_STORAGE_ERROR, retries, and succeeds
// once the registry is back.
func TestGatewayRegistryDown(t *testing.T) {
	x := newGatewayFixture(t, 1, "orders-avro")
	x.reg.down.Store(true)
	value := prefixed(x.avroID, nil, avroBody(t, "o-1", 5))
	resp := rawProduce(t, x.gw, produceReq(9, -1, map[string]map[int32][]byte{"orders-avro": {0: makeBatch(t, 0, 0, rec{value: value})}}))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("registry down: code %d (%s), want KAFKA_STORAGE_ERROR", p.ErrorCode, deref(p.ErrorMessage))
	}
	if end := endOffsets(t, x.broker, "orders-avro", 1)[0]; end != 0 {
		t.Fatalf("%d records written while the registry was down", end)
	}

	// A producer retries a retriable error once its metadata is
	// refreshed: no older than 5 s by default, 100 ms here.
	cl := client(t, []string{x.gw}, kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- cl.ProduceSync(ctx, &kgo.Record{Topic: "orders-avro", Value: value}).FirstErr()
	}()
	hits := x.reg.hits.Load()
	waitFor(t, 10*time.Second, "the producer to meet the registry down", func() bool { return x.reg.hits.Load() > hits })
	x.reg.down.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("once the registry was back: %v", err)
	}
	if got := stored(t, x.broker, "orders-avro", 1); !bytes.Equal(got[0].Value, value) {
		t.Errorf("stored %x", got[0].Value)
	}
}
