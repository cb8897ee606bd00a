package validation

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/topicsel"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/jsonschema"
)

// Config is the filter's config block (the `config:` of a
// `record-validation` filter entry).
type Config struct {
	// Where schemas come from: `registry`, `schemas` and `cache`, as the
	// schema layer reads them. Needed only when a rule checks schemas.
	schema.Config `yaml:",inline"`
	// Rules say what the records of each topic must be. For a topic, the
	// first rule whose topics match applies; a topic no rule matches
	// passes unchecked.
	Rules []Rule `yaml:"rules"`
	// LookupTimeout bounds how long a produce request waits for the
	// registry, all its lookups together; while it waits, the
	// connection's later requests wait too. Past it the partitions that
	// needed the registry are refused with a retriable error. Default 10 s.
	LookupTimeout time.Duration `yaml:"lookup_timeout"`
	// Decompression limits, shared with every filter that reads
	// compressed batches: max_batch_bytes, max_compression_ratio,
	// decompression_budget.
	recordbatch.Limits `yaml:",inline"`
}

// Rule is what the records of some topics must be.
type Rule struct {
	// Topics selects the topics: exact names, prefixes ("orders*") or
	// globs ("*-events", "team-?-orders").
	Topics []string `yaml:"topics"`
	// Mode is reject (the default: a batch with an invalid record is
	// refused) or warn (it is forwarded; the record is counted and
	// logged).
	Mode string `yaml:"mode"`
	// Key and Value are the checks of each part of a record; a part
	// without one is not checked.
	Key   *PartRule `yaml:"key"`
	Value *PartRule `yaml:"value"`
}

// PartRule is what a record's key or value must be.
type PartRule struct {
	// JSON: the payload is a JSON text (no wire-format prefix).
	JSON *JSONRule `yaml:"json"`
	// Schema: the payload carries the Confluent wire-format prefix, its
	// schema id is allowed, and it validates against that schema.
	Schema *SchemaRule `yaml:"schema"`
	// AllowNull lets a null payload through (a keyless record, a
	// tombstone). Default true.
	AllowNull *bool `yaml:"allow_null"`
	// AllowEmpty lets a zero-length payload through unchecked. Default
	// false when json or schema is set (an empty payload is neither JSON
	// nor prefixed), true otherwise.
	AllowEmpty *bool `yaml:"allow_empty"`
	// MaxBytes bounds the payload's size; 0 means no bound.
	MaxBytes int `yaml:"max_bytes"`
}

// JSONRule tightens JSON syntax.
type JSONRule struct {
	// DuplicateKeys is allow (the default: JSON permits them) or reject
	// (an object naming a key twice is refused: readers disagree on
	// which value wins).
	DuplicateKeys string `yaml:"duplicate_keys"`
}

// SchemaRule is a schema check: which schema ids a payload may carry.
type SchemaRule struct {
	// Strategy names the subject the id must be registered under:
	// topic-name (the default: <topic>-key or <topic>-value),
	// record-name or topic-record-name.
	Strategy string `yaml:"strategy"`
	// Subjects, if set, replace the strategy: the id must be registered
	// under one of them.
	Subjects []string `yaml:"subjects"`
	// IDs are schema ids allowed as they are. With subjects unset, only
	// these are allowed.
	IDs []int `yaml:"ids"`
	// Formats, if set, are the only schema formats allowed: avro,
	// protobuf, json.
	Formats []string `yaml:"formats"`
	// JSON tightens the syntax of JSON Schema payloads.
	JSON *JSONRule `yaml:"json"`
}

// Defaults and bounds.
const (
	DefaultLookupTimeout = 10 * time.Second
	// maxRecordErrors bounds the record errors one refused partition
	// lists; past it, the rest of the batch is not checked.
	maxRecordErrors = 100

	modeReject = "reject"
	modeWarn   = "warn"

	dupAllow  = "allow"
	dupReject = "reject"
)

