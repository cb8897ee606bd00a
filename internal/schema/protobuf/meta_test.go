package protobuf

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// shop tags its sensitive fields as Confluent's data contracts do, and has
// a field of every shape a path can take: nested, repeated and map fields,
// a oneof, bytes, a large field number and a message that holds itself.
const shop = `syntax = "proto3";
package shop;
import "confluent/meta.proto";

message Address {
  string street = 1 [(confluent.field_meta) = { tags: ["PII"] }];
  string city = 2;
}

message Customer {
  string name = 1;
  string ssn = 2 [(confluent.field_meta) = { tags: ["PII", "GOV"] }];
  Address home = 3;
  repeated string emails = 4 [(confluent.field_meta) = { tags: ["PII"] }];
  int32 age = 5 [(confluent.field_meta) = { tags: ["PII"] }];
}

message Card {
  string number = 1 [(confluent.field_meta) = { doc: "the PAN", tags: ["PII"], params: { key: "k" value: "v" } }];
  bytes cvv = 2;
  int32 month = 3;
  repeated string notes = 4;
}

message Order {
  int64 id = 1;
  Customer customer = 2;
  repeated Card cards = 3;
  repeated int32 qty = 4;
  map<string, string> attrs = 5 [(confluent.field_meta) = { tags: ["PII"] }];
  map<string, Card> saved = 6;
  oneof payment {
    string iban = 7 [(confluent.field_meta) = { tags: ["PII"] }];
    Card card = 8;
  }
  bytes blob = 9 [(confluent.field_meta) = { tags: ["PII"] }];
  repeated bytes chunks = 10;
  Order parent = 11;
  string note = 300;
}
`

func shopOrder(t testing.TB) *Message {
	t.Helper()
	m, ok := compile(t, shop).MessageByName("shop.Order")
	if !ok {
		t.Fatal("shop.Order missing")
	}
	return m
}

func TestTagged(t *testing.T) {
	m := shopOrder(t)
	want := []string{"customer.ssn", "customer.home.street", "customer.emails[*]", "cards[*].number",
		"attrs[*]", "saved[*].number", "iban", "card.number", "blob"}
	if got := m.Tagged("PII"); !slices.Equal(got, want) {
		t.Errorf("Tagged(PII) = %q, want %q", got, want)
	}
	if got := m.Tagged("GOV"); !slices.Equal(got, []string{"customer.ssn"}) {
		t.Errorf("Tagged(GOV) = %q", got)
	}
	if got := m.Tagged("pii"); got != nil {
		t.Errorf("Tagged(pii) = %q; tags are case-sensitive", got)
	}
	// A schema that does not import the options has no tags.
	if got := message(t, orderSchema(t), 0).Tagged("PII"); got != nil {
		t.Errorf("untagged schema: %q", got)
	}
	// Imported indirectly, through a reference.
	common := `syntax = "proto3"; package common; import "confluent/meta.proto";
message Person { string ssn = 1 [(confluent.field_meta) = { tags: ["PII"] }]; }`
	s := compile(t, `syntax = "proto3"; import "common/person.proto"; message Holder { common.Person who = 1; }`,
		Reference{Name: "common/person.proto", Text: common})
	if got := message(t, s, 0).Tagged("PII"); !slices.Equal(got, []string{"who.ssn"}) {
		t.Errorf("tags of an imported message: %q", got)
	}
}

// A reference named confluent/meta.proto replaces the built-in file; tags
// are found where it declares them.
func TestTaggedReferencedMeta(t *testing.T) {
	meta := `syntax = "proto3"; package confluent; import "google/protobuf/descriptor.proto";
message Meta { repeated string labels = 1; repeated string tags = 7; }
extend google.protobuf.FieldOptions { Meta field_meta = 50001; }`
	s := compile(t, `syntax = "proto3"; import "confluent/meta.proto";
message M { string a = 1 [(confluent.field_meta) = { tags: ["PII"], labels: ["x"] }]; bytes b = 2 [(confluent.field_meta) = { labels: ["PII"] }]; }`,
		Reference{Name: "confluent/meta.proto", Text: meta})
	if got := message(t, s, 0).Tagged("PII"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Tagged with a referenced meta.proto = %q, want [a]", got)
	}
	// The built-in has no labels field: the reference was used.
	_, err := Compile(t.Context(), `syntax = "proto3"; import "confluent/meta.proto";
message M { string a = 1 [(confluent.field_meta) = { labels: ["x"] }]; }`, nil)
	if err == nil || !strings.Contains(err.Error(), "labels") {
		t.Errorf("built-in meta.proto accepts a field it lacks: %v", err)
	}
}

// The options may come as unknown fields of FieldOptions, as they do in
// descriptors built from a FileDescriptorProto without the extension.
func TestFieldTagsUnknown(t *testing.T) {
	var meta []byte
	meta = protowire.AppendTag(meta, 1, protowire.BytesType)
	meta = protowire.AppendString(meta, "a doc")
	for _, tag := range []string{"PII", "GOV"} {
		meta = protowire.AppendTag(meta, 3, protowire.BytesType)
		meta = protowire.AppendString(meta, tag)
	}
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 1088, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, meta)
	opts := &descriptorpb.FieldOptions{Deprecated: proto.Bool(true)}
	opts.ProtoReflect().SetUnknown(unknown)
	got := metaOption{ext: 1088, tags: 3}.fieldTags(opts)
	if !slices.Equal(got, []string{"PII", "GOV"}) {
		t.Errorf("tags = %q", got)
	}
	if got := (metaOption{ext: 1088, tags: 3}).fieldTags((*descriptorpb.FieldOptions)(nil)); got != nil {
		t.Errorf("no options: %q", got)
	}
}

// nodeProto holds itself, and a tagged field in a group.
const nodeProto = `syntax = "proto2"; import "confluent/meta.proto";
message Node {
  optional string secret = 1 [(confluent.field_meta) = { tags: ["PII"] }];
  repeated Node children = 2;
  optional group Extra = 3 { optional bytes key = 4 [(confluent.field_meta) = { tags: ["PII"] }]; }
}`

func TestTaggedRecursive(t *testing.T) {
	s := compile(t, nodeProto)
	if got := message(t, s, 0).Tagged("PII"); !slices.Equal(got, []string{"secret", "extra.key"}) {
		t.Errorf("Tagged = %q", got)
	}
}
