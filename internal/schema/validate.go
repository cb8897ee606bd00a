package schema

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/straitgw/strait/internal/schema/jsonschema"
	"github.com/straitgw/strait/internal/schema/protobuf"
)

// Rule says what the payloads of a topic's keys or values must be.
//
// With Schema nil, a payload must carry the Confluent wire-format prefix.
// Its schema id is allowed if it is in IDs, or registered under one of
// Subjects, or — when both are empty — registered under the subject that
// Strategy names for the topic and record. Then the payload must validate
// against that schema.
//
// With Schema set, payloads carry no prefix and must validate against it.
type Rule struct {
	Strategy Strategy
	// Subjects, if set, replace the strategy's subject.
	Subjects []string
	// IDs are schema ids allowed without asking the source.
	IDs []int
	// Formats, if set, are the only formats allowed.
	Formats []Format
	// Schema, if set, is the schema of unprefixed payloads.
	Schema *Schema
	// Indexes select the Protobuf message of Schema; nil means [0].
	Indexes []int
	// JSON tightens the syntax of JSON payloads.
	JSON jsonschema.SyntaxOptions
}

// Record is a payload resolved to its schema.
type Record struct {
	// ID is the schema id the payload carries; 0 for an unprefixed one.
	ID     int
	Schema *Schema
	// Indexes is the Protobuf message-index path (shared: do not modify);
	// nil for other formats.
	Indexes []int
	// Message is the Protobuf message Indexes selects; nil for other
	// formats.
	Message *protobuf.Message
	// Body is the encoded record after the prefix and indexes: what the
	// schema describes. It aliases the payload.
	Body []byte
}

// Resolve parses the payload's wire-format prefix (and Protobuf message
// indexes) and looks up its schema, without validating anything else. It is
// what a filter that rewrites fields calls before walking the body.
func (r *Registry) Resolve(ctx context.Context, payload []byte) (Record, error) {
	id, rest, err := ParsePrefix(payload)
	if err != nil {
		return Record{}, newError(ErrInvalidRecord, "", err)
	}
	s, err := r.SchemaByID(ctx, id)
	if err != nil {
		return Record{}, lookupError(id, err)
	}
	return split(id, s, rest)
}

// split reads the message indexes of a Protobuf payload.
func split(id int, s *Schema, rest []byte) (Record, error) {
	rec := Record{ID: id, Schema: s, Body: rest}
	if s.Format != Protobuf {
		return rec, nil
	}
	idx, body, err := ParseMessageIndexes(rest)
	if err != nil {
		if fb, ok := withoutIndexes(id, s, rest); ok {
			return fb, nil
		}
		return Record{}, newError(ErrInvalidRecord, "", err)
	}
	m, err := s.Message(idx)
	if err != nil {
		if fb, ok := withoutIndexes(id, s, rest); ok {
			return fb, nil
		}
		return Record{}, err
	}
	rec.Indexes, rec.Message, rec.Body = idx, m, body
	return rec, nil
}

// withoutIndexes reads a Protobuf payload written with no message-index
// list after the schema id, as some serializers write it
// (@kafkajs/confluent-schema-registry; Confluent's own newer clients read
// it too): the schema's first message, the whole rest its body (nothing
// at all is an empty first message, all fields at their defaults). It is
// tried only after the standard reading failed, and only when the first
// byte cannot begin a list of up to three indexes (a count byte below
// 0x08, while a message's first tag is 0x08 or more), and it must
// validate; so a payload in the standard format is never read this way.
func withoutIndexes(id int, s *Schema, rest []byte) (Record, bool) {
	if len(rest) > 0 && rest[0] < 0x08 {
		return Record{}, false
	}
	m, err := s.Message(firstMessage)
	if err != nil || m.Validate(rest) != nil {
		return Record{}, false
	}
	return Record{ID: id, Schema: s, Indexes: firstMessage, Message: m, Body: rest}, true
}

func lookupError(id int, err error) error {
	if e, ok := err.(*Error); ok && e.Kind == ErrNotFound {
		return newError(ErrNotFound, "schema id "+strconv.Itoa(id)+" is not registered", nil)
	}
	return err
}

