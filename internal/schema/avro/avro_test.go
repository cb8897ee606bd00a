package avro

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	hamba "github.com/hamba/avro/v2"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
)

const uuid = "0b4c8f4e-3a7d-4c52-9a51-2f4f1e8d6b10"

func reference(t testing.TB) (*Schema, []byte) {
	t.Helper()
	s, err := Compile(schemas.Avro, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kafkaload.EncodeRecord(kafkaload.PayloadAvro, kafkaload.ReferenceRecord(uuid))
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

func TestReferenceRecord(t *testing.T) {
	s, b := reference(t)
	if err := s.Validate(b); err != nil {
		t.Fatalf("reference record: %v", err)
	}
	if got, want := s.FullName(), "dev.strait.bench.Record"; got != want {
		t.Errorf("FullName = %q, want %q", got, want)
	}
	if s.Avro().Type() != hamba.Record {
		t.Errorf("Avro().Type() = %v, want record", s.Avro().Type())
	}
}

// encodeStrings writes the reference record's four strings as Avro does,
// with the raw bytes given, so tests can break one field at a time.
func encodeStrings(fields ...[]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = appendLong(b, int64(len(f)))
		b = append(b, f...)
	}
	return b
}

func appendLong(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

func TestReferenceRecordMutations(t *testing.T) {
	s, valid := reference(t)
	id, status, ssn, notes := []byte(uuid), []byte("ACTIVE"), []byte("123-45-6789"), []byte(strings.Repeat("n", 930))
	tests := []struct {
		name    string
		payload []byte
		field   string
		reason  string
	}{
		{"truncated in notes", valid[:len(valid)-10], "notes", "string of 930 bytes but only 920 bytes left"},
		{"invalid UTF-8 in ssn", encodeStrings(id, status, []byte{'1', 0xff, '3'}, notes), "ssn", "string is not valid UTF-8"},
		{"negative length of status", append(appendLong(encodeStrings(id), -3), 'x'), "status", "string length is negative"},
		{"missing notes", encodeStrings(id, status, ssn), "notes", "string length: truncated"},
		{"trailing bytes", append(bytes.Clone(valid), 0, 0), "", "2 bytes after the end of the record"},
		{"overlong varint", append(encodeStrings(id), bytes.Repeat([]byte{0xff}, 11)...), "status", "string length: varint longer than 10 bytes"},
		{"empty", nil, "id", "string length: truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(tt.payload)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Validate = %v, want an *Error", err)
			}
			if e.Field != tt.field || e.Reason != tt.reason {
				t.Errorf("got field %q reason %q, want field %q reason %q", e.Field, e.Reason, tt.field, tt.reason)
			}
			if tt.field != "" && !strings.Contains(err.Error(), `field "`+tt.field+`"`) {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
}

const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "paid", "type": "boolean"},
    {"name": "price", "type": "double"},
    {"name": "weight", "type": "float"},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "raw", "type": "bytes"},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "items", "type": {"type": "array", "items": {
      "type": "record", "name": "Item", "fields": [
        {"name": "sku", "type": "string"},
        {"name": "tags", "type": {"type": "map", "values": "int"}}
      ]}}},
    {"name": "parent", "type": ["null", "Order"], "default": null}
  ]
}`

type item struct {
	SKU  string         `avro:"sku"`
	Tags map[string]int `avro:"tags"`
}

type order struct {
	ID     int64   `avro:"id"`
	Qty    int32   `avro:"qty"`
	Paid   bool    `avro:"paid"`
	Price  float64 `avro:"price"`
	Weight float32 `avro:"weight"`
	State  string  `avro:"state"`
	Digest [4]byte `avro:"digest"`
	Raw    []byte  `avro:"raw"`
	Note   *string `avro:"note"`
	Items  []item  `avro:"items"`
	Parent *order  `avro:"parent"`
}

func sampleOrder() order {
	note := "leave at the door"
	return order{
		ID: 42, Qty: 3, Paid: true, Price: 9.5, Weight: 1.25, State: "PAID",
		Digest: [4]byte{1, 2, 3, 4}, Raw: []byte{0, 1}, Note: &note,
		Items:  []item{{SKU: "a-1", Tags: map[string]int{"x": 1}}, {SKU: "b-2", Tags: map[string]int{}}},
		Parent: &order{ID: 41, State: "NEW", Items: []item{}},
	}
}

func TestComplexSchema(t *testing.T) {
	s, err := Compile(orderSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	valid, err := hamba.Marshal(s.Avro(), sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(valid); err != nil {
		t.Fatalf("valid order: %v", err)
	}
	// Offsets of the fixed-size prefix: id (42 → 1 byte), qty (1), paid
	// (1), price (8), weight (4), state (1), digest (4).
	const paidAt, stateAt = 2, 15
	mutate := func(at int, v byte) []byte {
		b := bytes.Clone(valid)
		b[at] = v
		return b
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"boolean not 0 or 1", mutate(paidAt, 2), `field "paid": boolean byte is 2, want 0 or 1`},
		{"enum index out of range", mutate(stateAt, 6), `field "state": enum shop.State: symbol index 3 out of range [0, 3)`},
		{"int out of range", append(appendLong([]byte{84}, 1<<40), valid[2:]...), `field "qty": int: value out of the 32-bit range`},
		{"truncated in the digest", valid[:18], `field "digest": fixed shop.Digest of 4 bytes but only 2 bytes left`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(tt.payload)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}

	// Every strict prefix of a valid datum fails: a reader that gets a
	// record split in two must not accept the first half.
	for i := range len(valid) {
		if s.Validate(valid[:i]) == nil {
			t.Fatalf("prefix of %d of %d bytes validates", i, len(valid))
		}
	}
}

func TestNestedPaths(t *testing.T) {
	s, err := Compile(orderSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := sampleOrder()
	o.Items[1].SKU = "\x00marker"
	valid, err := hamba.Marshal(s.Avro(), o)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(valid, []byte("\x00marker"))
	bad := bytes.Clone(valid)
	bad[i] = 0xff // invalid UTF-8
	err = s.Validate(bad)
	if want := `field "items[1].sku": string is not valid UTF-8`; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}

	// The same in the recursive parent's items.
	o = sampleOrder()
	o.Parent.Items = []item{{SKU: "\x00marker", Tags: map[string]int{}}}
	valid, err = hamba.Marshal(s.Avro(), o)
	if err != nil {
		t.Fatal(err)
	}
	i = bytes.LastIndex(valid, []byte("\x00marker"))
	bad = bytes.Clone(valid)
	bad[i] = 0xff
	err = s.Validate(bad)
	if want := `field "parent.items[0].sku": string is not valid UTF-8`; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
}

func TestBlocks(t *testing.T) {
	s, err := Compile(`{"type":"array","items":"null"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		payload []byte
		ok      bool
	}{
		{"empty array", []byte{0}, true},
		{"three nulls", []byte{6, 0}, true},
		{"negative count with size", []byte{5, 0, 0}, true}, // -3 items, 0 bytes
		{"huge count of nulls", append(appendLong(nil, 1<<40), 0), false},
		{"no end", []byte{6}, false},
		{"size past the end", []byte{5, 20}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Validate(tt.payload); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
	m, err := Compile(`{"type":"map","values":"long"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate([]byte{2, 2, 'k', 4, 0}); err != nil {
		t.Errorf("map {k: 2}: %v", err)
	}
	if err := m.Validate([]byte{2, 2, 0xff, 4, 0}); err == nil || err.Error() != `field "[0]": map key is not valid UTF-8` {
		t.Errorf("map with a bad key: %v", err)
	}
	if err := m.Validate(append(appendLong(nil, 1000), 2, 'k', 4)); err == nil {
		t.Error("map block of 1000 entries in 3 bytes validates")
	}
}

func TestReferences(t *testing.T) {
	money := `{"type":"record","name":"Money","namespace":"common","fields":[{"name":"cents","type":"long"},{"name":"currency","type":"string"}]}`
	invoice := `{"type":"record","name":"Invoice","namespace":"billing","fields":[{"name":"total","type":"common.Money"}]}`
	if _, err := Compile(invoice, nil); err == nil {
		t.Fatal("a schema naming an unknown type compiles")
	}
	s, err := Compile(invoice, []Reference{{Name: "common.Money", Text: money}})
	if err != nil {
		t.Fatal(err)
	}
	b := append(appendLong(nil, 1999), encodeStrings([]byte("EUR"))...)
	if err := s.Validate(b); err != nil {
		t.Errorf("invoice: %v", err)
	}
	if err := s.Validate(append(appendLong(nil, 1999), 6, 'E')); err == nil || !strings.Contains(err.Error(), `field "total.currency"`) {
		t.Errorf("truncated invoice: %v, want a fault in total.currency", err)
	}
	if _, err := Compile(invoice, []Reference{{Name: "common.Money", Text: `{"type":`}}); err == nil || !strings.Contains(err.Error(), `avro reference "common.Money"`) {
		t.Errorf("broken reference: %v", err)
	}
}

func TestUnnamedTopLevel(t *testing.T) {
	s, err := Compile(`"string"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.FullName() != "" {
		t.Errorf("FullName of a string schema = %q, want empty", s.FullName())
	}
	if err := s.Validate([]byte{4, 'h', 'i'}); err != nil {
		t.Error(err)
	}
}
