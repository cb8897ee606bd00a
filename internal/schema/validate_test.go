package schema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/schema/jsonschema"
)

const uuid = "0b4c8f4e-3a7d-4c52-9a51-2f4f1e8d6b10"

func encoded(t testing.TB, kind string) []byte {
	t.Helper()
	b, err := kafkaload.EncodeRecord(kind, kafkaload.ReferenceRecord(uuid))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func avroRecord(t testing.TB) []byte { return encoded(t, kafkaload.PayloadAvro) }

// wireRecord is payload in the Confluent wire format with schema id, and
// for Protobuf the message indexes.
func wireRecord(id int, indexes []int, body []byte) []byte {
	b := AppendPrefix(nil, id)
	if indexes != nil {
		b = AppendMessageIndexes(b, indexes)
	}
	return append(b, body...)
}

// testRegistry is a fake registry holding the reference record's schemas
// under the topic-name subjects of "orders" (Avro), "orders-pb"
// (Protobuf) and "orders-json" (JSON Schema), and the Avro one again under
// "elsewhere-value".
type testRegistry struct {
	*Registry
	fake                    *fakeRegistry
	avroID, protoID, jsonID int
}

func setup(t *testing.T) *testRegistry {
	t.Helper()
	f := newFakeRegistry(t).start(t)
	tr := &testRegistry{fake: f}
	tr.avroID = f.register("orders-value", fakeSchema{Schema: schemas.Avro})
	tr.protoID = f.register("orders-pb-value", fakeSchema{Schema: schemas.Proto, Type: "PROTOBUF"})
	tr.jsonID = f.register("orders-json-value", fakeSchema{Schema: schemas.JSONSchema, Type: "JSON"})
	f.register("dev.strait.bench.Record", fakeSchema{Schema: schemas.Avro})
	f.register("orders-strait.bench.Record", fakeSchema{Schema: schemas.Proto, Type: "PROTOBUF"})
	f.register("Record", fakeSchema{Schema: schemas.JSONSchema, Type: "JSON"})
	tr.Registry = NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{})
	return tr
}

