package fieldencryption

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/protobuf"
)

// personAvro puts the targeted fields among unions, nested records,
// arrays, maps and logical types.
const personAvro = `{"type": "record", "name": "Person", "namespace": "t", "fields": [
  {"name": "id", "type": "string"},
  {"name": "born", "type": {"type": "int", "logicalType": "date"}},
  {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
  {"name": "ssn", "type": "string"},
  {"name": "card", "type": ["null", "bytes"], "confluent:tags": ["PII"]},
  {"name": "tags", "type": {"type": "map", "values": "string"}},
  {"name": "addresses", "type": {"type": "array", "items": {"type": "record", "name": "Address", "fields": [
    {"name": "street", "type": "string", "confluent:tags": ["PII"]},
    {"name": "zip", "type": "string"}]}}},
  {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "nick", "type": ["null", "string"]}
]}`

const personProto = `syntax = "proto3";
package t;
import "confluent/meta.proto";
message Person {
  string id = 1;
  repeated int64 scores = 2;
  string ssn = 3;
  Address home = 4;
  repeated Address others = 5;
  bytes card = 6 [(confluent.field_meta) = { tags: ["PII"] }];
  optional string nick = 7;
  message Address { string street = 1 [(confluent.field_meta) = { tags: ["PII"] }]; string zip = 2; }
}`

// schemaConfig is a config whose schemas are written in it: Avro as id 1,
// Protobuf as id 2; topics pii* use the value's schema (format auto),
// encrypting ssn and whatever the schema tags PII.
func schemaConfig() Config {
	return Config{
		Config: schema.Config{Schemas: []schema.SchemaConfig{
			{ID: 1, Type: "AVRO", Schema: personAvro},
			{ID: 2, Type: "PROTOBUF", Schema: personProto},
		}},
		Rules: []Rule{{Topics: []string{"pii*"}, KEK: "kek", Value: &Part{Format: formatAuto, Fields: []Field{{Path: "ssn"}}, Tags: []string{"PII"}}}},
	}
}

func avroPerson(t testing.TB, ssn string, card []byte, nick *string) []byte {
	t.Helper()
	s := hamba.MustParse(personAvro)
	v := map[string]any{
		"id": "p-1", "born": int32(7000), "balance": []byte{0x01, 0x02}, "ssn": ssn, "card": card,
		"tags":      map[string]any{"a": "b", "c": "d"},
		"addresses": []any{map[string]any{"street": "1 Main St", "zip": "12345"}, map[string]any{"street": "2 Side Rd", "zip": "54321"}},
		"seen":      int64(1_700_000_000_000), "nick": nick,
	}
	if card == nil {
		v["card"] = nil
	}
	b, err := hamba.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return append(schema.AppendPrefix(nil, 1), b...)
}

func protoPerson(ssn string) []byte {
	var b []byte
	addr := func(street, zip string) []byte {
		var a []byte
		a = protowire.AppendTag(a, 2, protowire.BytesType) // out of order: zip first
		a = protowire.AppendString(a, zip)
		a = protowire.AppendTag(a, 1, protowire.BytesType)
		return protowire.AppendString(a, street)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, ssn)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, "p-1")
	b = protowire.AppendTag(b, 2, protowire.BytesType) // packed
	b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendVarint(nil, 5), 300))
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, addr("1 Main St", "12345"))
	b = protowire.AppendTag(b, 99, protowire.VarintType) // unknown field
	b = protowire.AppendVarint(b, 42)
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, addr("2 Side Rd", "54321"))
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte{0xde, 0xad, 0xbe, 0xef})
	return append(schema.AppendMessageIndexes(schema.AppendPrefix(nil, 2), []int{0}), b...)
}

