package fieldencryption

import (
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/schema"
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

// TestNewChecksSchemasPerRule: with several rules, a schema written in the
// config need fit only one rule of its format (a schema for another rule's
// topics is no error), unless its subject says which topic it is for:
// then it must fit every rule selecting that topic.
func TestNewChecksSchemasPerRule(t *testing.T) {
	k := testKMS(t, "kek")
	two := func(subject string) Config {
		cfg := schemaConfig()
		cfg.Schemas = append(cfg.Schemas, schema.SchemaConfig{ID: 4, Type: "AVRO", Subject: subject,
			Schema: `{"type":"record","name":"Order","fields":[{"name":"note","type":"string"}]}`})
		cfg.Rules = []Rule{
			{Topics: []string{"pii*"}, KEK: "kek", Value: &Part{Format: formatAvro, Fields: []Field{{Path: "ssn"}}}},
			{Topics: []string{"orders*"}, KEK: "kek", Value: &Part{Format: formatAvro, Fields: []Field{{Path: "note"}}}},
		}
		return cfg
	}
	if _, err := New(two(""), k); err != nil {
		t.Errorf("each schema fits one of two rules, yet New failed: %v", err)
	}
	if _, err := New(two("orders-value"), k); err != nil {
		t.Errorf("schema 4 under orders-value fits the orders rule, yet New failed: %v", err)
	}
	_, err := New(two("pii-x-value"), k)
	if err == nil || !strings.Contains(err.Error(), "rules[0].value: schema id 4") || !strings.Contains(err.Error(), `"ssn"`) {
		t.Errorf("schema 4 under pii-x-value lacks ssn, which the pii rule encrypts: New said %v", err)
	}
}