func TestValidateReferenceRecords(t *testing.T) {
	r := setup(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		topic string
		rule  Rule
		id    int
		idx   []int
		body  []byte
	}{
		{"avro, topic-name", "orders", Rule{}, r.avroID, nil, avroRecord(t)},
		{"protobuf, topic-name", "orders-pb", Rule{}, r.protoID, []int{0}, encoded(t, kafkaload.PayloadProtobuf)},
		{"json, topic-name", "orders-json", Rule{}, r.jsonID, nil, encoded(t, kafkaload.PayloadJSON)},
		{"avro, record-name", "any", Rule{Strategy: RecordName}, r.avroID, nil, avroRecord(t)},
		{"protobuf, topic-record-name", "orders", Rule{Strategy: TopicRecordName}, r.protoID, []int{0}, encoded(t, kafkaload.PayloadProtobuf)},
		{"json, record-name (title)", "any", Rule{Strategy: RecordName}, r.jsonID, nil, encoded(t, kafkaload.PayloadJSON)},
		{"explicit subjects", "x", Rule{Subjects: []string{"nope", "orders-json-value"}}, r.jsonID, nil, encoded(t, kafkaload.PayloadJSON)},
		{"allowed id", "x", Rule{IDs: []int{r.avroID}}, r.avroID, nil, avroRecord(t)},
		{"allowed format", "orders", Rule{Formats: []Format{Avro}}, r.avroID, nil, avroRecord(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := wireRecord(tt.id, tt.idx, tt.body)
			rec, err := r.Validate(ctx, tt.topic, false, payload, &tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			if rec.ID != tt.id || rec.Schema == nil || !bytes.Equal(rec.Body, tt.body) {
				t.Errorf("record = id %d, body %d bytes; want id %d, body %d bytes", rec.ID, len(rec.Body), tt.id, len(tt.body))
			}
			if (rec.Message != nil) != (tt.idx != nil) {
				t.Errorf("Message = %v, want one only for Protobuf", rec.Message)
			}
		})
	}
}

func TestValidateFailures(t *testing.T) {
	r := setup(t)
	ctx := context.Background()
	avro := avroRecord(t)
	pb := encoded(t, kafkaload.PayloadProtobuf)
	js := encoded(t, kafkaload.PayloadJSON)
	badSSN := bytes.Replace(bytes.Clone(avro), []byte("123-45-6789"), []byte("123-45-67\xff9"), 1)
	pbBadType := append(bytes.Clone(pb), protowire.AppendTag(nil, 3, protowire.Fixed32Type)...)
	pbBadType = append(pbBadType, 0, 0, 0, 0)
	jsMissing := bytes.Replace(bytes.Clone(js), []byte(`"ssn":"123-45-6789",`), nil, 1)
	tests := []struct {
		name   string
		topic  string
		isKey  bool
		rule   Rule
		record []byte
		kind   error
		msg    string
	}{
		{"no prefix", "orders", false, Rule{}, js, ErrInvalidRecord, "payload does not carry a schema id: first byte is 0x7b, want 0x00"},
		{"short payload", "orders", false, Rule{}, []byte{0, 0, 1}, ErrInvalidRecord, "payload does not carry a schema id: 3 bytes, want at least 5"},
		{"unknown id", "orders", false, Rule{}, wireRecord(99, nil, avro), ErrNotFound, "schema id 99 is not registered"},
		{"id of another subject", "orders", false, Rule{}, wireRecord(r.jsonID, nil, js), ErrNotAllowed, "schema id 3 is not registered for subject orders-value"},
		{"key subject", "orders", true, Rule{}, wireRecord(r.avroID, nil, avro), ErrNotAllowed, "schema id 1 is not registered for subject orders-key"},
		{"record name elsewhere", "orders", false, Rule{Strategy: TopicRecordName}, wireRecord(r.avroID, nil, avro), ErrNotAllowed, "schema id 1 is not registered for subject orders-dev.strait.bench.Record"},
		{"not in the subjects", "orders", false, Rule{Subjects: []string{"a", "b"}}, wireRecord(r.avroID, nil, avro), ErrNotAllowed, "schema id 1 is not registered for subject a or b"},
		{"not in the ids", "orders", false, Rule{IDs: []int{7}}, wireRecord(r.avroID, nil, avro), ErrNotAllowed, "schema id 1 is not one of the allowed ids"},
		{"format not allowed", "orders", false, Rule{Formats: []Format{JSON, Protobuf}}, wireRecord(r.avroID, nil, avro), ErrNotAllowed, "schema id 1 is AVRO, and the rule allows only JSON, PROTOBUF"},
		{"avro field", "orders", false, Rule{}, wireRecord(r.avroID, nil, badSSN), ErrInvalidRecord, `field "ssn": string is not valid UTF-8`},
		{"avro truncated", "orders", false, Rule{}, wireRecord(r.avroID, nil, avro[:500]), ErrInvalidRecord, `field "notes": string of 930 bytes but only 442 bytes left`},
		{"protobuf field", "orders-pb", false, Rule{}, wireRecord(r.protoID, []int{0}, pbBadType), ErrInvalidRecord, `field "ssn": string written as wire type fixed32 (5), want length-delimited (2)`},
		{"protobuf message index", "orders-pb", false, Rule{}, wireRecord(r.protoID, []int{3}, pb), ErrInvalidRecord, "message index path [3]: index 3 at position 0 is out of range (1 messages)"},
		{"protobuf malformed indexes", "orders-pb", false, Rule{}, append(AppendPrefix(nil, r.protoID), 0x03), ErrInvalidRecord, "malformed protobuf message indexes: negative count -2"},
		{"json field", "orders-json", false, Rule{}, wireRecord(r.jsonID, nil, jsMissing), ErrInvalidRecord, "missing property 'ssn'"},
		{"json not JSON", "orders-json", false, Rule{}, wireRecord(r.jsonID, nil, js[:10]), ErrInvalidRecord, "invalid JSON at byte 10: unterminated string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Validate(ctx, tt.topic, tt.isKey, tt.record, &tt.rule)
			if err == nil || err.Error() != tt.msg {
				t.Fatalf("Validate = %v, want %q", err, tt.msg)
			}
			for _, k := range []error{ErrNotFound, ErrUnavailable, ErrInvalidSchema, ErrNotAllowed, ErrInvalidRecord} {
				if errors.Is(err, k) != (k == tt.kind) {
					t.Errorf("errors.Is(err, %v) = %v", k, k != tt.kind)
				}
			}
		})
	}
	var e *Error
	_, err := r.Validate(ctx, "orders", false, js, &Rule{})
	if !errors.As(err, &e) || !errors.Is(err, ErrNoPrefix) {
		t.Errorf("no prefix: %v, want an *Error matching ErrNoPrefix", err)
	}
}