// Validate checks one payload of topic (its key when isKey) against rule,
// and returns the resolved record. Errors match ErrInvalidRecord (no or a
// malformed prefix, or a payload that does not match its schema, with the
// faulty field named), ErrNotAllowed, ErrNotFound (an unknown id),
// ErrInvalidSchema or ErrUnavailable (the source is needed and cannot
// answer; retrying later may succeed). Messages read well after a "key: "
// or "value: " prefix.
//
// A valid payload of a cached schema costs no allocation and no lock.
func (r *Registry) Validate(ctx context.Context, topic string, isKey bool, payload []byte, rule *Rule) (Record, error) {
	if rule.Schema != nil {
		rec := Record{Schema: rule.Schema, Body: payload}
		if rule.Schema.Format == Protobuf {
			idx := rule.Indexes
			if idx == nil {
				idx = firstMessage
			}
			m, err := rule.Schema.Message(idx)
			if err != nil {
				return Record{}, newError(ErrInvalidSchema, "the rule's message", err)
			}
			rec.Indexes, rec.Message = idx, m
			if err := m.Validate(payload); err != nil {
				return Record{}, newError(ErrInvalidRecord, "", err)
			}
			return rec, nil
		}
		if err := rule.Schema.ValidateBody(payload, nil, rule.JSON); err != nil {
			return Record{}, err
		}
		return rec, nil
	}

	id, rest, err := ParsePrefix(payload)
	if err != nil {
		return Record{}, newError(ErrInvalidRecord, "", err)
	}
	s, err := r.SchemaByID(ctx, id)
	if err != nil {
		return Record{}, lookupError(id, err)
	}
	if len(rule.Formats) > 0 && !slices.Contains(rule.Formats, s.Format) {
		return Record{}, newError(ErrNotAllowed, fmt.Sprintf("schema id %d is %s, and the rule allows only %s", id, s.Format, formats(rule.Formats)), nil)
	}
	rec, err := split(id, s, rest)
	if err != nil {
		return Record{}, err
	}
	if err := r.allowed(ctx, topic, isKey, rule, rec); err != nil {
		return Record{}, err
	}
	switch s.Format {
	case Protobuf:
		if err = rec.Message.Validate(rec.Body); err != nil {
			// Indexes that parsed may still be a message's first bytes.
			if fb, ok := withoutIndexes(id, s, rest); ok {
				if aerr := r.allowed(ctx, topic, isKey, rule, fb); aerr != nil {
					return Record{}, aerr
				}
				return fb, nil
			}
		}
	case Avro:
		err = s.avro.Validate(rec.Body)
	case JSON:
		err = s.json.Validate(rec.Body, rule.JSON)
	}
	if err != nil {
		return Record{}, newError(ErrInvalidRecord, "", err)
	}
	return rec, nil
}

// allowed checks the record's schema id against the rule's ids and
// subjects.
func (r *Registry) allowed(ctx context.Context, topic string, isKey bool, rule *Rule, rec Record) error {
	if slices.Contains(rule.IDs, rec.ID) {
		return nil
	}
	if len(rule.Subjects) > 0 {
		for _, subject := range rule.Subjects {
			ok, err := r.registered(ctx, rec.ID, func(s string) bool { return s == subject })
			if err != nil {
				return lookupError(rec.ID, err)
			}
			if ok {
				return nil
			}
		}
		return newError(ErrNotAllowed, fmt.Sprintf("schema id %d is not registered for subject %s", rec.ID, strings.Join(rule.Subjects, " or ")), nil)
	}
	if len(rule.IDs) > 0 {
		return newError(ErrNotAllowed, fmt.Sprintf("schema id %d is not one of the allowed ids", rec.ID), nil)
	}
	var name string
	if rule.Strategy.NeedsRecordName() {
		var err error
		if name, err = rec.Schema.RecordName(rec.Indexes); err != nil {
			return err
		}
	}
	ok, err := r.registered(ctx, rec.ID, func(s string) bool { return rule.Strategy.matches(s, topic, isKey, name) })
	if err != nil {
		return lookupError(rec.ID, err)
	}
	if !ok {
		return newError(ErrNotAllowed, fmt.Sprintf("schema id %d is not registered for subject %s", rec.ID, rule.Strategy.Subject(topic, isKey, name)), nil)
	}
	return nil
}

func formats(fs []Format) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.String()
	}
	return strings.Join(names, ", ")
}
