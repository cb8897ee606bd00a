package validation

// Helpers shared by this package's tests: a development schema registry
// that can be switched off or made to serve a broken schema, record
// batches in every codec, and a filter chain to run produce requests
// through.

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/membudget"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/schema"
)

// The test schemas: an order in each format.
const (
	avroOrder = `{"type": "record", "name": "Order", "namespace": "shop", "fields": [
		{"name": "id", "type": "string"}, {"name": "amount", "type": "int"}]}`
	protoOrder = `syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int64 amount = 2;
}
message Refund {
  string order_id = 1;
}
`
	jsonOrder = `{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "shop.Order", "type": "object",
		"properties": {"id": {"type": "string"}, "amount": {"type": "integer", "minimum": 0}},
		"required": ["id", "amount"]}`
	// brokenID is a schema id the test registry serves as a schema that
	// does not compile.
	brokenID = 424242
)

// testRegistry is a development registry behind a switch: down, it closes
// every connection without an answer, as a registry that has gone away.
type testRegistry struct {
	url  string
	cl   *sr.Client
	down atomic.Bool
	hits atomic.Int64
}

func startRegistry(t testing.TB) *testRegistry {
	t.Helper()
	dev, err := devregistry.New(devregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := &testRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.hits.Add(1)
		if tr.down.Load() {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/424242") {
			// A schema the registry holds but that does not compile, as
			// one registered before a codec got stricter would be.
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			if strings.HasSuffix(r.URL.Path, "/versions") {
				_, _ = w.Write([]byte(`[{"subject": "broken-value", "version": 1}]`))
				return
			}
			_, _ = w.Write([]byte(`{"schema": "{\"type\": \"record\", \"name\": \"X\", \"fields\": [{\"name\": \"a\", \"type\": \"no-such-type\"}]}"}`))
			return
		}
		dev.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tr.url = srv.URL
	tr.cl, err = sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// register registers a schema under subject and returns its id.
func (tr *testRegistry) register(t testing.TB, subject string, typ sr.SchemaType, text string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ss, err := tr.cl.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: typ})
	if err != nil {
		t.Fatalf("registering under %s: %v", subject, err)
	}
	return ss.ID
}

// prefixed puts the Confluent wire-format prefix before body; indexes are
// written for Protobuf only (nil: none).
func prefixed(id int, indexes []int, body []byte) []byte {
	b := schema.AppendPrefix(nil, id)
	if indexes != nil {
		b = schema.AppendMessageIndexes(b, indexes)
	}
	return append(b, body...)
}

func avroBody(t testing.TB, id string, amount int) []byte {
	t.Helper()
	s := avro.MustParse(avroOrder)
	b, err := avro.Marshal(s, map[string]any{"id": id, "amount": amount})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func protoBody(id string, amount int64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(amount))
}

// rec is a record to put in a test batch; nil key or value is null.
type rec struct {
	key, value []byte
}

// makeBatch builds a batch of recs compressed with k, as a producer with
// producer id 7 and base sequence seq would send it.
func makeBatch(t testing.TB, k recordbatch.Codec, seq int32, recs ...rec) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	c := recordbatch.NewCodecs(recordbatch.DefaultMaxBatchBytes, recordbatch.DefaultMaxCompressionRatio, membudget.New(1<<30), time.Second)
	payload, err := c.Compress(nil, k, raw, false)
	if err != nil {
		t.Fatal(err)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(k), LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: 1_764_504_000_000, MaxTimestamp: 1_764_504_000_000,
		ProducerID: 7, ProducerEpoch: 0, FirstSequence: seq, NumRecords: int32(len(recs)), Records: payload,
	}
	out := b.AppendTo(nil)
	recordbatch.Finish(out, 0)
	return out
}

// produceReq is a Produce request of the given version and acks carrying
// batches by topic and partition.
func produceReq(version, acks int16, batches map[string]map[int32][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 5000
	for topic, parts := range batches {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p, b := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, b
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// result is what became of a produce request in the filter.
type result struct {
	upstream  *kmsg.ProduceRequest  // what goes to the broker; nil if answered
	answer    *kmsg.ProduceResponse // the filter's own answer, if any
	untouched bool                  // the client's bytes go upstream as they came
}

// runProduce passes req through a chain of f and, when the request goes
// upstream, through a broker that accepts every partition; the response
// the client would get is then in merged.
func runProduce(t testing.TB, f *Filter, c *filter.Context, req *kmsg.ProduceRequest) (res result, merged *kmsg.ProduceResponse) {
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
		res.answer = fr.Response().(*kmsg.ProduceResponse)
		return res, res.answer
	}
	res.upstream, res.untouched = fr.Body.(*kmsg.ProduceRequest), fr.Untouched()
	if req.Acks == 0 {
		return res, nil
	}
	// A broker that accepts what it was sent.
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	for _, t := range res.upstream.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	m := ch.ResponseMask(0, req.Version)
	if !ch.WantsResponse(m, ch.Len(), 0, req.Version, nil) {
		return res, resp
	}
	if err := ch.OnResponse(c, m, ch.Len(), &filter.Response{Header: fr.Header, Request: res.upstream, Body: resp}); err != nil {
		t.Fatalf("OnResponse: %v", err)
	}
	return res, resp
}

// partitionOf returns the response entry of topic's partition p.
func partitionOf(t testing.TB, r *kmsg.ProduceResponse, topic string, p int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	for _, rt := range r.Topics {
		if rt.Topic != topic {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition == p {
				return rp
			}
		}
	}
	t.Fatalf("no answer for %s/%d in %+v", topic, p, r.Topics)
	return kmsg.ProduceResponseTopicPartition{}
}

// testCtx is a connection's context whose log lines are kept in logs.
func testCtx(t testing.TB) (*filter.Context, *strings.Builder) {
	var logs strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &filter.Context{
		Ctx:            ctx,
		VirtualCluster: "vc-" + strings.ReplaceAll(t.Name(), "/", "-"),
		ClientAddr:     &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000},
		Log:            slog.New(slog.NewTextHandler(&logs, nil)),
	}, &logs
}

func newFilter(t testing.TB, cfg Config) *Filter {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func ptr[T any](v T) *T { return &v }