func TestValidateUnprefixed(t *testing.T) {
	ctx := context.Background()
	static, err := NewStatic([]Definition{
		{Subject: "events-value", Format: JSON, Text: schemas.JSONSchema},
		{Subject: "events-pb-value", Format: Protobuf, Text: schemas.Proto},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(static, Options{})
	js, err := r.SchemaByVersion(ctx, "events-value", Latest)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Validate(ctx, "events", false, encoded(t, kafkaload.PayloadJSON), &Rule{Schema: js})
	if err != nil || rec.ID != 0 || rec.Schema != js {
		t.Fatalf("plain JSON record: %+v, %v", rec, err)
	}
	dup := []byte(`{"id":"` + uuid + `","status":"A","ssn":"1","notes":"n","notes":"m"}`)
	if _, err := r.Validate(ctx, "events", false, dup, &Rule{Schema: js}); err != nil {
		t.Errorf("duplicate keys, allowed: %v", err)
	}
	_, err = r.Validate(ctx, "events", false, dup, &Rule{Schema: js, JSON: jsonschema.SyntaxOptions{RejectDuplicateKeys: true}})
	if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), `duplicate key "notes"`) {
		t.Errorf("duplicate keys, refused: %v", err)
	}
	pb, err := r.SchemaByVersion(ctx, "events-pb-value", 1)
	if err != nil {
		t.Fatal(err)
	}
	rec, err = r.Validate(ctx, "events", false, encoded(t, kafkaload.PayloadProtobuf), &Rule{Schema: pb})
	if err != nil || rec.Message == nil || rec.Message.Descriptor().Name() != "Record" {
		t.Fatalf("plain Protobuf record: %+v, %v", rec, err)
	}
	if _, err := r.Validate(ctx, "events", false, []byte{0x18, 0x01}, &Rule{Schema: pb}); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("plain Protobuf with a bad field: %v", err)
	}
	if _, err := r.Validate(ctx, "events", false, nil, &Rule{Schema: pb, Indexes: []int{4}}); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("rule naming a message the schema lacks: %v", err)
	}
}

func TestResolve(t *testing.T) {
	r := setup(t)
	ctx := context.Background()
	pb := encoded(t, kafkaload.PayloadProtobuf)
	rec, err := r.Resolve(ctx, wireRecord(r.protoID, []int{0}, pb))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Schema.Protobuf() == nil || rec.Message.Descriptor().FullName() != "strait.bench.Record" || !bytes.Equal(rec.Body, pb) {
		t.Errorf("Resolve = %+v", rec)
	}
	// Resolve does not validate the body.
	if _, err := r.Resolve(ctx, wireRecord(r.avroID, nil, []byte("garbage"))); err != nil {
		t.Errorf("Resolve of a bad body: %v", err)
	}
	if _, err := r.Resolve(ctx, []byte("{}")); !errors.Is(err, ErrNoPrefix) {
		t.Errorf("Resolve without a prefix: %v", err)
	}
	if _, err := r.Resolve(ctx, wireRecord(99, nil, nil)); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve of an unknown id: %v", err)
	}
}