// TestSchemaRoundTrip produces Avro and Protobuf records through the
// filter, checks the stored record still decodes with its schema with the
// selected fields (named, and tagged PII) as ciphertext and the others as
// produced, and fetches it back byte for byte.
func TestSchemaRoundTrip(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, schemaConfig(), k)
	nick := "Bo"
	values := map[string][]byte{
		"avro":            avroPerson(t, "123-45-6789", []byte{1, 2, 3}, &nick),
		"avro-null-union": avroPerson(t, "987-65-4321", nil, nil),
		"protobuf":        protoPerson("123-45-6789"),
	}
	for name, v := range values {
		for cname, codec := range codecs {
			t.Run(name+"/"+cname, func(t *testing.T) {
				in := makeBatch(t, codec, rec{key: []byte("k"), value: v})
				c, _ := testCtx(t, "")
				up, refused := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-people": in}))
				if len(refused) != 0 {
					t.Fatalf("refused: %+v", refused)
				}
				stored := decodeRecords(t, up["pii-people"])[0]
				if bytes.Contains(stored.Value, []byte("45-6789")) || bytes.Contains(stored.Value, []byte("65-4321")) ||
					bytes.Contains(stored.Value, []byte("Main St")) || bytes.Contains(stored.Value, []byte{0xde, 0xad, 0xbe, 0xef}) {
					t.Errorf("stored with a selected field in clear: %q", stored.Value)
				}
				checkStored(t, name, v, stored.Value)
				got, _ := runFetch(t, f, c, map[string][]byte{"pii-people": up["pii-people"]})
				back := decodeRecords(t, got["pii-people"].RecordBatches)[0]
				if !bytes.Equal(back.Value, v) || len(back.Headers) != 0 {
					t.Errorf("fetched %x (%d headers), produced %x", back.Value, len(back.Headers), v)
				}
				if cname == "none" && !bytes.Equal(got["pii-people"].RecordBatches, in) {
					t.Error("the fetched batch is not the produced one, byte for byte")
				}
			})
		}
	}
}

// checkStored decodes a stored value with its schema (hamba/avro,
// dynamicpb) and compares it with the produced one: the selected fields
// are envelopes, the rest equal.
func checkStored(t *testing.T, name string, produced, stored []byte) {
	t.Helper()
	if !bytes.Equal(stored[:5], produced[:5]) {
		t.Fatalf("schema id prefix changed: %x -> %x", produced[:5], stored[:5])
	}
	switch name {
	case "avro", "avro-null-union":
		s := hamba.MustParse(personAvro)
		var p, st map[string]any
		if err := hamba.Unmarshal(s, produced[5:], &p); err != nil {
			t.Fatal(err)
		}
		if err := hamba.Unmarshal(s, stored[5:], &st); err != nil {
			t.Fatalf("the stored record does not decode with its schema: %v", err)
		}
		if env, _ := base64.RawURLEncoding.DecodeString(st["ssn"].(string)); len(env) != 11+16 {
			t.Errorf("stored ssn %q is not a 27-byte envelope", st["ssn"])
		}
		for _, field := range []string{"id", "born", "balance", "tags", "seen", "nick"} {
			if !equalJSONish(p[field], st[field]) {
				t.Errorf("field %s: produced %v, stored %v", field, p[field], st[field])
			}
		}
		if p["card"] != nil && bytes.Equal(st["card"].([]byte), p["card"].([]byte)) {
			t.Error("tagged bytes field card stored in clear")
		}
	case "protobuf":
		ps, err := protobuf.Compile(context.Background(), personProto, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := ps.Message([]int{0})
		st := dynamicpb.NewMessage(m.Descriptor())
		if err := proto.Unmarshal(stored[6:], st); err != nil {
			t.Fatalf("the stored record does not decode with its schema: %v", err)
		}
		fd := m.Descriptor().Fields()
		if got := st.Get(fd.ByName("id")).String(); got != "p-1" {
			t.Errorf("id stored as %q", got)
		}
		if env, _ := base64.RawURLEncoding.DecodeString(st.Get(fd.ByName("ssn")).String()); len(env) != 11+16 {
			t.Errorf("stored ssn %q is not a 27-byte envelope", st.Get(fd.ByName("ssn")).String())
		}
		if st.Get(fd.ByName("scores")).List().Len() != 2 {
			t.Error("packed scores lost")
		}
	}
}

func equalJSONish(a, b any) bool {
	ab, _ := hamba.Marshal(hamba.MustParse(`"string"`), "")
	_ = ab
	return fmtAny(a) == fmtAny(b)
}

func fmtAny(v any) string { return stringify(v) }

var _ = kgo.NoCompression
