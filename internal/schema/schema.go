package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/straitgw/strait/internal/schema/avro"
	"github.com/straitgw/strait/internal/schema/jsonschema"
	"github.com/straitgw/strait/internal/schema/protobuf"
)

// Schema is a compiled schema: its definition and the parsed form of its
// format, for validating payloads and for code that walks or rewrites
// records (Avro, Protobuf or JSON return the parsed form; the other two
// return nil). A Schema is immutable and safe for concurrent use.
type Schema struct {
	// ID is the schema's id in its source, 0 if it has none.
	ID     int
	Format Format
	Text   string
	// References are the schema's direct references, as its source lists
	// them.
	References []Reference

	avro  *avro.Schema
	proto *protobuf.Schema
	json  *jsonschema.Schema
}

// Avro returns the compiled Avro schema, or nil if the format is not Avro.
func (s *Schema) Avro() *avro.Schema { return s.avro }

// Protobuf returns the compiled .proto file, or nil if the format is not
// Protobuf.
func (s *Schema) Protobuf() *protobuf.Schema { return s.proto }

// JSON returns the compiled JSON Schema, or nil if the format is not JSON.
func (s *Schema) JSON() *jsonschema.Schema { return s.json }

// Resolved is a referenced schema's text, under the name the referring
// schema uses for it.
type Resolved struct {
	Name string
	Text string
}

// Compile compiles def. refs are the texts of def's references and of
// theirs, dependencies before the schemas that use them. ctx bounds the
// Protobuf compiler. Errors match ErrInvalidSchema.
func Compile(ctx context.Context, def Definition, refs []Resolved) (*Schema, error) {
	s := &Schema{ID: def.ID, Format: def.Format, Text: def.Text, References: def.References}
	var err error
	switch def.Format {
	case Avro:
		rs := make([]avro.Reference, len(refs))
		for i, r := range refs {
			rs[i] = avro.Reference{Name: r.Name, Text: r.Text}
		}
		s.avro, err = avro.Compile(def.Text, rs)
	case Protobuf:
		rs := make([]protobuf.Reference, len(refs))
		for i, r := range refs {
			rs[i] = protobuf.Reference{Name: r.Name, Text: r.Text}
		}
		s.proto, err = protobuf.Compile(ctx, def.Text, rs)
	case JSON:
		rs := make([]jsonschema.Reference, len(refs))
		for i, r := range refs {
			rs[i] = jsonschema.Reference{Name: r.Name, Text: r.Text}
		}
		s.json, err = jsonschema.Compile(def.Text, rs)
	default:
		err = fmt.Errorf("unknown format %v", def.Format)
	}
	if err != nil {
		return nil, newError(ErrInvalidSchema, s.describe()+" does not compile", err)
	}
	return s, nil
}

func (s *Schema) describe() string {
	if s.ID != 0 {
		return fmt.Sprintf("%s schema id %d", s.Format, s.ID)
	}
	return s.Format.String() + " schema"
}

// RecordName returns the fully-qualified name of the record type, as the
// record-name subject strategies use it: an Avro named type's full name,
// the full name (package.Message) of the Protobuf message that indexes
// select, or a JSON Schema's title.
func (s *Schema) RecordName(indexes []int) (string, error) {
	var name string
	switch s.Format {
	case Avro:
		name = s.avro.FullName()
	case Protobuf:
		n, err := s.proto.FullName(indexes)
		if err != nil {
			return "", newError(ErrInvalidRecord, "", err)
		}
		name = n
	case JSON:
		name = s.json.Title()
	}
	if name == "" {
		return "", newError(ErrInvalidSchema, s.describe()+" names no record type (an Avro named type, a Protobuf message, a JSON Schema title), which the record-name strategies need", nil)
	}
	return name, nil
}

// Message returns the Protobuf message that indexes select.
func (s *Schema) Message(indexes []int) (*protobuf.Message, error) {
	if s.proto == nil {
		return nil, fmt.Errorf("%s is not Protobuf", s.describe())
	}
	m, err := s.proto.Message(indexes)
	if err != nil {
		return nil, newError(ErrInvalidRecord, "", err)
	}
	return m, nil
}

// ValidateBody checks body, a payload without the wire-format prefix (and
// without the message indexes, for Protobuf), against the schema. indexes
// select the Protobuf message and are ignored for other formats; opts
// apply to JSON. Errors match ErrInvalidRecord and name the faulty field.
func (s *Schema) ValidateBody(body []byte, indexes []int, opts jsonschema.SyntaxOptions) error {
	var err error
	switch s.Format {
	case Avro:
		err = s.avro.Validate(body)
	case Protobuf:
		var m *protobuf.Message
		if m, err = s.Message(indexes); err != nil {
			return err
		}
		err = m.Validate(body)
	case JSON:
		err = s.json.Validate(body, opts)
	default:
		err = errors.New("unknown format")
	}
	if err != nil {
		return newError(ErrInvalidRecord, "", err)
	}
	return nil
}