func TestStatic(t *testing.T) {
	ctx := context.Background()
	s, err := NewStatic([]Definition{
		{ID: 10, Subject: "a", Format: Avro, Text: `"string"`},
		{ID: 11, Subject: "a", Format: Avro, Text: `"long"`},
		{ID: 10, Subject: "b", Version: 5, Format: Avro, Text: `"string"`},
		{Subject: "c", Format: JSON, Text: `{}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.SchemaByVersion(ctx, "a", Latest); err != nil || d.ID != 11 || d.Version != 2 {
		t.Errorf("latest of a = %+v, %v; want id 11 version 2", d, err)
	}
	if svs, err := s.SubjectVersionsByID(ctx, 10); err != nil || len(svs) != 2 || svs[0] != (SubjectVersion{"a", 1}) || svs[1] != (SubjectVersion{"b", 5}) {
		t.Errorf("subjects of 10 = %v, %v", svs, err)
	}
	if _, err := s.SchemaByID(ctx, 12); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := s.SchemaByVersion(ctx, "a", 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown version: %v", err)
	}
	_, err = NewStatic([]Definition{
		{Format: Avro, Text: `"string"`},
		{ID: 1, Format: Avro, Text: `"string"`},
		{ID: 1, Format: Avro, Text: `"long"`},
		{ID: 1, Subject: "t", Format: Avro, Text: `"string"`},
		{Subject: "s", Version: 2, Format: Avro, Text: `"long"`},
		{Subject: "s", Version: 2, Format: Avro, Text: `"int"`},
		{ID: 3},
	})
	for _, want := range []string{"schema 1: needs an id", "schema 3: id 1 is given to two different schemas", `schema 6 (subject "s"): version 2 is given twice`, "schema 7: no format"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewStatic errors = %v, want %q among them", err, want)
		}
	}
}

func TestSourcesInTurn(t *testing.T) {
	ctx := context.Background()
	static, _ := NewStatic([]Definition{{ID: 1, Subject: "s", Format: Avro, Text: `"string"`}})
	down := sourceFunc{
		byID: func(context.Context, int) (Definition, error) {
			return Definition{}, newError(ErrUnavailable, "down", nil)
		},
	}
	src := Sources{static, down}
	if d, err := src.SchemaByID(ctx, 1); err != nil || d.Text != `"string"` {
		t.Errorf("id in the first source: %+v, %v", d, err)
	}
	if _, err := src.SchemaByID(ctx, 2); !errors.Is(err, ErrUnavailable) {
		t.Errorf("id in neither, one down: %v, want ErrUnavailable", err)
	}
	if _, err := (Sources{static}).SchemaByID(ctx, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("id in none: %v, want ErrNotFound", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	protoFile := filepath.Join(dir, "record.proto")
	if err := os.WriteFile(protoFile, []byte(schemas.Proto), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFakeRegistry(t).start(t)
	f.register("remote-value", fakeSchema{Schema: schemas.Avro})
	cfg := Config{
		Registry: &RegistryConfig{URL: f.url()},
		Schemas: []SchemaConfig{
			{ID: 1000, Subject: "orders-pb-value", Type: "protobuf", File: protoFile},
			{Subject: "events-value", Type: "JSON", Schema: schemas.JSONSchema},
			{Subject: "money", Schema: `{"type":"record","name":"Money","fields":[{"name":"c","type":"long"}]}`},
			{ID: 1001, Subject: "bill", Schema: `{"type":"record","name":"Bill","fields":[{"name":"m","type":"Money"}]}`,
				References: []Reference{{Name: "Money", Subject: "money", Version: 1}}},
		},
	}
	r, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.total.Load() != 0 {
		t.Errorf("Open sent %d requests to the registry, want none", f.total.Load())
	}
	if s, err := r.SchemaByID(ctx, 1000); err != nil || s.Format != Protobuf {
		t.Errorf("file schema by id: %v, %v", s, err)
	}
	if s, err := r.SchemaByID(ctx, 1); err != nil || s.Format != Avro {
		t.Errorf("registry schema by id: %v, %v", s, err)
	}
	if _, err := r.Validate(ctx, "bill", false, wireRecord(1001, nil, []byte{0x02}), &Rule{Subjects: []string{"bill"}}); err != nil {
		t.Errorf("inline schema with an inline reference: %v", err)
	}

	broken := Config{Schemas: []SchemaConfig{{ID: 5, Type: "JSON", Schema: `{"type": 12}`}}}
	if _, err := Open(ctx, broken); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("Open with a broken inline schema: %v, want ErrInvalidSchema", err)
	}
	missing := Config{Schemas: []SchemaConfig{{ID: 5, File: filepath.Join(dir, "nope.avsc")}}}
	if _, err := Open(ctx, missing); err == nil || !strings.Contains(err.Error(), "nope.avsc") {
		t.Errorf("Open with a missing file: %v", err)
	}
	bad := Config{Schemas: []SchemaConfig{{Type: "XML", Schema: "x", File: "y"}}, Cache: CacheConfig{NotFoundTTL: -1}}
	err = bad.Validate()
	for _, want := range []string{"set schema or file, not both", `unknown schema type "XML"`, "set an id, a subject or both", "must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q among the errors", err, want)
		}
	}
	if err := (&Config{}).Validate(); err == nil {
		t.Error("empty config validates")
	}
}

func TestStrategies(t *testing.T) {
	tests := []struct {
		s     Strategy
		topic string
		key   bool
		name  string
		want  string
	}{
		{TopicName, "orders", false, "x.Y", "orders-value"},
		{TopicName, "orders", true, "x.Y", "orders-key"},
		{RecordName, "orders", true, "x.Y", "x.Y"},
		{TopicRecordName, "orders", false, "x.Y", "orders-x.Y"},
	}
	for _, tt := range tests {
		got := tt.s.Subject(tt.topic, tt.key, tt.name)
		if got != tt.want {
			t.Errorf("%v.Subject(%q, %v, %q) = %q, want %q", tt.s, tt.topic, tt.key, tt.name, got, tt.want)
		}
		if !tt.s.matches(tt.want, tt.topic, tt.key, tt.name) || tt.s.matches(tt.want+"x", tt.topic, tt.key, tt.name) {
			t.Errorf("%v.matches disagrees with Subject for %q", tt.s, tt.want)
		}
	}
	for in, want := range map[string]Strategy{"": TopicName, "topic-name": TopicName, "RecordNameStrategy": RecordName, "topic-record-name": TopicRecordName, "TopicRecordNameStrategy": TopicRecordName} {
		if got, err := ParseStrategy(in); err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseStrategy("subject"); err == nil {
		t.Error("ParseStrategy(subject) succeeds")
	}
	if TopicName.matches("orders-value", "orders-", false, "") || TopicName.matches("ordersxvalue", "orders", false, "") {
		t.Error("matches accepts a near miss")
	}
}

func TestRecordNameNeedsANamedType(t *testing.T) {
	static, _ := NewStatic([]Definition{{ID: 1, Subject: "s", Format: Avro, Text: `"string"`}})
	r := NewRegistry(static, Options{})
	_, err := r.Validate(context.Background(), "t", false, wireRecord(1, nil, []byte{2, 'x'}), &Rule{Strategy: RecordName})
	if !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), "names no record type") {
		t.Errorf("record-name strategy on a string schema: %v", err)
	}
}

func TestNonPositiveIDsAreNotLookedUp(t *testing.T) {
	r := setup(t)
	for _, id := range []int{0, -1} {
		_, err := r.Validate(context.Background(), "orders", false, wireRecord(id, nil, avroRecord(t)), &Rule{})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("id %d: %v, want ErrNotFound", id, err)
		}
	}
	if n := r.fake.total.Load(); n != 0 {
		t.Errorf("%d requests for ids below 1, want none", n)
	}
}

// A Protobuf payload written with no message-index list (as
// @kafkajs/confluent-schema-registry writes it) is read as the first
// message; the standard form still reads as before, and a body that fits
// neither reading is refused as the standard reading refuses it.
func TestProtobufWithoutIndexes(t *testing.T) {
	r := setup(t)
	ctx := context.Background()
	pb := encoded(t, kafkaload.PayloadProtobuf)
	bare := append(AppendPrefix(nil, r.protoID), pb...)
	rec, err := r.Validate(ctx, "orders-pb", false, bare, &Rule{})
	if err != nil || !bytes.Equal(rec.Body, pb) || fmt.Sprint(rec.Indexes) != "[0]" {
		t.Fatalf("no indexes: %+v, %v", rec, err)
	}
	if rec, err := r.Resolve(ctx, bare); err != nil || !bytes.Equal(rec.Body, pb) {
		t.Fatalf("Resolve with no indexes: %+v, %v", rec, err)
	}
	// All fields at their defaults: nothing after the schema id.
	if _, err := r.Validate(ctx, "orders-pb", false, AppendPrefix(nil, r.protoID), &Rule{}); err != nil {
		t.Fatalf("an empty message with no indexes: %v", err)
	}
	std := wireRecord(r.protoID, []int{0}, pb)
	if rec, err := r.Validate(ctx, "orders-pb", false, std, &Rule{}); err != nil || !bytes.Equal(rec.Body, pb) {
		t.Fatalf("standard form: %+v, %v", rec, err)
	}
	// A tag of field 1 with a broken length: neither reading holds.
	broken := append(AppendPrefix(nil, r.protoID), 0x0a, 0x7f, 'x')
	if _, err := r.Validate(ctx, "orders-pb", false, broken, &Rule{}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("broken body: %v, want ErrInvalidRecord", err)
	}
	// The subject check applies to the fallback reading too.
	if _, err := r.Validate(ctx, "orders", false, bare, &Rule{}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("no indexes, another subject: %v, want ErrNotAllowed", err)
	}
}
