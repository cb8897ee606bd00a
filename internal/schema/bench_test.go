package schema

import (
	"context"
	"testing"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
)

// BenchmarkValidate measures the whole per-record path a filter takes for
// the 1 KiB reference record with its schema cached: prefix, cache lookup,
// subject check (topic-name strategy) and validation of the body.
func BenchmarkValidate(b *testing.B) {
	static, err := NewStatic([]Definition{
		{ID: 1, Subject: "orders-avro-value", Format: Avro, Text: schemas.Avro},
		{ID: 2, Subject: "orders-protobuf-value", Format: Protobuf, Text: schemas.Proto},
		{ID: 3, Subject: "orders-json-value", Format: JSON, Text: schemas.JSONSchema},
	})
	if err != nil {
		b.Fatal(err)
	}
	r := NewRegistry(static, Options{})
	ctx := context.Background()
	for _, bc := range []struct {
		kind string
		id   int
		idx  []int
	}{
		{kafkaload.PayloadAvro, 1, nil},
		{kafkaload.PayloadProtobuf, 2, []int{0}},
		{kafkaload.PayloadJSON, 3, nil},
	} {
		b.Run(bc.kind, func(b *testing.B) {
			payload := wireRecord(bc.id, bc.idx, encoded(b, bc.kind))
			topic := "orders-" + bc.kind
			rule := &Rule{}
			if _, err := r.Validate(ctx, topic, false, payload, rule); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Validate(ctx, topic, false, payload, rule); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
