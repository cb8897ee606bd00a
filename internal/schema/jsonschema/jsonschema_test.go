package jsonschema

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
)

const uuid = "0b4c8f4e-3a7d-4c52-9a51-2f4f1e8d6b10"

func referenceJSON(t testing.TB) []byte {
	t.Helper()
	b, err := kafkaload.EncodeRecord(kafkaload.PayloadJSON, kafkaload.ReferenceRecord(uuid))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compile(t testing.TB, text string, refs ...Reference) *Schema {
	t.Helper()
	s, err := Compile(text, refs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReferenceRecord(t *testing.T) {
	s := compile(t, schemas.JSONSchema)
	if s.Title() != "Record" {
		t.Errorf("Title = %q, want Record", s.Title())
	}
	if s.Compiled() == nil {
		t.Error("Compiled() is nil")
	}
	valid := referenceJSON(t)
	if err := s.Validate(valid, SyntaxOptions{}); err != nil {
		t.Fatalf("reference record: %v", err)
	}
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"ssn missing", mutate(func(m map[string]any) { delete(m, "ssn") }), `missing property 'ssn'`},
		{"ssn a number", mutate(func(m map[string]any) { m["ssn"] = 123456789 }), `field "ssn": got number, want string`},
		{"id too short", mutate(func(m map[string]any) { m["id"] = "abc" }), `field "id": minLength: got 3, want 36`},
		{"extra field", mutate(func(m map[string]any) { m["extra"] = 1 }), `additional properties 'extra' not allowed`},
		{"not an object", []byte(`[1]`), `got array, want object`},
		{"not JSON", valid[:100], "invalid JSON at byte 100: unterminated string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(tt.payload, SyntaxOptions{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	dup := []byte(`{"id":"` + uuid + `","status":"A","ssn":"1","notes":"n","ssn":"2"}`)
	if err := s.Validate(dup, SyntaxOptions{}); err != nil {
		t.Errorf("duplicate key, allowed: %v", err)
	}
	if err := s.Validate(dup, SyntaxOptions{RejectDuplicateKeys: true}); err == nil || !strings.Contains(err.Error(), `duplicate key "ssn"`) {
		t.Errorf("duplicate key, refused: %v", err)
	}
}

func TestMessagesHideValues(t *testing.T) {
	s := compile(t, `{"type":"object","properties":{"ssn":{"type":"string","pattern":"^[0-9]{3}-[0-9]{2}-[0-9]{4}$"},"mail":{"type":"string","format":"email"}}}`)
	err := s.Validate([]byte(`{"ssn":"secret-value"}`), SyntaxOptions{})
	if err == nil || strings.Contains(err.Error(), "secret-value") || !strings.Contains(err.Error(), `field "ssn": does not match pattern`) {
		t.Errorf("pattern failure: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Field != "ssn" {
		t.Errorf("error %#v, want an *Error for field ssn", err)
	}
}

func TestNestedPath(t *testing.T) {
	s := compile(t, `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}}}}}}`)
	err := s.Validate([]byte(`{"items":[{"sku":"a"},{"sku":5}]}`), SyntaxOptions{})
	if want := `field "items[1].sku": got number, want string`; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
}

func TestDrafts(t *testing.T) {
	drafts := map[string]string{
		"4":       "http://json-schema.org/draft-04/schema#",
		"6":       "http://json-schema.org/draft-06/schema#",
		"7":       "http://json-schema.org/draft-07/schema#",
		"2019-09": "https://json-schema.org/draft/2019-09/schema",
		"2020-12": "https://json-schema.org/draft/2020-12/schema",
	}
	for name, uri := range drafts {
		t.Run(name, func(t *testing.T) {
			s := compile(t, `{"$schema":"`+uri+`","type":"object","properties":{"n":{"type":"integer","maximum":5}},"required":["n"]}`)
			if err := s.Validate([]byte(`{"n":3}`), SyntaxOptions{}); err != nil {
				t.Errorf("valid: %v", err)
			}
			if err := s.Validate([]byte(`{"n":7}`), SyntaxOptions{}); err == nil {
				t.Error("n=7 over the maximum validates")
			}
		})
	}
	// Draft 4's boolean exclusiveMaximum means it is draft 4 that ran.
	s := compile(t, `{"$schema":"http://json-schema.org/draft-04/schema#","maximum":5,"exclusiveMaximum":true}`)
	if err := s.Validate([]byte(`5`), SyntaxOptions{}); err == nil {
		t.Error("draft 4 exclusiveMaximum: 5 validates")
	}
}

func TestReferences(t *testing.T) {
	address := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	customer := `{"type":"object","properties":{"name":{"type":"string"},"address":{"$ref":"address.json"}}}`
	order := `{"type":"object","properties":{"customer":{"$ref":"customer.json"}}}`
	refs := []Reference{{Name: "address.json", Text: address}, {Name: "customer.json", Text: customer}}
	s := compile(t, order, refs...)
	if err := s.Validate([]byte(`{"customer":{"name":"a","address":{"city":"x"}}}`), SyntaxOptions{}); err != nil {
		t.Errorf("valid order: %v", err)
	}
	err := s.Validate([]byte(`{"customer":{"name":"a","address":{}}}`), SyntaxOptions{})
	if want := `field "customer.address": missing property 'city'`; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}

	// A schema with an absolute $id resolves relative names against it,
	// and absolute reference names are taken as they are.
	withID := `{"$id":"https://example.com/schemas/order.json","type":"object","properties":{"customer":{"$ref":"customer.json"},"note":{"$ref":"https://example.com/common/note.json"}}}`
	s = compile(t, withID, append(refs, Reference{Name: "https://example.com/common/note.json", Text: `{"type":"string","maxLength":3}`})...)
	if err := s.Validate([]byte(`{"customer":{"address":{"city":"x"}},"note":"abc"}`), SyntaxOptions{}); err != nil {
		t.Errorf("valid order with $id: %v", err)
	}
	if err := s.Validate([]byte(`{"note":"abcd"}`), SyntaxOptions{}); err == nil {
		t.Error("a note over maxLength validates")
	}

	if _, err := Compile(order, nil); err == nil || !strings.Contains(err.Error(), "customer.json") {
		t.Errorf("missing reference: %v", err)
	}
}

func TestNoLoading(t *testing.T) {
	if _, err := Compile(`{"$schema":"https://example.com/custom-meta"}`, nil); err == nil {
		t.Error("a schema with an unknown meta-schema compiles")
	}
	for _, ref := range []string{"file:///etc/hostname", "/etc/hostname", "http://127.0.0.1:1/x.json"} {
		_, err := Compile(`{"$ref":"`+ref+`"}`, nil)
		if err == nil {
			t.Errorf("a $ref to %s compiles", ref)
		}
	}
}

func BenchmarkValidateReference(b *testing.B) {
	s := compile(b, schemas.JSONSchema)
	rec := referenceJSON(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(rec, SyntaxOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTagged(t *testing.T) {
	s, err := Compile(`{
	  "type": "object",
	  "properties": {
	    "ssn": {"type": "string", "confluent:tags": ["PII"]},
	    "age": {"type": "integer", "confluent:tags": ["PII"]},
	    "note": {"type": "string", "confluent:tags": ["OTHER"]},
	    "customer": {"type": "object", "properties": {
	      "email": {"type": ["string", "null"], "confluent:tags": ["PII", "X"]}
	    }},
	    "cards": {"type": "array", "items": {"type": "object", "properties": {
	      "number": {"type": "string", "confluent:tags": ["PII"]}
	    }}}
	  }
	}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Tagged("PII")
	want := []string{"cards[*].number", "customer.email", "ssn"}
	if !slices.Equal(got, want) {
		t.Errorf("Tagged(PII) = %q, want %q (age is an integer: it cannot hold ciphertext)", got, want)
	}
	if got := s.Tagged("NONE"); len(got) != 0 {
		t.Errorf("Tagged(NONE) = %q, want none", got)
	}
}
