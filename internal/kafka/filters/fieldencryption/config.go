package fieldencryption

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/topicsel"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// Config is the filter's config block (the `config:` of a `field-encryption`
// filter entry), but for the KMS block, which register.go reads beside it.
type Config struct {
	// Where schemas come from (`registry`, `schemas`, `cache`), as the
	// schema layer reads them. Needed by avro, protobuf and auto parts,
	// and by tags.
	schema.Config `yaml:",inline"`
	// Rules say which fields of which topics are encrypted. For a topic,
	// the first rule whose topics match applies; a topic no rule matches
	// is not touched.
	Rules []Rule `yaml:"rules"`
	// BindTopic makes the topic name part of every field's authenticated
	// data, so a value copied into another topic does not decrypt.
	// Default true.
	BindTopic *bool `yaml:"bind_topic"`
	// DEK bounds the use of each data-encryption key.
	DEK DEKConfig `yaml:"dek"`
	// LookupTimeout bounds how long a request waits for the registry, all
	// its lookups together. Default 10 s.
	LookupTimeout time.Duration `yaml:"lookup_timeout"`
	// Decompression limits, shared with every filter that reads
	// compressed batches.
	recordbatch.Limits `yaml:",inline"`
	// KMSTimeout bounds each KMS call; set from the kms block.
	KMSTimeout time.Duration `yaml:"-"`
}

// DEKConfig bounds the use of a data-encryption key: a new one is made
// after MaxRecords records or MaxAge, whichever comes first.
type DEKConfig struct {
	MaxRecords uint64        `yaml:"max_records"`
	MaxAge     time.Duration `yaml:"max_age"`
}

// Rule is what is encrypted in the records of some topics, and who reads it.
type Rule struct {
	// Topics selects the topics: exact names, prefixes ("pii-*"), globs.
	Topics []string `yaml:"topics"`
	// KEK is the key-encryption key of the rule's fields (a field may
	// name its own): a name, or a template with {topic}.
	KEK string `yaml:"kek"`
	// Key and Value say which fields of each part are encrypted; a part
	// without one is left as it is.
	Key   *Part `yaml:"key"`
	Value *Part `yaml:"value"`
	// Fetch says who gets the fields back in clear.
	Fetch FetchRule `yaml:"fetch"`
}

// Part is the fields of a record's key or value to encrypt.
type Part struct {
	// Format is json (a JSON text, or a JSON Schema payload with the
	// Confluent prefix), avro or protobuf (Confluent-framed, schema from
	// the registry), or auto (the format of the schema the prefix names).
	Format string `yaml:"format"`
	// Fields are the fields to encrypt, by path.
	Fields []Field `yaml:"fields"`
	// Tags select further fields from the schema itself: every string or
	// bytes field the schema tags with one of them (Avro and JSON Schema:
	// the "confluent:tags" property; Protobuf: the
	// (confluent.field_meta).tags option). Only for payloads with a
	// schema.
	Tags []string `yaml:"tags"`
}

// Field is one field to encrypt.
type Field struct {
	// Path names the field: "ssn", "customer.ssn", "cards[*].number".
	Path string `yaml:"path"`
	// KEK overrides the rule's KEK for this field.
	KEK string `yaml:"kek"`
	// Mode is random (the default: a fresh nonce per value, equal values
	// look unrelated) or deterministic (equal values under one KEK give
	// equal ciphertexts, so the field can still be joined or looked up,
	// at the price of showing which records share a value).
	Mode string `yaml:"mode"`
	// Optional lets a JSON record lack the field (Avro and Protobuf say
	// in the schema what may be absent).
	Optional bool `yaml:"optional"`
	// RedactWith is what principals under fetch.others: redact get in
	// place of the field: "" by default (empty bytes for a bytes field).
	RedactWith string `yaml:"redact_with"`
}

// FetchRule is the per-principal outcome of fetching encrypted fields.
type FetchRule struct {
	// DecryptFor lists the principals that get the fields decrypted; "*"
	// is everyone, unauthenticated clients included. Default ["*"].
	DecryptFor []string `yaml:"decrypt_for"`
	// Others is what every other principal gets: ciphertext (the record
	// as stored, the default) or redact (a placeholder in each field, see
	// redact_with).
	Others string `yaml:"others"`
}

