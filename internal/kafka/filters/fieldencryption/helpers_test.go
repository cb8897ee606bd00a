package fieldencryption

// Helpers shared by this package's tests: a vault KMS that can be switched
// off, record batches built with franz-go's kmsg and compressors, and
// produce and fetch runs through a chain of the filter.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
)

// switchKMS wraps a KMS that a test can switch off.
type switchKMS struct {
	kms.KMS
	down atomic.Bool
}

func (s *switchKMS) off() error {
	return fmt.Errorf("%w: switched off by the test", kms.ErrUnavailable)
}

func (s *switchKMS) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	if s.down.Load() {
		return nil, s.off()
	}
	return s.KMS.Wrap(ctx, kek, dek)
}

func (s *switchKMS) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	if s.down.Load() {
		return nil, s.off()
	}
	return s.KMS.Unwrap(ctx, kek, wrapped)
}

func (s *switchKMS) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	if s.down.Load() {
		return nil, 0, s.off()
	}
	return s.KMS.DeriveKey(ctx, kek, version, label)
}

// testKMS is a vault in a temporary directory holding the named KEKs.
func testKMS(t testing.TB, keks ...string) *switchKMS {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vault")
	for _, k := range keks {
		if _, err := vault.CreateKey(dir, k); err != nil {
			t.Fatal(err)
		}
	}
	v, err := vault.Open(dir, vault.Options{ReloadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &switchKMS{KMS: v}
}

func newFilter(t testing.TB, cfg Config, k kms.KMS) *Filter {
	t.Helper()
	f, err := New(cfg, k)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// jsonRule is a config encrypting the value fields paths of JSON records of
// topics "pii*" under KEK kek.
func jsonConfig(paths ...string) Config {
	var fs []Field
	for _, p := range paths {
		fs = append(fs, Field{Path: p})
	}
	return Config{Rules: []Rule{{Topics: []string{"pii*"}, KEK: "kek", Value: &Part{Format: formatJSON, Fields: fs}}}}
}

// rec is a record as a test writes it.
type rec struct {
	key, value []byte // nil: null
	headers    []kmsg.Header
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// makeBatch builds a magic 2 batch as franz-go does.
func makeBatch(t testing.TB, codec kgo.CompressionCodec, recs ...rec) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	attrs := int16(0)
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	if comp != nil {
		out, used := comp.Compress(new(bytes.Buffer), raw)
		raw = append([]byte(nil), out...)
		attrs |= int16(used)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: int32(len(recs)), Records: raw}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// decodeRecords reads every record of b with kmsg and franz-go's
// decompressor, checking each batch's CRC.
func decodeRecords(t testing.TB, b []byte) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	dec := kgo.DefaultDecompressor()
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("kmsg cannot read the batch: %v", err)
		}
		n := int(rb.Length) + 12
		if crc := crc32.Checksum(b[21:n], castagnoli); uint32(rb.CRC) != crc {
			t.Fatalf("batch CRC %08x, contents hash to %08x", uint32(rb.CRC), crc)
		}
		b = b[n:]
		raw, err := dec.Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
		if err != nil {
			t.Fatalf("franz-go cannot decompress the batch: %v", err)
		}
		for range rb.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(raw); err != nil {
				t.Fatalf("kmsg cannot read a record: %v", err)
			}
			raw = raw[int(r.Length)+varintLen(int64(r.Length)):]
			out = append(out, r)
		}
	}
	return out
}

// logs collects a test context's log lines.
type logs struct{ strings.Builder }

// testCtx is a filter.Context with the given principal.
func testCtx(t testing.TB, principal string) (*filter.Context, *logs) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &logs{}
	c := &filter.Context{Ctx: ctx, Log: slog.New(slog.NewTextHandler(io.MultiWriter(&l.Builder, io.Discard), nil))}
	c.SetPrincipal(principal)
	return c, l
}

// produce builds a Produce request v9 of one batch per topic, partition 0.
func produce(acks int16, parts map[string][]byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, acks, 5000
	for topic, b := range parts {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = topic
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = b
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	}
	return r
}

// runProduce passes a Produce request through a chain of f, and returns the
// records each topic sends upstream and the answer f gave for the refused
// partitions (merged into an empty broker response when some went on).
func runProduce(t testing.TB, f *Filter, c *filter.Context, req *kmsg.ProduceRequest) (upstream map[string][]byte, refused map[string]kmsg.ProduceResponseTopicPartition) {
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
	upstream, refused = map[string][]byte{}, map[string]kmsg.ProduceResponseTopicPartition{}
	var resp *kmsg.ProduceResponse
	if at < ch.Len() {
		resp = fr.Response().(*kmsg.ProduceResponse)
	} else {
		for _, tp := range fr.Body.(*kmsg.ProduceRequest).Topics {
			upstream[tp.Topic] = tp.Partitions[0].Records
		}
		resp = kmsg.NewPtrProduceResponse()
		resp.Version = req.Version
		if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: 0, Version: req.Version, CorrelationID: 7}, Body: resp}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tp := range resp.Topics {
		refused[tp.Topic] = tp.Partitions[0]
	}
	return upstream, refused
}

// runFetch passes a Fetch response (v12) of one partition per topic
// through f and returns each partition as the client gets it, and whether
// f changed the response.
func runFetch(t testing.TB, f *Filter, c *filter.Context, parts map[string][]byte) (map[string]kmsg.FetchResponseTopicPartition, bool) {
	t.Helper()
	r := kmsg.NewPtrFetchResponse()
	r.Version = 12
	for topic, b := range parts {
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic = topic
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches, p.HighWatermark = b, 100
		tp.Partitions = append(tp.Partitions, p)
		r.Topics = append(r.Topics, tp)
	}
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	fr := &filter.Response{Header: filter.Header{Key: 1, Version: 12, CorrelationID: 9}, Body: r}
	if err := ch.OnResponse(c, ch.ResponseMask(1, 12), ch.Len(), fr); err != nil {
		t.Fatalf("OnResponse: %v", err)
	}
	out := map[string]kmsg.FetchResponseTopicPartition{}
	for _, tp := range r.Topics {
		out[tp.Topic] = tp.Partitions[0]
	}
	return out, !fr.Untouched()
}

// stringify renders a decoded value for comparisons.
func stringify(v any) string { return fmt.Sprintf("%#v", v) }
