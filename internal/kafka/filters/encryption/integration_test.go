package encryption

// End-to-end tests: franz-go clients produce and consume through an
// in-process gateway running the filter, in front of an in-process kfake
// cluster; other clients read the cluster directly to see what it stored.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/kms/vault"
	"github.com/straitgw/strait/internal/testkit"
)

// startBroker starts a one-broker kfake cluster with the given topics, one
// partition each.
func startBroker(t testing.TB, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// startGateway starts a virtual cluster with filter f in front of the
// broker, and returns its bootstrap address and a function that stops it
// (also run at cleanup).
func startGateway(t testing.TB, broker []string, f filter.Filter) (string, func()) {
	t.Helper()
	base := testkit.PortBlock(t, 4)
	lvl := slog.LevelError
	if testing.Verbose() {
		lvl = slog.LevelDebug
	}
	vc, err := proxy.New(proxy.Options{
		Name:          "enc",
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
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			vc.Shutdown(ctx)
		})
	}
	t.Cleanup(stop)
	return vc.Addr().String(), stop
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

// consumeAll reads n records of topic from the start, within 15 s.
func consumeAll(t *testing.T, addrs []string, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := client(t, addrs, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
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

// endOffset asks the broker directly for a partition's end offset.
func endOffset(t *testing.T, broker []string, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client(t, broker))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatal(err)
	}
	return p.Offset
}

// testRecords are records with keys, headers, tombstones and explicit
// timestamps.
func testRecords(topic string, n int) []*kgo.Record {
	var rs []*kgo.Record
	ts := time.UnixMilli(1_764_504_000_000)
	for i := range n {
		r := &kgo.Record{
			Topic:     topic,
			Key:       []byte(fmt.Sprintf("key-%d", i%7)),
			Value:     []byte(fmt.Sprintf(`{"n":%d,"card":"4111-1111-1111-%04d"}`, i, i)),
			Headers:   []kgo.RecordHeader{{Key: "trace-id", Value: []byte(fmt.Sprintf("secret-trace-%d", i))}},
			Timestamp: ts.Add(time.Duration(i) * time.Millisecond),
		}
		if i%10 == 9 {
			r.Value = nil // a tombstone
		}
		rs = append(rs, r)
	}
	return rs
}

func produceAll(t *testing.T, cl *kgo.Client, rs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// sameRecords compares what was consumed with what was produced: keys,
// values (null stays null), headers and timestamps, byte for byte.
func sameRecords(t *testing.T, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			!g.Timestamp.Equal(w.Timestamp) || !reflect.DeepEqual(g.Headers, w.Headers) {
			t.Errorf("record %d: got key %q value %q (null %v) ts %v headers %v; want key %q value %q (null %v) ts %v headers %v",
				i, g.Key, g.Value, g.Value == nil, g.Timestamp, g.Headers, w.Key, w.Value, w.Value == nil, w.Timestamp, w.Headers)
		}
	}
}

// checkStored reads topic directly from the broker and checks that no
// value or header is plaintext and that keys are.
func checkStored(t *testing.T, broker []string, topic string, want []*kgo.Record) {
	t.Helper()
	stored := consumeAll(t, broker, topic, len(want))
	for i, r := range stored {
		w := want[i]
		if len(r.Headers) != 1 || r.Headers[0].Key != markerKey {
			t.Fatalf("stored record %d has headers %v, want the marker alone (encrypt_headers)", i, r.Headers)
		}
		if bytes.Contains(r.Headers[0].Value, []byte("secret-trace")) {
			t.Fatalf("stored record %d: a header value in clear", i)
		}
		if (w.Value == nil) != (r.Value == nil) {
			t.Fatalf("stored record %d: null value %v, produced null %v", i, r.Value == nil, w.Value == nil)
		}
		if w.Value != nil && (bytes.Contains(r.Value, []byte("4111")) || bytes.Contains(r.Value, w.Value)) {
			t.Fatalf("stored record %d: the value is plaintext", i)
		}
		if !bytes.Equal(r.Key, w.Key) {
			t.Fatalf("stored record %d: key %q, want it in clear (%q)", i, r.Key, w.Key)
		}
	}
}

func TestGatewayEveryCodec(t *testing.T) {
	topics := []string{"secure-none", "secure-gzip", "secure-snappy", "secure-lz4", "secure-zstd"}
	broker := startBroker(t, append(topics, "plain")...)
	dir, k := testVault(t)
	for _, topic := range topics {
		if _, err := vault.CreateKey(dir, topic+"-kek"); err != nil {
			t.Fatal(err)
		}
	}
	f := newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek", EncryptHeaders: true}, k)
	gw, _ := startGateway(t, broker, f)

	for i, c := range codecsUnderTest {
		t.Run(c.name, func(t *testing.T) {
			topic := topics[i]
			want := testRecords(topic, 50)
			produceAll(t, client(t, []string{gw}, kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(50*time.Millisecond)), want)
			checkStored(t, broker, topic, want)
			sameRecords(t, consumeAll(t, []string{gw}, topic, len(want)), want)
		})
	}
	t.Run("unselected topic", func(t *testing.T) {
		want := testRecords("plain", 5)
		produceAll(t, client(t, []string{gw}), want)
		sameRecords(t, consumeAll(t, broker, "plain", len(want)), want)
	})
}

func TestGatewayIdempotentAndTransactional(t *testing.T) {
	broker := startBroker(t, "secure-tx", "secure-idem")
	_, k := testVault(t, "secure-tx-kek", "secure-idem-kek")
	f := newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek", EncryptHeaders: true}, k)
	gw, _ := startGateway(t, broker, f)

	t.Run("idempotent", func(t *testing.T) {
		want := testRecords("secure-idem", 30)
		produceAll(t, client(t, []string{gw}, kgo.ProducerBatchCompression(kgo.Lz4Compression())), want) // idempotent by default
		checkStored(t, broker, "secure-idem", want)
		sameRecords(t, consumeAll(t, []string{gw}, "secure-idem", len(want)), want)
	})

	t.Run("transactional", func(t *testing.T) {
		cl := client(t, []string{gw}, kgo.TransactionalID("strait-enc-test"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		committed := testRecords("secure-tx", 20)
		for round, rs := range [][]*kgo.Record{committed[:10], testRecords("secure-tx", 5), committed[10:]} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			commit := kgo.TryCommit
			if round == 1 {
				commit = kgo.TryAbort
			}
			if err := cl.EndTransaction(ctx, commit); err != nil {
				t.Fatal(err)
			}
		}
		got := consumeAll(t, []string{gw}, "secure-tx", len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		sameRecords(t, got, committed)
		// The broker holds 25 data records and 3 control markers.
		if end := endOffset(t, broker, "secure-tx"); end != 28 {
			t.Errorf("end offset %d, want 28 (25 records, 3 transaction markers)", end)
		}
	})
}

func TestGatewayKEKRotationAndRestart(t *testing.T) {
	broker := startBroker(t, "secure-rot")
	dir, k := testVault(t, "secure-rot-kek")
	cfg := Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek", DEK: DEKConfig{MaxRecords: 10}}
	gw, stop := startGateway(t, broker, newTestFilter(t, cfg, k))
	cl := client(t, []string{gw})

	first := testRecords("secure-rot", 30)
	produceAll(t, cl, first)
	if _, err := vault.RotateKey(dir, "secure-rot-kek"); err != nil {
		t.Fatal(err)
	}
	// The vault sees the new version within its reload interval; DEKs
	// made from then on are wrapped under it.
	var second []*kgo.Record
	deadline := time.Now().Add(10 * time.Second)
	for v2 := false; !v2; {
		if time.Now().After(deadline) {
			t.Fatal("no DEK wrapped under KEK version 2 after the rotation")
		}
		more := testRecords("secure-rot", 10)
		produceAll(t, cl, more)
		second = append(second, more...)
		stored := consumeAll(t, broker, "secure-rot", len(first)+len(second))
		m, err := parseMarker(stored[len(stored)-2].Headers[0].Value) // the last is a tombstone, with no DEK
		if err != nil {
			t.Fatal(err)
		}
		v2 = m.wrapped[0] == 2 // the vault's wrapped keys start with the KEK version
	}
	all := append(append([]*kgo.Record(nil), first...), second...)
	sameRecords(t, consumeAll(t, []string{gw}, "secure-rot", len(all)), all)

	// A new gateway, a new filter, a new view of the vault: it knows no
	// DEK, and still reads everything.
	stop()
	v, err := vault.Open(dir, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	restarted := &switchKMS{KMS: v}
	gw2, _ := startGateway(t, broker, newTestFilter(t, cfg, restarted))
	sameRecords(t, consumeAll(t, []string{gw2}, "secure-rot", len(all)), all)
	if restarted.unwraps.Load() < 2 {
		t.Errorf("the restarted gateway unwrapped %d DEKs; the data used DEKs under two KEK versions", restarted.unwraps.Load())
	}
}

func TestGatewayFailsClosed(t *testing.T) {
	broker := startBroker(t, "secure-nokek", "secure-down", "plain")
	_, k := testVault(t, "secure-down-kek")
	gw, _ := startGateway(t, broker, newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek"}, k))
	fast := []kgo.Opt{kgo.RecordRetries(3), kgo.DisableIdempotentWrite()}

	t.Run("missing kek", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err := client(t, []string{gw}, fast...).ProduceSync(ctx, testRecords("secure-nokek", 3)...).FirstErr()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Errorf("produce with a missing KEK: err %v, want POLICY_VIOLATION", err)
		}
		if end := endOffset(t, broker, "secure-nokek"); end != 0 {
			t.Errorf("the broker stored %d records", end)
		}
	})

	t.Run("vault unavailable", func(t *testing.T) {
		k.down.Store(true)
		defer k.down.Store(false)
		// A producer retries a retriable error until its deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		cl := client(t, []string{gw}, fast...)
		if err := cl.ProduceSync(ctx, testRecords("secure-down", 3)...).FirstErr(); err == nil {
			t.Fatal("produce succeeded with the vault unavailable")
		}
		// What it was told each time:
		req := produce(9, -1, map[string]map[int32][]byte{"secure-down": {0: makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")})}})
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(0, 9) // the request names its topic
		resp, err := client(t, []string{gw}, kgo.MaxVersions(vs)).Request(rctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
			t.Errorf("error code %d, want KAFKA_STORAGE_ERROR (retriable)", p.ErrorCode)
		}
		if end := endOffset(t, broker, "secure-down"); end != 0 {
			t.Errorf("the broker stored %d records", end)
		}
		// Other topics still work on the same connection.
		produceAll(t, cl, testRecords("plain", 2))
	})
}

func TestGatewayTamperedAndUnencrypted(t *testing.T) {
	broker := startBroker(t, "secure-t", "secure-legacy")
	_, k := testVault(t, "secure-t-kek", "secure-legacy-kek")
	gw, _ := startGateway(t, broker, newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek"}, k))
	produceAll(t, client(t, []string{gw}), testRecords("secure-t", 3))

	// Someone with broker access writes a tampered copy of the first
	// stored record after the originals.
	stored := consumeAll(t, broker, "secure-t", 3)
	bad := *stored[0]
	bad.Value = append([]byte(nil), bad.Value...)
	bad.Value[0] ^= 0x40
	bad.Topic, bad.Partition = "secure-t", 0
	produceAll(t, client(t, broker, kgo.DisableIdempotentWrite()), []*kgo.Record{&bad})

	fetch := func(addr, topic string, offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12 // names rather than IDs, so the test can ask directly
		req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(1, 12)
		resp, err := client(t, []string{addr}, kgo.MaxVersions(vs)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	// From offset 0 the three good records come back (the bad batch is
	// cut off); from offset 3 the partition fails.
	p := fetch(gw, "secure-t", 0)
	_, recs := decodeBatches(t, p.RecordBatches)
	if p.ErrorCode != 0 || len(recs) != 3 {
		t.Fatalf("from 0: code %d, %d records, want the 3 good ones", p.ErrorCode, len(recs))
	}
	p = fetch(gw, "secure-t", 3)
	if p.ErrorCode != kerr.CorruptMessage.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("the tampered record: code %d, %d bytes handed on; want CORRUPT_MESSAGE and nothing", p.ErrorCode, len(p.RecordBatches))
	}

	// Records written straight to the broker carry no envelope: they pass
	// (the default), or fail the fetch under reject.
	legacy := []*kgo.Record{{Topic: "secure-legacy", Value: []byte("written before encryption")}}
	produceAll(t, client(t, broker), legacy)
	got := consumeAll(t, []string{gw}, "secure-legacy", 1)
	if string(got[0].Value) != "written before encryption" {
		t.Errorf("pass: got %q", got[0].Value)
	}
	strict, _ := startGateway(t, broker, newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek", UnencryptedOnFetch: "reject"}, k))
	if p := fetch(strict, "secure-legacy", 0); p.ErrorCode != kerr.CorruptMessage.Code || len(p.RecordBatches) != 0 {
		t.Errorf("reject: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

func TestGatewayDeterministicKeys(t *testing.T) {
	broker := startBroker(t, "secure-users")
	_, k := testVault(t, "secure-users-kek")
	gw, _ := startGateway(t, broker, newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek", EncryptKey: true}, k))
	want := testRecords("secure-users", 14) // keys repeat every 7 records
	produceAll(t, client(t, []string{gw}), want)
	stored := consumeAll(t, broker, "secure-users", len(want))
	for i := range 7 {
		if bytes.Equal(stored[i].Key, want[i].Key) {
			t.Fatalf("record %d: key stored in clear", i)
		}
		if !bytes.Equal(stored[i].Key, stored[i+7].Key) {
			t.Errorf("records %d and %d have equal keys but different stored keys: compaction would keep both", i, i+7)
		}
	}
	sameRecords(t, consumeAll(t, []string{gw}, "secure-users", len(want)), want)
}
