package fieldencryption

import (
	"strings"
	"testing"
)

// TestNewChecksStaticSchemas gives New a config whose schemas (written in
// it) lack a configured path, or have a field that cannot hold ciphertext
// there: it fails at start, naming the rule, the schema id and the field.
func TestNewChecksStaticSchemas(t *testing.T) {
	k := testKMS(t, "kek")
	cases := []struct {
		name   string
		format string
		path   string
		says   []string
	}{
		{"avro lacks the path", formatAvro, "tax_id", []string{"rules[0].value: schema id 1: ", `"tax_id"`}},
		{"avro int", formatAvro, "born", []string{"rules[0].value: schema id 1: ", `"born"`, "int"}},
		{"avro path through a string", formatAuto, "addresses[*].zip.x", []string{"rules[0].value: schema id 1: ", `"addresses[*].zip.x"`}},
		{"protobuf lacks the path", formatProtobuf, "tax_id", []string{"rules[0].value: schema id 2: ", `"tax_id"`, "has no field"}},
		{"protobuf int", formatProtobuf, "scores[*]", []string{"rules[0].value: schema id 2: ", `"scores[*]"`, "int64"}},
		{"auto, both", formatAuto, "tax_id", []string{"rules[0].value: schema id 1: ", "rules[0].value: schema id 2: ", `"tax_id"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(schemaRule(tc.format, tc.path), k)
			if err == nil {
				t.Fatal("New accepted a path the schema cannot encrypt")
			}
			t.Log(err)
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	// A path each schema has is accepted, and so is one of a format
	// the rule does not read.
	for _, format := range []string{formatAvro, formatProtobuf, formatAuto} {
		if _, err := New(schemaRule(format, "ssn"), k); err != nil {
			t.Errorf("%s, ssn: %v", format, err)
		}
	}
	if _, err := New(schemaRule(formatAvro, "balance2"), k); err == nil || strings.Contains(err.Error(), "schema id 2") {
		t.Errorf("an avro rule was checked against the protobuf schema: %v", err)
	}
}
