package encryption

// Helpers shared by this package's tests: a KMS that can be switched off
// and counts its calls, a vault in a temporary directory, record batches
// built the way franz-go builds them, and a filter chain to run requests and
// responses through.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
)

// switchKMS wraps a KMS: it can be made unavailable, and counts calls.
type switchKMS struct {
	kms.KMS
	down                   atomic.Bool
	wraps, unwraps, derive atomic.Int64
}

func (s *switchKMS) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	s.wraps.Add(1)
	if s.down.Load() {
		return nil, fmt.Errorf("%w: switched off by the test", kms.ErrUnavailable)
	}
	return s.KMS.Wrap(ctx, kek, dek)
}

func (s *switchKMS) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	s.unwraps.Add(1)
	if s.down.Load() {
		return nil, fmt.Errorf("%w: switched off by the test", kms.ErrUnavailable)
	}
	return s.KMS.Unwrap(ctx, kek, wrapped)
}

func (s *switchKMS) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	s.derive.Add(1)
	if s.down.Load() {
		return nil, 0, fmt.Errorf("%w: switched off by the test", kms.ErrUnavailable)
	}
	return s.KMS.DeriveKey(ctx, kek, version, label)
}

// testVault makes a vault holding the named KEKs and returns its path and
// the vault behind a switch.
func testVault(t testing.TB, keks ...string) (string, *switchKMS) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vault")
	for _, k := range keks {
		if _, err := vault.CreateKey(dir, k); err != nil {
			t.Fatal(err)
		}
	}
	if len(keks) == 0 {
		if _, err := vault.CreateKey(dir, "unused"); err != nil {
			t.Fatal(err)
		}
	}
	v, err := vault.Open(dir, vault.Options{ReloadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return dir, &switchKMS{KMS: v}
}

// newTestFilter builds a filter on k with cfg, failing the test on error.
func newTestFilter(t testing.TB, cfg Config, k kms.KMS) *Filter {
	t.Helper()
	f, err := New(cfg, k)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rec is a record as a test writes it.
type rec struct {
	key, value []byte // nil: null
	headers    []kmsg.Header
	tsDelta    int64
}

// batchOpts are the batch header fields a test may set.
type batchOpts struct {
	codec         kgo.CompressionCodec
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool
	baseOffset    int64
	baseTimestamp int64
}

func defaultBatchOpts() batchOpts {
	return batchOpts{codec: kgo.NoCompression(), producerID: -1, producerEpoch: -1, baseSequence: -1, baseTimestamp: 1_700_000_000_000}
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// makeBatch builds a magic 2 batch as franz-go does: records with kmsg,
// compression with franz-go's own compressor.
func makeBatch(t testing.TB, o batchOpts, recs ...rec) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	attrs := int16(0)
	if comp, err := kgo.DefaultCompressor(o.codec); err != nil {
		t.Fatal(err)
	} else if comp != nil {
		out, used := comp.Compress(new(bytes.Buffer), raw)
		if used <= 0 {
			t.Fatalf("franz-go did not compress: codec %d", used)
		}
		raw = append([]byte(nil), out...)
		attrs |= int16(used)
	}
	if o.transactional {
		attrs |= 0x10
	}
	maxTS := o.baseTimestamp
	for _, r := range recs {
		maxTS = max(maxTS, o.baseTimestamp+r.tsDelta)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          o.baseOffset,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       o.baseTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           o.producerID,
		ProducerEpoch:        o.producerEpoch,
		FirstSequence:        o.baseSequence,
		NumRecords:           int32(len(recs)),
		Records:              raw,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoliTable))
	return out
}

// decodedRecord is a record as franz-go decodes it, for comparisons.
type decodedRecord struct {
	Key, Value []byte
	Headers    []kmsg.Header
	Offset     int64
	Timestamp  int64
}

// decodeBatches reads every batch of b with kmsg and franz-go's
// decompressor, checking each CRC, and returns the batches' headers (with
// Records cleared) and the records.
func decodeBatches(t testing.TB, b []byte) ([]kmsg.RecordBatch, []decodedRecord) {
	t.Helper()
	var hdrs []kmsg.RecordBatch
	var out []decodedRecord
	dec := kgo.DefaultDecompressor()
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("kmsg cannot read the batch: %v", err)
		}
		n := int(rb.Length) + 12
		if crc := crc32.Checksum(b[21:n], castagnoliTable); uint32(rb.CRC) != crc {
			t.Fatalf("batch CRC %08x, contents hash to %08x", uint32(rb.CRC), crc)
		}
		b = b[n:]
		raw, err := dec.Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
		if err != nil {
			t.Fatalf("franz-go cannot decompress the batch: %v", err)
		}
		for i := int32(0); i < rb.NumRecords; i++ {
			var r kmsg.Record
			if err := r.ReadFrom(raw); err != nil {
				t.Fatalf("kmsg cannot read record %d: %v", i, err)
			}
			raw = raw[int(r.Length)+varintLen(int64(r.Length)):]
			out = append(out, decodedRecord{Key: r.Key, Value: r.Value, Headers: r.Headers,
				Offset: rb.FirstOffset + int64(r.OffsetDelta), Timestamp: rb.FirstTimestamp + r.TimestampDelta64})
		}
		if len(raw) != 0 {
			t.Fatalf("%d bytes after the batch's records", len(raw))
		}
		rb.Records = nil
		hdrs = append(hdrs, rb)
	}
	return hdrs, out
}

