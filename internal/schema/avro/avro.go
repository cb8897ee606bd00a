// Package avro compiles Avro schemas, with named types taken from referenced
// schemas, and validates Avro binary data against them by walking the bytes
// with the schema instead of decoding into Go values: a validation allocates
// nothing unless it fails.
//
// It is a codec of the schema layer (internal/schema) and imports nothing
// of ours.
package avro

import (
	"errors"
	"fmt"

	hamba "github.com/hamba/avro/v2"
)

// Reference is a schema that the schema being compiled refers to by the full
// names of the types it defines (Confluent's schema references for Avro).
type Reference struct {
	// Name is the reference's name (for Avro, the full name of the type it
	// defines). It appears in errors only.
	Name string
	// Text is the referenced schema's JSON text.
	Text string
}

// Schema is a compiled Avro schema.
type Schema struct {
	schema hamba.Schema
	root   *node
}

// Compile parses text as an Avro schema. The named types of refs, which must
// come dependencies first, are visible to it and to the references after
// them.
func Compile(text string, refs []Reference) (*Schema, error) {
	cache := &hamba.SchemaCache{}
	for _, r := range refs {
		if _, err := hamba.ParseWithCache(r.Text, "", cache); err != nil {
			return nil, fmt.Errorf("avro reference %q: %w", r.Name, err)
		}
	}
	s, err := hamba.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	b := builder{named: map[string]*node{}}
	root, err := b.build(s)
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	return &Schema{schema: s, root: root}, nil
}

// Avro returns the parsed schema, for code that reads or writes records of
// it with hamba/avro.
func (s *Schema) Avro() hamba.Schema { return s.schema }

// FullName returns the full name (namespace.name) of the schema's top-level
// type, or "" if that type is not named (a primitive, array, map or union).
func (s *Schema) FullName() string {
	if n, ok := s.schema.(hamba.NamedSchema); ok {
		return n.FullName()
	}
	return ""
}

// kind is a node's encoding.
type kind uint8

const (
	kNull kind = iota
	kBoolean
	kInt
	kLong
	kFloat
	kDouble
	kBytes
	kString
	kFixed
	kEnum
	kRecord
	kArray
	kMap
	kUnion
)

// node is one type of the schema, in the form validation walks.
type node struct {
	kind     kind
	name     string // full name of a named type, for messages
	size     int    // fixed: the size; enum: the number of symbols
	fields   []field
	items    *node // array items, map values
	branches []*node
	// minSize is a lower bound of the type's encoded size, used to refuse
	// block counts that the remaining bytes cannot hold.
	minSize int
	// logical is the logical type over a primitive or fixed, whether
	// hamba knows it or not ("" for none). Validation ignores it; the
	// locator refuses to put ciphertext where a reader would parse one.
	logical string
}

type field struct {
	name string
	node *node
	// avro is the field as hamba parsed it, for its properties.
	avro *hamba.Field
}

type builder struct {
	named map[string]*node
}

func (b *builder) build(s hamba.Schema) (*node, error) {
	switch s := s.(type) {
	case *hamba.RefSchema:
		return b.build(s.Schema())
	case *hamba.PrimitiveSchema:
		n := &node{}
		switch s.Type() {
		case hamba.Null:
			n.kind = kNull
		case hamba.Boolean:
			n.kind, n.minSize = kBoolean, 1
		case hamba.Int:
			n.kind, n.minSize = kInt, 1
		case hamba.Long:
			n.kind, n.minSize = kLong, 1
		case hamba.Float:
			n.kind, n.minSize = kFloat, 4
		case hamba.Double:
			n.kind, n.minSize = kDouble, 8
		case hamba.Bytes:
			n.kind, n.minSize = kBytes, 1
		case hamba.String:
			n.kind, n.minSize = kString, 1
		default:
			return nil, fmt.Errorf("unsupported primitive type %q", s.Type())
		}
		n.logical = logicalName(s.Logical(), s.Prop("logicalType"))
		return n, nil
	case *hamba.NullSchema:
		return &node{kind: kNull}, nil
	case *hamba.FixedSchema:
		if n, ok := b.named[s.FullName()]; ok {
			return n, nil
		}
		n := &node{kind: kFixed, name: s.FullName(), size: s.Size(), minSize: s.Size(),
			logical: logicalName(s.Logical(), s.Prop("logicalType"))}
		b.named[s.FullName()] = n
		return n, nil
	case *hamba.EnumSchema:
		if n, ok := b.named[s.FullName()]; ok {
			return n, nil
		}
		n := &node{kind: kEnum, name: s.FullName(), size: len(s.Symbols()), minSize: 1}
		b.named[s.FullName()] = n
		return n, nil
	case *hamba.RecordSchema:
		if n, ok := b.named[s.FullName()]; ok {
			// A recursive reference: its minSize may still be 0, which
			// is a valid (if loose) lower bound.
			return n, nil
		}
		n := &node{kind: kRecord, name: s.FullName()}
		b.named[s.FullName()] = n
		for _, f := range s.Fields() {
			fn, err := b.build(f.Type())
			if err != nil {
				return nil, fmt.Errorf("field %q of %s: %w", f.Name(), s.FullName(), err)
			}
			n.fields = append(n.fields, field{name: f.Name(), node: fn, avro: f})
			n.minSize += fn.minSize
		}
		return n, nil
	case *hamba.ArraySchema:
		items, err := b.build(s.Items())
		if err != nil {
			return nil, err
		}
		return &node{kind: kArray, items: items, minSize: 1}, nil
	case *hamba.MapSchema:
		values, err := b.build(s.Values())
		if err != nil {
			return nil, err
		}
		return &node{kind: kMap, items: values, minSize: 1}, nil
	case *hamba.UnionSchema:
		n := &node{kind: kUnion, minSize: 1}
		for _, t := range s.Types() {
			bn, err := b.build(t)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, bn)
		}
		if len(n.branches) == 0 {
			return nil, errors.New("empty union")
		}
		return n, nil
	}
	return nil, fmt.Errorf("unsupported schema type %T", s)
}

// logicalName is the name of a type's logical type: the one hamba parsed,
// or else the "logicalType" property hamba left alone because it does not
// know it (or it does not fit the type), which other readers may know.
func logicalName(l hamba.LogicalSchema, prop any) string {
	if l != nil {
		return string(l.Type())
	}
	if name, ok := prop.(string); ok {
		return name
	}
	return ""
}
