package jsonschema

import (
	"testing"

	"github.com/straitgw/strait/bench/schemas"
)

// fastValid runs the fast path alone.
func fastValid(s *Schema, b []byte, opts SyntaxOptions) bool {
	if s.fast == nil {
		return false
	}
	d := decoder{b: b, dupes: opts.RejectDuplicateKeys}
	d.space()
	if !d.fast(s.fast) {
		return false
	}
	d.space()
	return d.pos == len(b)
}

// general runs the general path alone.
func general(s *Schema, b []byte, opts SyntaxOptions) error {
	v, err := Decode(b, opts)
	if err != nil {
		return err
	}
	return s.ValidateValue(v)
}

// richSchema uses every keyword the fast path supports.
const richSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Order",
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 1, "exclusiveMaximum": 1000000},
    "sku": {"type": "string", "pattern": "^[a-z]+-[0-9]+$", "minLength": 3, "maxLength": 12},
    "state": {"enum": ["NEW", "PAID"]},
    "kind": {"const": "order"},
    "price": {"type": ["number", "null"], "maximum": 99.5, "exclusiveMinimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    "meta": {"type": "object", "additionalProperties": {"type": "boolean"}, "minProperties": 1, "maxProperties": 2},
    "note": true,
    "never": false,
    "created": {"type": "string", "format": "date-time"}
  },
  "required": ["id", "sku", "extra"],
  "additionalProperties": {"type": ["string", "number"]}
}`

func TestFastPathTaken(t *testing.T) {
	ref := compile(t, schemas.JSONSchema)
	if !fastValid(ref, referenceJSON(t), SyntaxOptions{}) {
		t.Fatal("the reference record does not take the fast path")
	}
	if !fastValid(ref, referenceJSON(t), SyntaxOptions{RejectDuplicateKeys: true}) {
		t.Fatal("the reference record does not take the fast path with duplicates refused")
	}
	rich := compile(t, richSchema)
	if rich.fast == nil {
		t.Fatal("the rich schema has no fast path")
	}
	valid := `{"id": 7, "sku": "ab-12", "state": "PAID", "kind": "order", "price": 9.5, "tags": ["x"], "extra": "e", "created": "not a date: an annotation in 2020-12"}`
	if !fastValid(rich, []byte(valid), SyntaxOptions{}) {
		t.Errorf("%s does not take the fast path", valid)
	}
	if err := rich.Validate([]byte(valid), SyntaxOptions{}); err != nil {
		t.Errorf("Validate(%s) = %v", valid, err)
	}
	for _, unsupported := range []string{
		`{"$ref": "#/$defs/a", "$defs": {"a": {}}}`,
		`{"allOf": [{}]}`,
		`{"properties": {"a": {"format": "email"}}}`, // draft 7 asserts formats
		`{"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 3, "exclusiveMaximum": true}`,
		`{"items": [{"type": "string"}]}`,
		`{"enum": [1, 2]}`,
	} {
		if s := compile(t, unsupported); s.fast != nil {
			t.Errorf("%s has a fast path, want none", unsupported)
		}
	}
}

func TestFastPathDoubts(t *testing.T) {
	rich := compile(t, richSchema)
	// Each of these is left to the general path, whatever its outcome.
	for _, doc := range []string{
		`{"id": 1.0, "sku": "ab-12", "extra": 1}`,     // an integer written with a fraction
		`{"id": 1000000, "sku": "ab-12", "extra": 1}`, // exactly on an exclusive bound
		`{"id": 1, "sku": "ab-12", "extra": 1}`,       // exactly on an inclusive bound
		`{"id": 5, "sku": "ab-12", "extra": 1, "meta": {"a": true}}`,
		`{"id": 5, "sku": "ab-12"}`,
		`{"id": 5, "sku": "ab-12", "extra": 1, "never": 1}`,
	} {
		if fastValid(rich, []byte(doc), SyntaxOptions{}) {
			t.Errorf("%s takes the fast path, want the general one", doc)
		}
		fastErr := rich.Validate([]byte(doc), SyntaxOptions{})
		if genErr := general(rich, []byte(doc), SyntaxOptions{}); (fastErr == nil) != (genErr == nil) {
			t.Errorf("%s: Validate = %v, general path = %v", doc, fastErr, genErr)
		}
	}
}

// FuzzFastPath is the differential test of the fast path: whatever it
// accepts, the general path (decode, then the library's validator)
// accepts too. Validate's answer is always the general path's.
func FuzzFastPath(f *testing.F) {
	ref := compile(f, schemas.JSONSchema)
	rich := compile(f, richSchema)
	f.Add([]byte(`{"id": 7, "sku": "ab-12", "state": "PAID", "kind": "order", "price": 9.5, "tags": ["x"], "extra": "e"}`), false)
	f.Add([]byte(`{"id": 7, "sku": "ab-12", "meta": {"a": true, "b": false}, "extra": 2, "note": [1, {"x": null}]}`), true)
	f.Add([]byte(`{"id": 99.99999999999, "sku": "\u0061b-1", "extra": -0.0}`), false)
	f.Add(referenceJSON(f), false)
	f.Add([]byte(`{"id":"0b4c8f4e-3a7d-4c52-9a51-2f4f1e8d6b10","status":"A","ssn":"1","notes":"n","ssn":2}`), true)
	f.Fuzz(func(t *testing.T, b []byte, dupes bool) {
		opts := SyntaxOptions{RejectDuplicateKeys: dupes}
		for _, s := range []*Schema{ref, rich} {
			genErr := general(s, b, opts)
			if fastValid(s, b, opts) && genErr != nil {
				t.Fatalf("fast path accepts %q, the general path says %v", b, genErr)
			}
			if err := s.Validate(b, opts); (err == nil) != (genErr == nil) {
				t.Fatalf("Validate(%q) = %v, general path = %v", b, err, genErr)
			}
		}
	})
}

// BenchmarkGeneralPath is what a record costs when the fast path cannot
// decide: decoding, then the library's validator.
func BenchmarkGeneralPath(b *testing.B) {
	s := compile(b, schemas.JSONSchema)
	rec := referenceJSON(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := general(s, rec, SyntaxOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