// Validate reports every problem of the config at once, each naming the
// setting by its path and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Rules) == 0 {
		bad(`rules: is empty: add a rule, e.g. rules: [{topics: ["orders*"], value: {schema: {strategy: topic-name}}}]`)
	}
	needSchemas := false
	for i, r := range c.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		if len(r.Topics) == 0 {
			bad(`%s.topics: is empty: list the topics the rule is for, e.g. topics: ["orders*"]`, at)
		}
		for j, t := range r.Topics {
			if err := topicsel.Check(t, "orders*"); err != nil {
				bad("%s.topics[%d]: %v", at, j, err)
			}
		}
		switch r.Mode {
		case "", modeReject, modeWarn:
		default:
			bad("%s.mode: %q is not a mode: use reject (refuse a batch with an invalid record, the default) or warn (forward it, count and log)", at, r.Mode)
		}
		if r.Key == nil && r.Value == nil {
			bad("%s: checks nothing: give it a key or a value rule, e.g. value: {json: {}}", at)
		}
		for _, p := range []struct {
			name string
			rule *PartRule
		}{{"key", r.Key}, {"value", r.Value}} {
			if p.rule == nil {
				continue
			}
			errs = append(errs, p.rule.validate(at+"."+p.name)...)
			needSchemas = needSchemas || p.rule.Schema != nil
		}
	}
	// Where schemas come from is checked when a rule uses it, and when it
	// is set though no rule does: a mistake in it is still one.
	if needSchemas || c.Registry != nil || len(c.Schemas) > 0 {
		if err := c.Config.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.LookupTimeout < 0 {
		bad("lookup_timeout: %s is negative: use a duration such as 10s", c.LookupTimeout)
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *PartRule) validate(at string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.JSON != nil && p.Schema != nil {
		bad("%s: set json or schema, not both: json is for JSON text with no prefix, schema for payloads that carry a schema id (JSON Schema payloads included; tighten their syntax with schema.json)", at)
	}
	if p.JSON != nil {
		if err := p.JSON.check(); err != nil {
			bad("%s.json.duplicate_keys: %v", at, err)
		}
	}
	if s := p.Schema; s != nil {
		if _, err := schema.ParseStrategy(s.Strategy); err != nil {
			bad("%s.schema.strategy: %v", at, err)
		}
		if s.Strategy != "" && (len(s.Subjects) > 0 || len(s.IDs) > 0) {
			bad("%s.schema.strategy: is set along with subjects or ids, which replace it: remove one", at)
		}
		for i, subj := range s.Subjects {
			if strings.TrimSpace(subj) == "" {
				bad("%s.schema.subjects[%d]: is empty: name a subject, e.g. orders-value", at, i)
			}
		}
		for i, id := range s.IDs {
			if id < 0 {
				bad("%s.schema.ids[%d]: %d is negative: schema ids are 0 or more", at, i, id)
			}
		}
		for i, f := range s.Formats {
			if _, err := parseFormat(f); err != nil {
				bad("%s.schema.formats[%d]: %v", at, i, err)
			}
		}
		if s.JSON != nil {
			if err := s.JSON.check(); err != nil {
				bad("%s.schema.json.duplicate_keys: %v", at, err)
			}
		}
	}
	if p.MaxBytes < 0 {
		bad("%s.max_bytes: %d is negative: use a size in bytes, or 0 for no bound", at, p.MaxBytes)
	}
	return errs
}

func (j *JSONRule) check() error {
	switch j.DuplicateKeys {
	case "", dupAllow, dupReject:
		return nil
	}
	return fmt.Errorf("%q is not a choice: use allow (the default) or reject", j.DuplicateKeys)
}

func (j *JSONRule) options() jsonschema.SyntaxOptions {
	if j == nil {
		return jsonschema.SyntaxOptions{}
	}
	return jsonschema.SyntaxOptions{RejectDuplicateKeys: j.DuplicateKeys == dupReject}
}

// parseFormat reads a format as the config writes it: avro, protobuf or
// json, in any case. Unlike a registry's schemaType, empty is not Avro.
func parseFormat(s string) (schema.Format, error) {
	if strings.TrimSpace(s) == "" {
		return 0, errors.New("is empty: use avro, protobuf or json")
	}
	f, err := schema.ParseFormat(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a format: use avro, protobuf or json", s)
	}
	return f, nil
}