// Formats, modes and outcomes as the config writes them.
const (
	formatJSON     = "json"
	formatAvro     = "avro"
	formatProtobuf = "protobuf"
	formatAuto     = "auto"

	modeRandom        = "random"
	modeDeterministic = "deterministic"

	othersCiphertext = "ciphertext"
	othersRedact     = "redact"

	anyPrincipal     = "*"
	topicPlaceholder = "{topic}"
)

// Defaults and limits.
const (
	DefaultMaxRecords    = 1_000_000
	DefaultMaxAge        = time.Hour
	DefaultLookupTimeout = 10 * time.Second
	DefaultKMSTimeout    = 5 * time.Second
	// MaxRecordsLimit caps dek.max_records: AES-GCM's usual bound of 2^32
	// encryptions under one key, here counted in field values.
	MaxRecordsLimit = 1 << 32
	// maxFields bounds the fields of one part (the marker has a byte for
	// a field's index).
	maxFields = 64
)

// withDefaults returns c with every unset setting at its default.
func (c Config) withDefaults() Config {
	if c.BindTopic == nil {
		t := true
		c.BindTopic = &t
	}
	if c.DEK.MaxRecords == 0 {
		c.DEK.MaxRecords = DefaultMaxRecords
	}
	if c.DEK.MaxAge == 0 {
		c.DEK.MaxAge = DefaultMaxAge
	}
	if c.LookupTimeout == 0 {
		c.LookupTimeout = DefaultLookupTimeout
	}
	if c.KMSTimeout == 0 {
		c.KMSTimeout = DefaultKMSTimeout
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

// Validate reports every problem of the config at once, each naming the
// setting by its path and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Rules) == 0 {
		bad(`rules: is empty: add a rule, e.g. rules: [{topics: ["pii-*"], kek: "{topic}-kek", value: {format: json, fields: [{path: ssn}]}}]`)
	}
	needSchemas := false
	for i, r := range c.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		if len(r.Topics) == 0 {
			bad(`%s.topics: is empty: list the topics the rule is for, e.g. topics: ["pii-*"]`, at)
		}
		for j, t := range r.Topics {
			if err := topicsel.Check(t, "pii-*"); err != nil {
				bad("%s.topics[%d]: %v", at, j, err)
			}
		}
		if r.Key == nil && r.Value == nil {
			bad("%s: encrypts nothing: give it a value (or key) part, e.g. value: {format: json, fields: [{path: ssn}]}", at)
		}
		ruleKEK := r.KEK != ""
		if ruleKEK {
			if err := checkKEKTemplate(r.KEK); err != nil {
				bad("%s.kek: %v", at, err)
			}
		}
		for _, p := range []struct {
			name string
			part *Part
		}{{"key", r.Key}, {"value", r.Value}} {
			if p.part == nil {
				continue
			}
			pe, schemas := p.part.validate(at+"."+p.name, ruleKEK)
			errs = append(errs, pe...)
			needSchemas = needSchemas || schemas
		}
		errs = append(errs, r.Fetch.validate(at, r)...)
	}
	if needSchemas || c.Registry != nil || len(c.Schemas) > 0 {
		if needSchemas && c.Registry == nil && len(c.Schemas) == 0 {
			bad(`registry: is not set, and a rule reads records with a schema (format avro, protobuf or auto, or tags): set registry: {url: "http://127.0.0.1:8081"} or list schemas:`)
		} else if err := c.Config.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.DEK.MaxRecords > MaxRecordsLimit {
		bad("dek.max_records: %d is over the limit of %d encryptions under one AES-GCM key: lower it", c.DEK.MaxRecords, uint64(MaxRecordsLimit))
	}
	switch {
	case c.DEK.MaxAge < 0:
		bad("dek.max_age: %s is negative: use a duration such as 1h", c.DEK.MaxAge)
	case c.DEK.MaxAge > 0 && c.DEK.MaxAge < time.Second:
		bad("dek.max_age: %s is under a second: every produce would ask the KMS for a new key; use at least 1s (1h is the default)", c.DEK.MaxAge)
	}
	if c.LookupTimeout < 0 {
		bad("lookup_timeout: %s is negative: use a duration such as 10s", c.LookupTimeout)
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validate checks a part and reports whether it needs schemas.
func (p *Part) validate(at string, ruleKEK bool) (errs []error, schemas bool) {
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch p.Format {
	case formatJSON:
	case formatAvro, formatProtobuf, formatAuto:
		schemas = true
	case "":
		bad("%s.format: is empty: use json (a JSON text), avro or protobuf (Confluent-framed, schema from the registry) or auto (the format of the schema each record names)", at)
	default:
		bad("%s.format: %q is not a format: use json, avro, protobuf or auto", at, p.Format)
	}
	if len(p.Fields) == 0 && len(p.Tags) == 0 {
		bad("%s: selects no field: list fields (fields: [{path: ssn}]) or schema tags (tags: [PII])", at)
	}
	if len(p.Fields) > maxFields {
		bad("%s.fields: %d fields: at most %d per part", at, len(p.Fields), maxFields)
	}
	if len(p.Tags) > 0 {
		schemas = true
	}
	for i, t := range p.Tags {
		if strings.TrimSpace(t) == "" {
			bad("%s.tags[%d]: is empty: name a tag, e.g. PII", at, i)
		}
	}
	seen := map[string]bool{}
	for i, f := range p.Fields {
		fat := fmt.Sprintf("%s.fields[%d]", at, i)
		if _, err := fieldpath.Parse(f.Path); err != nil {
			bad("%s.path: %v", fat, err)
		} else if seen[f.Path] {
			bad("%s.path: %q is listed twice", fat, f.Path)
		}
		seen[f.Path] = true
		switch {
		case f.KEK != "":
			if err := checkKEKTemplate(f.KEK); err != nil {
				bad("%s.kek: %v", fat, err)
			}
		case !ruleKEK:
			bad(`%s.kek: no KEK: set the rule's kek (kek: "{topic}-kek") or the field's`, fat)
		}
		switch f.Mode {
		case "", modeRandom, modeDeterministic:
		default:
			bad("%s.mode: %q is not a mode: use random (the default) or deterministic (equal values give equal ciphertexts, for joins and lookups)", fat, f.Mode)
		}
		if f.Optional && p.Format != formatJSON {
			bad("%s.optional: applies to JSON only: for %s, the schema says whether a field may be absent (a union with null, a proto3 optional)", fat, p.Format)
		}
	}
	if len(p.Tags) > 0 && !ruleKEK {
		bad(`%s.tags: fields selected by tag use the rule's kek, which is not set: set kek: "{topic}-kek"`, at)
	}
	return errs, schemas
}

// validate checks the fetch rule of r, the rule at path rule.
func (f *FetchRule) validate(rule string, r Rule) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	at := rule + ".fetch"
	for i, p := range f.DecryptFor {
		if strings.TrimSpace(p) == "" {
			bad(`%s.decrypt_for[%d]: is empty: name a principal as authentication reports it (e.g. alice, or User:CN=alice), or "*" for everyone`, at, i)
		}
	}
	switch f.Others {
	case "", othersCiphertext, othersRedact:
	default:
		bad("%s.others: %q is not an outcome: use ciphertext (the record as stored, the default) or redact (a placeholder in each encrypted field)", at, f.Others)
	}
	if f.Others == othersRedact && r.Value != nil && r.Value.Format == formatJSON {
		for i, fl := range r.Value.Fields {
			if strings.ContainsAny(fl.RedactWith, "\"\\") || strings.ContainsFunc(fl.RedactWith, func(c rune) bool { return c < 0x20 }) {
				bad("%s.value.fields[%d].redact_with: holds a quote, backslash or control character, which a JSON string would need escaped: use plain text", rule, i)
			}
		}
	}
	return errs
}

// checkKEKTemplate checks a kek setting: a fixed name, or a template whose
// only placeholder is {topic}.
func checkKEKTemplate(t string) error {
	rest := strings.ReplaceAll(t, topicPlaceholder, "")
	if strings.ContainsAny(rest, "{}") {
		return fmt.Errorf(`%q has a placeholder other than {topic}: {topic} is the only one`, t)
	}
	if !strings.Contains(t, topicPlaceholder) && len(t) > maxNameLen {
		return fmt.Errorf("%q is %d bytes long: a KEK name is at most %d bytes", t, len(t), maxNameLen)
	}
	return nil
}

// kekFor expands a KEK template for a topic.
func kekFor(template, topic string) (string, error) {
	name := strings.ReplaceAll(template, topicPlaceholder, topic)
	if len(name) > maxNameLen {
		return "", fmt.Errorf("%w: KEK name %q for topic %q is over %d bytes", errKEKName, name, topic, maxNameLen)
	}
	return name, nil
}

var errKEKName = errors.New("no usable KEK name")
