package protobuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
)

const uuid = "0b4c8f4e-3a7d-4c52-9a51-2f4f1e8d6b10"

func compile(t testing.TB, text string, refs ...Reference) *Schema {
	t.Helper()
	s, err := Compile(context.Background(), text, refs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func message(t testing.TB, s *Schema, idx ...int) *Message {
	t.Helper()
	m, err := s.Message(idx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reference(t testing.TB) (*Message, []byte) {
	t.Helper()
	s := compile(t, schemas.Proto)
	b, err := kafkaload.EncodeRecord(kafkaload.PayloadProtobuf, kafkaload.ReferenceRecord(uuid))
	if err != nil {
		t.Fatal(err)
	}
	return message(t, s, 0), b
}

// record writes the reference record's fields with the given wire values,
// so that tests can break one field at a time.
type wireField struct {
	num protowire.Number
	typ protowire.Type
	val []byte // the value's encoding, after the tag
}

func encode(fields ...wireField) []byte {
	var b []byte
	for _, f := range fields {
		b = protowire.AppendTag(b, f.num, f.typ)
		b = append(b, f.val...)
	}
	return b
}

func str(s string) []byte { return protowire.AppendString(nil, s) }

func TestReferenceRecord(t *testing.T) {
	m, b := reference(t)
	if err := m.Validate(b); err != nil {
		t.Fatalf("reference record: %v", err)
	}
	if got := m.Descriptor().FullName(); got != "strait.bench.Record" {
		t.Errorf("message = %s, want strait.bench.Record", got)
	}
	notes := strings.Repeat("n", 930)
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"ssn as a varint", encode(wireField{1, 2, str(uuid)}, wireField{3, protowire.VarintType, []byte{5}}),
			`field "ssn": string written as wire type varint (0), want length-delimited (2)`},
		{"invalid UTF-8 in notes", encode(wireField{1, 2, str(uuid)}, wireField{4, 2, str("ok\xffno")}),
			`field "notes": string is not valid UTF-8`},
		{"truncated notes", encode(wireField{1, 2, str(uuid)}, wireField{4, 2, str(notes)})[:200],
			`field "notes": malformed string: unexpected end of data`},
		{"truncated tag", append(bytes.Clone(b), 0x80), fmt.Sprintf("malformed tag at byte %d: unexpected end of data", len(b))},
		{"field number 0", append(bytes.Clone(b), 0x02, 0x00), fmt.Sprintf("malformed tag at byte %d: invalid field number", len(b))},
		{"stray end-group", append(bytes.Clone(b), protowire.AppendTag(nil, 9, protowire.EndGroupType)...), `unexpected end-group tag for field 9`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Validate(tt.payload)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
			var e *Error
			if err != nil && !errors.As(err, &e) {
				t.Errorf("error is %T, want *Error", err)
			}
		})
	}
}

func TestUnknownFieldsSurvive(t *testing.T) {
	m, b := reference(t)
	extra := append(bytes.Clone(b), encode(
		wireField{99, protowire.VarintType, protowire.AppendVarint(nil, 7)},
		wireField{100, protowire.BytesType, str("anything \xff, not checked")},
		wireField{101, protowire.Fixed64Type, make([]byte, 8)},
	)...)
	if err := m.Validate(extra); err != nil {
		t.Fatalf("record with unknown fields: %v", err)
	}
	bad := append(bytes.Clone(b), protowire.AppendTag(nil, 99, protowire.Fixed32Type)...)
	bad = append(bad, 1, 2)
	if err := m.Validate(bad); err == nil || err.Error() != `field "99": malformed value: unexpected end of data` {
		t.Errorf("truncated unknown field: %v", err)
	}
}

const money = `syntax = "proto3";
package common;
message Money {
  int64 cents = 1;
  string currency = 2;
}
`

const order = `syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string note = 2;
  repeated int32 qty = 3;
  common.Money total = 4;
  map<string, Item> items = 5;
  enum State { NEW = 0; PAID = 1; }
  State state = 6;
  repeated fixed32 codes = 7;
  bytes raw = 8;
  google.protobuf.Timestamp at = 9;
  message Item {
    string sku = 1;
    double price = 2;
  }
  Item first = 10;
  sint64 big = 300;
}

message Other {
  string name = 1;
}
`

func orderSchema(t testing.TB) *Schema {
	return compile(t, order, Reference{Name: "common/money.proto", Text: money})
}

func sampleOrder(t testing.TB, s *Schema) []byte {
	t.Helper()
	md := s.File().Messages().ByName("Order")
	msg := dynamicpb.NewMessage(md)
	set := func(m protoreflect.Message, name string, v protoreflect.Value) {
		m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), v)
	}
	set(msg, "id", protoreflect.ValueOfInt64(42))
	set(msg, "note", protoreflect.ValueOfString("leave at the door"))
	qty := msg.Mutable(md.Fields().ByName("qty")).List()
	qty.Append(protoreflect.ValueOfInt32(1))
	qty.Append(protoreflect.ValueOfInt32(300))
	total := msg.Mutable(md.Fields().ByName("total")).Message()
	set(total, "cents", protoreflect.ValueOfInt64(1999))
	set(total, "currency", protoreflect.ValueOfString("EUR"))
	items := msg.Mutable(md.Fields().ByName("items")).Map()
	item := items.NewValue()
	set(item.Message(), "sku", protoreflect.ValueOfString("a-1"))
	items.Set(protoreflect.ValueOfString("first").MapKey(), item)
	set(msg, "state", protoreflect.ValueOfEnum(1))
	codes := msg.Mutable(md.Fields().ByName("codes")).List()
	codes.Append(protoreflect.ValueOfUint32(7))
	set(msg, "raw", protoreflect.ValueOfBytes([]byte{0xff, 0}))
	first := msg.Mutable(md.Fields().ByName("first")).Message()
	set(first, "sku", protoreflect.ValueOfString("b-2"))
	set(first, "price", protoreflect.ValueOfFloat64(9.5))
	set(msg, "big", protoreflect.ValueOfInt64(-1))
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestComplexMessage(t *testing.T) {
	s := orderSchema(t)
	m := message(t, s, 0)
	valid := sampleOrder(t, s)
	if err := m.Validate(valid); err != nil {
		t.Fatalf("valid order: %v", err)
	}
	for i := range len(valid) {
		// A strict prefix may be valid protobuf (fields are optional), but
		// it must never make the validator fail other than with an *Error.
		var e *Error
		if err := m.Validate(valid[:i]); err != nil && !errors.As(err, &e) {
			t.Fatalf("prefix %d: %T %v", i, err, err)
		}
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"bad UTF-8 in a referenced message", encode(wireField{4, 2, protowire.AppendBytes(nil, encode(wireField{2, 2, str("\xff")}))}),
			`field "total.currency": string is not valid UTF-8`},
		{"bad UTF-8 in a map value", encode(wireField{5, 2, protowire.AppendBytes(nil, encode(
			wireField{1, 2, str("k")}, wireField{2, 2, protowire.AppendBytes(nil, encode(wireField{1, 2, str("\xc3")}))}))}),
			`field "items.value.sku": string is not valid UTF-8`},
		{"bad UTF-8 in a map key", encode(wireField{5, 2, protowire.AppendBytes(nil, encode(wireField{1, 2, str("\xc3")}))}),
			`field "items.key": string is not valid UTF-8`},
		{"packed fixed32 of 5 bytes", encode(wireField{7, 2, protowire.AppendBytes(nil, []byte{1, 2, 3, 4, 5})}),
			`field "codes": packed fixed32 run of 5 bytes is not a multiple of 4`},
		{"packed varints cut short", encode(wireField{3, 2, protowire.AppendBytes(nil, []byte{1, 0x80})}),
			`field "qty": malformed varint in packed int32 run: unexpected end of data`},
		{"double as fixed32", encode(wireField{10, 2, protowire.AppendBytes(nil, encode(wireField{2, protowire.Fixed32Type, []byte{0, 0, 0, 0}}))}),
			`field "first.price": double written as wire type fixed32 (5), want fixed64 (1)`},
		{"packed run on a string field", encode(wireField{2, protowire.VarintType, []byte{1}}),
			`field "note": string written as wire type varint (0), want length-delimited (2)`},
		{"message as a varint", encode(wireField{4, protowire.VarintType, []byte{1}}),
			`field "total": message written as wire type varint (0), want length-delimited (2)`},
		{"large field number, wrong type", encode(wireField{300, protowire.BytesType, str("x")}),
			`field "big": sint64 written as wire type length-delimited (2), want varint (0)`},
		{"well-known type", encode(wireField{9, 2, protowire.AppendBytes(nil, encode(wireField{1, protowire.Fixed64Type, make([]byte, 8)}))}),
			`field "at.seconds": int64 written as wire type fixed64 (1), want varint (0)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Validate(tt.payload)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	// A repeated scalar written unpacked is as valid as packed.
	unpacked := encode(wireField{3, protowire.VarintType, []byte{1}}, wireField{3, protowire.VarintType, []byte{2}},
		wireField{7, protowire.Fixed32Type, []byte{1, 0, 0, 0}})
	if err := m.Validate(unpacked); err != nil {
		t.Errorf("unpacked repeated scalars: %v", err)
	}
}

func TestMessageIndexes(t *testing.T) {
	s := orderSchema(t)
	tests := []struct {
		idx  []int
		want string
	}{
		{[]int{0}, "shop.Order"},
		{[]int{1}, "shop.Other"},
		// Nested types count in declaration order, the synthetic entry
		// type of a map field included, as in the descriptor.
		{[]int{0, 0}, "shop.Order.ItemsEntry"},
		{[]int{0, 1}, "shop.Order.Item"},
	}
	for _, tt := range tests {
		got, err := s.FullName(tt.idx)
		if err != nil || got != tt.want {
			t.Errorf("FullName(%v) = %q, %v; want %q", tt.idx, got, err, tt.want)
		}
	}
	for _, bad := range [][]int{{2}, {-1}, {0, 5}, {}} {
		if _, err := s.Message(bad); err == nil {
			t.Errorf("Message(%v) succeeds, want an error", bad)
		}
	}
	other := message(t, s, 1)
	if err := other.Validate(encode(wireField{1, 2, str("x")})); err != nil {
		t.Errorf("Other: %v", err)
	}
	if m, ok := s.MessageByName("common.Money"); !ok || m.Descriptor().Name() != "Money" {
		t.Errorf("MessageByName(common.Money) = %v, %v", m, ok)
	}
}

const legacy = `syntax = "proto2";
package old;
message Legacy {
  optional string name = 1;
  repeated group Line = 2 {
    optional int32 qty = 3;
    optional string text = 4;
  }
}
`

func TestProto2(t *testing.T) {
	s := compile(t, legacy)
	m := message(t, s, 0)
	group := func(inner ...wireField) []byte {
		b := encode(inner...)
		return protowire.AppendTag(b, 2, protowire.EndGroupType)
	}
	valid := encode(
		wireField{1, 2, str("not \xff UTF-8: proto2 does not check")},
		wireField{2, protowire.StartGroupType, group(wireField{3, 0, []byte{4}}, wireField{4, 2, str("x")})},
		wireField{2, protowire.StartGroupType, group()},
	)
	if err := m.Validate(valid); err != nil {
		t.Fatalf("proto2 record: %v", err)
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"group without end", encode(wireField{2, protowire.StartGroupType, encode(wireField{3, 0, []byte{4}})}),
			`field "line": group ends without its end-group tag`},
		{"wrong type in group", encode(wireField{2, protowire.StartGroupType, group(wireField{3, 2, str("x")})}),
			`field "line.qty": int32 written as wire type length-delimited (2), want varint (0)`},
		{"group sent length-delimited", encode(wireField{2, 2, str("x")}),
			`field "line": group written as wire type length-delimited (2), want start-group (3)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Validate(tt.payload)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestEditionsUTF8(t *testing.T) {
	s := compile(t, `edition = "2023";
package ed;
message M {
  string checked = 1;
  string unchecked = 2 [features.utf8_validation = NONE];
}
`)
	m := message(t, s, 0)
	if err := m.Validate(encode(wireField{2, 2, str("\xff")})); err != nil {
		t.Errorf("utf8_validation NONE: %v", err)
	}
	if err := m.Validate(encode(wireField{1, 2, str("\xff")})); err == nil {
		t.Error("editions default accepts invalid UTF-8")
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		refs []Reference
		want string
	}{
		{"syntax error", `syntax = "proto3"; message {`, nil, "protobuf schema"},
		{"missing import", `syntax = "proto3"; import "nowhere.proto"; message M {}`, nil, "nowhere.proto"},
		{"broken import", order, []Reference{{Name: "common/money.proto", Text: "message"}}, "common/money.proto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(context.Background(), tt.text, tt.refs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
	// A reference named like the main file does not replace it.
	s := compile(t, `syntax = "proto3"; import "schema.proto"; message A { B b = 1; }`,
		Reference{Name: "schema.proto", Text: `syntax = "proto3"; message B {}`})
	if got := s.File().Messages().Get(0).Name(); got != "A" {
		t.Errorf("first message = %s, want A", got)
	}
}