// testCtx is a filter.Context for hook calls made directly.
func testCtx(t testing.TB) *filter.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &filter.Context{Ctx: ctx, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Topics: testTopics{}}
}

// testTopics resolves topic IDs whose first byte is 1..9 to "t<n>" names
// through topicIDs; others are unknown.
type testTopics struct{}

var topicIDs = struct {
	sync.Mutex
	m map[[16]byte]string
}{m: map[[16]byte]string{}}

func topicID(name string) [16]byte {
	topicIDs.Lock()
	defer topicIDs.Unlock()
	var id [16]byte
	copy(id[:], "id:"+name)
	topicIDs.m[id] = name
	return id
}

func (testTopics) TopicName(_ context.Context, id [16]byte) (string, error) {
	topicIDs.Lock()
	defer topicIDs.Unlock()
	if n, ok := topicIDs.m[id]; ok {
		return n, nil
	}
	return "", fmt.Errorf("unknown topic id %x", id)
}

// produce builds a Produce request of one batch per (topic, partition).
func produce(version, acks int16, parts map[string]map[int32][]byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = version, acks, 5000
	for topic, ps := range parts {
		t := kmsg.NewProduceRequestTopic()
		if version >= 13 {
			t.TopicID = topicID(topic)
		} else {
			t.Topic = topic
		}
		for p, b := range ps {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, b
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// records returns the records of one partition of a Produce request.
func requestRecords(r *kmsg.ProduceRequest, topic string, partition int32) ([]byte, bool) {
	for _, t := range r.Topics {
		if t.Topic != topic && (r.Version < 13 || t.TopicID != topicID(topic)) {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return p.Records, true
			}
		}
	}
	return nil, false
}

// fetchResponse builds a Fetch response of one partition per topic.
func fetchResponse(version int16, parts map[string][]byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = version
	for topic, b := range parts {
		t := kmsg.NewFetchResponseTopic()
		if version >= 13 {
			t.TopicID = topicID(topic)
		} else {
			t.Topic = topic
		}
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches = b
		p.HighWatermark = 100
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	}
	return r
}

// runProduce passes a Produce request through a chain of just f, and
// returns what would go upstream (nil if f answered) and f's answer.
func runProduce(t testing.TB, f *Filter, c *filter.Context, req *kmsg.ProduceRequest) (upstream *kmsg.ProduceRequest, answer *kmsg.ProduceResponse) {
	t.Helper()
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	fr := filter.Request{Header: filter.Header{Key: 0, Version: req.Version, CorrelationID: 7}, Body: req}
	at, err := ch.OnRequest(c, ch.RequestMask(0, req.Version), &fr)
	if err != nil {
		t.Fatalf("OnRequest: %v", err)
	}
	if at < ch.Len() {
		return nil, fr.Response().(*kmsg.ProduceResponse)
	}
	return fr.Body.(*kmsg.ProduceRequest), nil
}

// runFetch passes a Fetch response through f.
func runFetch(t testing.TB, f *Filter, c *filter.Context, resp *kmsg.FetchResponse) {
	t.Helper()
	if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: 1, Version: resp.Version, CorrelationID: 9}, Body: resp}); err != nil {
		t.Fatalf("OnResponse: %v", err)
	}
}

// fetched returns the one partition of topic in a Fetch response.
func fetched(t testing.TB, r *kmsg.FetchResponse, topic string) *kmsg.FetchResponseTopicPartition {
	t.Helper()
	for i := range r.Topics {
		tp := &r.Topics[i]
		if tp.Topic == topic || (r.Version >= 13 && tp.TopicID == topicID(topic)) {
			return &tp.Partitions[0]
		}
	}
	t.Fatalf("topic %s not in the fetch response", topic)
	return nil
}

// sealOne encrypts one partition's records with f, as a produce would.
func sealOne(t testing.TB, f *Filter, topic string, in []byte) []byte {
	t.Helper()
	out, err := f.sealPartition(context.Background(), topic, f.pol.get(topic), in)
	if err != nil {
		t.Fatalf("sealing: %v", err)
	}
	return out
}

// openOne decrypts one partition's records with f, as a fetch would.
func openOne(t testing.TB, f *Filter, topic string, in []byte) []byte {
	t.Helper()
	out, err := f.openPartition(context.Background(), topic, in)
	if err != nil {
		t.Fatalf("opening: %v", err)
	}
	return out
}

func ptrBool(b bool) *bool { return &b }
