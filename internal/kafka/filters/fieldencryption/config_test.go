package fieldencryption

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/schema"
)

// TestValidate makes each of Validate's errors with one bad setting of an
// otherwise good config: the message names the setting by its path and
// says what is wrong.
func TestValidate(t *testing.T) {
	k := testKMS(t, "kek")
	base := jsonConfig("ssn")
	if err := base.Validate(); err != nil {
		t.Fatalf("the base config is refused: %v", err)
	}
	value := func(fn func(p *Part)) func(c *Config) {
		return func(c *Config) { fn(c.Rules[0].Value) }
	}
	field := func(fn func(f *Field)) func(c *Config) {
		return value(func(p *Part) { fn(&p.Fields[0]) })
	}
	withSchemas := func(c *Config) {
		c.Schemas = []schema.SchemaConfig{{ID: 1, Type: "AVRO", Schema: personAvro}}
	}
	var many []Field
	for i := range maxFields + 1 {
		many = append(many, Field{Path: fmt.Sprintf("f%d", i)})
	}
	cases := []struct {
		name string
		edit func(c *Config)
		says []string
	}{
		{"no rules", func(c *Config) { c.Rules = nil }, []string{"rules: is empty"}},
		{"no topics", func(c *Config) { c.Rules[0].Topics = nil }, []string{"rules[0].topics: is empty"}},
		{"empty topic", func(c *Config) { c.Rules[0].Topics = []string{"pii", ""} }, []string{"rules[0].topics[1]: is empty"}},
		{"bad glob", func(c *Config) { c.Rules[0].Topics = []string{"pii-["} }, []string{"rules[0].topics[0]: ", "is not a valid glob"}},
		{"no part", func(c *Config) { c.Rules[0].Value = nil }, []string{"rules[0]: encrypts nothing"}},
		{"rule kek placeholder", func(c *Config) { c.Rules[0].KEK = "{tenant}-kek" }, []string{"rules[0].kek: ", "placeholder other than {topic}"}},
		{"rule kek too long", func(c *Config) { c.Rules[0].KEK = strings.Repeat("k", maxNameLen+1) }, []string{"rules[0].kek: ", "is 256 bytes long", "at most 255"}},
		{"no format", value(func(p *Part) { p.Format = "" }), []string{"rules[0].value.format: is empty"}},
		{"bad format", value(func(p *Part) { p.Format = "xml" }), []string{`rules[0].value.format: "xml" is not a format`}},
		{"key format", func(c *Config) { c.Rules[0].Key = &Part{Format: "yaml", Fields: []Field{{Path: "id"}}} }, []string{`rules[0].key.format: "yaml" is not a format`}},
		{"no field", value(func(p *Part) { p.Fields = nil }), []string{"rules[0].value: selects no field"}},
		{"too many fields", value(func(p *Part) { p.Fields = many }), []string{"rules[0].value.fields: 65 fields: at most 64"}},
		{"empty tag", func(c *Config) { withSchemas(c); c.Rules[0].Value.Tags = []string{"PII", " "} }, []string{"rules[0].value.tags[1]: is empty"}},
		{"bad path", field(func(f *Field) { f.Path = "a..b" }), []string{"rules[0].value.fields[0].path: "}},
		{"empty path", field(func(f *Field) { f.Path = "" }), []string{"rules[0].value.fields[0].path: "}},
		{"path twice", value(func(p *Part) { p.Fields = append(p.Fields, Field{Path: "ssn"}) }), []string{`rules[0].value.fields[1].path: "ssn" is listed twice`}},
		{"field kek placeholder", field(func(f *Field) { f.KEK = "{x}" }), []string{"rules[0].value.fields[0].kek: ", "placeholder other than {topic}"}},
		{"no kek", func(c *Config) { c.Rules[0].KEK = "" }, []string{"rules[0].value.fields[0].kek: no KEK"}},
		{"bad mode", field(func(f *Field) { f.Mode = "ecb" }), []string{`rules[0].value.fields[0].mode: "ecb" is not a mode`}},
		{"optional avro", func(c *Config) {
			withSchemas(c)
			c.Rules[0].Value.Format = formatAvro
			c.Rules[0].Value.Fields[0].Optional = true
		}, []string{"rules[0].value.fields[0].optional: applies to JSON only"}},
		{"tags without kek", func(c *Config) {
			withSchemas(c)
			c.Rules[0].KEK = ""
			c.Rules[0].Value.Fields[0].KEK = "kek"
			c.Rules[0].Value.Tags = []string{"PII"}
		}, []string{"rules[0].value.tags: fields selected by tag use the rule's kek"}},
		{"empty principal", func(c *Config) { c.Rules[0].Fetch.DecryptFor = []string{"alice", ""} }, []string{"rules[0].fetch.decrypt_for[1]: is empty"}},
		{"bad others", func(c *Config) { c.Rules[0].Fetch.Others = "drop" }, []string{`rules[0].fetch.others: "drop" is not an outcome`}},
		{"redact_with quote", func(c *Config) {
			c.Rules = append(c.Rules, c.Rules[0])
			c.Rules[1].Value = &Part{Format: formatJSON, Fields: []Field{{Path: "id"}, {Path: "ssn", RedactWith: `"x"`}}}
			c.Rules[1].Fetch.Others = othersRedact
		}, []string{"rules[1].value.fields[1].redact_with: holds a quote"}},
		{"registry not set", value(func(p *Part) { p.Format = formatAvro }), []string{"registry: is not set", "format avro, protobuf or auto"}},
		{"registry not set for tags", value(func(p *Part) { p.Tags = []string{"PII"} }), []string{"registry: is not set"}},
		{"schema entry", func(c *Config) {
			c.Rules[0].Value.Format = formatAvro
			c.Schemas = []schema.SchemaConfig{{ID: 1, Type: "AVRO"}}
		}, []string{"schemas[0]: set schema or file"}},
		{"max records", func(c *Config) { c.DEK.MaxRecords = MaxRecordsLimit + 1 }, []string{"dek.max_records: 4294967297 is over the limit"}},
		{"negative max age", func(c *Config) { c.DEK.MaxAge = -time.Second }, []string{"dek.max_age: -1s is negative"}},
		{"tiny max age", func(c *Config) { c.DEK.MaxAge = 10 * time.Millisecond }, []string{"dek.max_age: 10ms is under a second"}},
		{"negative lookup timeout", func(c *Config) { c.LookupTimeout = -time.Second }, []string{"lookup_timeout: -1s is negative"}},
		{"decompression limit", func(c *Config) { c.MaxBatchBytes = -1 }, []string{"max_batch_bytes: -1 is negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := jsonConfig("ssn")
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if _, nerr := New(cfg, k); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New: %v, want Validate's error", nerr)
			}
		})
	}
}

// TestValidateAll: every problem is reported at once.
func TestValidateAll(t *testing.T) {
	cfg := jsonConfig("ssn")
	cfg.Rules[0].Topics = nil
	cfg.Rules[0].Fetch.Others = "drop"
	cfg.LookupTimeout = -1
	err := cfg.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 3 {
		t.Errorf("got %v, want three errors", err)
	}
}
