package validation

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/jsonschema"
)

// staticFilter validates events (JSON, duplicate keys refused) and orders
// (schema ids 1 Avro, 2 Protobuf, 3 JSON Schema, from the config: no
// network).
func staticFilter(t testing.TB) *Filter {
	t.Helper()
	cfg := Config{Rules: []Rule{
		{Topics: []string{"events"}, Key: &PartRule{MaxBytes: 64}, Value: &PartRule{JSON: &JSONRule{DuplicateKeys: "reject"}}},
		{Topics: []string{"orders"}, Value: &PartRule{Schema: &SchemaRule{Subjects: []string{"orders-value"}}}},
	}}
	cfg.Schemas = []schema.SchemaConfig{
		{ID: 1, Subject: "orders-value", Type: "AVRO", Schema: avroOrder},
		{ID: 2, Subject: "orders-value", Type: "PROTOBUF", Schema: protoOrder},
		{ID: 3, Subject: "orders-value", Type: "JSON", Schema: jsonOrder},
	}
	return newFilter(t, cfg)
}

// FuzzProduce sends arbitrary records through the filter's produce path as
// two partitions, one per rule. Whatever they hold, the filter does not
// panic or fail the connection; a partition either goes upstream with
// exactly the bytes it came with, or is answered with an error; nothing is
// left pending once the response is seen; and a batch that franz-go's own
// parser reads as holding a value that is not JSON is never forwarded to
// the JSON topic.
func FuzzProduce(f *testing.F) {
	for _, k := range []recordbatch.Codec{recordbatch.Uncompressed, recordbatch.Gzip, recordbatch.Snappy, recordbatch.LZ4, recordbatch.Zstd} {
		events := makeBatch(f, k, 0, rec{key: []byte("k"), value: []byte(`{"a":[1,2,{"b":null}]}`)}, rec{value: []byte(`"x"`)}, rec{key: []byte("t")})
		orders := makeBatch(f, k, 0,
			rec{value: prefixed(1, nil, avroBody(f, "o-1", 5))},
			rec{value: prefixed(2, []int{0}, protoBody("o-2", 7))},
			rec{value: prefixed(3, nil, []byte(`{"id":"o-3","amount":1}`))})
		f.Add(events, orders)
	}
	f.Add(makeBatch(f, recordbatch.Uncompressed, 0, rec{value: []byte(`{"a":1,"a":2}`)}), makeBatch(f, recordbatch.Uncompressed, 0, rec{value: []byte{0, 0, 0, 0, 9}}))
	f.Add([]byte{}, []byte{0})
	flt := staticFilter(f)
	f.Fuzz(func(t *testing.T, events, orders []byte) {
		c := &filter.Context{Ctx: context.Background()}
		req := produceReq(9, -1, map[string]map[int32][]byte{"events": {0: events}, "orders": {0: orders}})
		in := map[string][]byte{"events": events, "orders": orders}
		res, merged := runProduce(t, flt, c, req)
		sent := map[string][]byte{}
		if res.upstream != nil {
			for _, rt := range res.upstream.Topics {
				for _, rp := range rt.Partitions {
					sent[rt.Topic] = rp.Records
				}
			}
		}
		for _, topic := range []string{"events", "orders"} {
			b, forwarded := sent[topic]
			var answered bool
			for _, rt := range merged.Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == topic && rp.ErrorCode != 0 {
						answered = true
					}
				}
			}
			switch {
			case forwarded == answered:
				t.Fatalf("%s: forwarded %v, answered with an error %v: want exactly one", topic, forwarded, answered)
			case forwarded && !bytes.Equal(b, in[topic]):
				t.Fatalf("%s: forwarded bytes differ from the client's", topic)
			}
		}
		if res.untouched && len(sent) != 2 {
			t.Fatal("the client's bytes would go upstream, but a partition was taken out")
		}
		if n := flt.pending.Len(); n != 0 {
			t.Fatalf("%d failures pending after the response", n)
		}
		if _, ok := sent["events"]; ok {
			for _, v := range kmsgValues(events) {
				if v != nil && jsonschema.CheckSyntax(v, jsonschema.SyntaxOptions{RejectDuplicateKeys: true}) != nil {
					t.Fatalf("forwarded a value that is not JSON: %q", v)
				}
			}
		}
	})
}

// kmsgValues reads the values of an uncompressed single-batch partition
// with franz-go's parser, independent of the filter's; nil when it cannot.
func kmsgValues(b []byte) [][]byte {
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil || batch.Attributes&7 != 0 || batch.Magic != 2 {
		return nil
	}
	var out [][]byte
	recs := batch.Records
	for range batch.NumRecords {
		var r kmsg.Record
		n, w := varint(recs)
		if w <= 0 || n < 0 || int(n) > len(recs)-w {
			return out
		}
		if err := r.ReadFrom(recs[:w+int(n)]); err != nil {
			return out
		}
		out = append(out, r.Value)
		recs = recs[w+int(n):]
	}
	return out
}

func varint(b []byte) (int64, int) {
	var u uint64
	for i := 0; i < len(b) && i < 10; i++ {
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, 0
}
