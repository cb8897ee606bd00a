package validation

import (
	"context"
	"testing"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/schema"
)

// benchCase is the 1 KiB reference record (bench/schemas) in one format,
// with its schema in the config under <topic>-value.
type benchCase struct {
	kind    string
	id      int
	indexes []int
}

var benchCases = []benchCase{
	{kafkaload.PayloadAvro, 1, nil},
	{kafkaload.PayloadProtobuf, 2, []int{0}},
	{kafkaload.PayloadJSON, 3, nil},
}

// benchFilter validates orders-<kind> by the topic-name strategy, with the
// reference schemas given in the config.
func benchFilter(b *testing.B) *Filter {
	b.Helper()
	cfg := Config{Rules: []Rule{{Topics: []string{"orders-*"}, Value: &PartRule{Schema: &SchemaRule{Strategy: "topic-name"}}}}}
	cfg.Schemas = []schema.SchemaConfig{
		{ID: 1, Subject: "orders-avro-value", Type: "AVRO", Schema: schemas.Avro},
		{ID: 2, Subject: "orders-protobuf-value", Type: "PROTOBUF", Schema: schemas.Proto},
		{ID: 3, Subject: "orders-json-value", Type: "JSON", Schema: schemas.JSONSchema},
	}
	return newFilter(b, cfg)
}

func referencePayload(b *testing.B, bc benchCase) []byte {
	b.Helper()
	body, err := kafkaload.EncodeRecord(bc.kind, kafkaload.ReferenceRecord("6f1c2b1e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"))
	if err != nil {
		b.Fatal(err)
	}
	return prefixed(bc.id, bc.indexes, body)
}

// BenchmarkRecord measures the filter's per-record path for the reference
// record, its schema cached: the null, size and empty checks, the wire
// prefix, the schema and subject lookups, and validating the body.
func BenchmarkRecord(b *testing.B) {
	f := benchFilter(b)
	for _, bc := range benchCases {
		b.Run(bc.kind, func(b *testing.B) {
			topic := "orders-" + bc.kind
			payload := referencePayload(b, bc)
			c := checker{f: f, ctx: context.Background(), topic: topic, rule: f.rules.get(topic)}
			rec := recordbatch.Record{Value: payload, KeyNull: true}
			c.record(&rec)
			if c.v.valid != 1 {
				b.Fatalf("the reference record does not pass: %+v", c.v)
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				c.record(&rec)
			}
		})
	}
}

// BenchmarkPartition measures a partition of 100 reference records in one
// batch, uncompressed and zstd, through checkPartition: framing, CRC,
// decompression and the per-record path. It reports the cost per record.
func BenchmarkPartition(b *testing.B) {
	f := benchFilter(b)
	for _, k := range []recordbatch.Codec{recordbatch.Uncompressed, recordbatch.Zstd} {
		for _, bc := range benchCases {
			b.Run(k.String()+"/"+bc.kind, func(b *testing.B) {
				topic := "orders-" + bc.kind
				payload := referencePayload(b, bc)
				recs := make([]rec, 100)
				for i := range recs {
					recs[i] = rec{value: payload}
				}
				batch := makeBatch(b, k, 0, recs...)
				ru := f.rules.get(topic)
				ctx := context.Background()
				if v := f.checkPartition(ctx, topic, ru, batch); v.code != nil || v.valid != len(recs) {
					b.Fatalf("the batch does not pass: %+v", v)
				}
				b.SetBytes(int64(len(recs) * len(payload)))
				b.ReportAllocs()
				for b.Loop() {
					f.checkPartition(ctx, topic, ru, batch)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
			})
		}
	}
}
