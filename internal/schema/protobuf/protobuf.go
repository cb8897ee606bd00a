// Package protobuf compiles Protobuf schemas given as .proto text, with
// their imports taken from referenced schemas, and validates Protobuf binary
// data against a message of them by reading the wire format field by field.
// Nothing is decoded into Go messages, so fields the schema does not know
// are accepted (and left in place by whoever forwards the bytes). A Plan
// locates chosen string and bytes fields in the same way, for field
// encryption, and Tagged finds the fields a data contract tags.
//
// It is a codec of the schema layer (internal/schema) and imports nothing
// of ours but fieldpath, the engine its locator reports to.
package protobuf

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Reference is a .proto file the schema being compiled imports.
type Reference struct {
	// Name is the path the schema imports it by ("common/money.proto").
	Name string
	// Text is the file's .proto source.
	Text string
}

// Schema is a compiled .proto file.
type Schema struct {
	file protoreflect.FileDescriptor
	// msgs holds the validation table of every message a record of this
	// file can contain, its own and imported ones. It is built at compile
	// time and read-only after, so lookups need no lock.
	msgs  map[protoreflect.FullName]*Message
	first *Message // the first top-level message: message indexes [0]
	// meta locates field tags; nil when the file does not import them.
	meta *metaOption
}

// mainName is the path the compiled file gets; a registry gives the schema
// itself no file name. A reference of the same name is renamed around.
const mainName = "schema.proto"

// Compile compiles text, a .proto file, with refs as the files it imports.
// The well-known google/protobuf/*.proto files need no reference, nor does
// confluent/meta.proto (see metaName) unless one is given.
func Compile(ctx context.Context, text string, refs []Reference) (*Schema, error) {
	name := mainName
	srcs := make(map[string]string, len(refs)+2)
	for _, r := range refs {
		srcs[r.Name] = r.Text
	}
	if _, given := srcs[metaName]; !given {
		srcs[metaName] = metaProto
	}
	for i := 0; ; i++ {
		if _, taken := srcs[name]; !taken {
			break
		}
		name = "schema-" + strconv.Itoa(i) + ".proto"
	}
	srcs[name] = text
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(srcs),
		}),
		// One file at a time: compiling happens once per schema id, and
		// the gateway's cores are better spent on records.
		MaxParallelism: 1,
	}
	files, err := c.Compile(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("protobuf schema: %w", err)
	}
	fd := files.FindFileByPath(name)
	if fd == nil {
		return nil, errors.New("protobuf schema: compiled file missing from the result")
	}
	s := &Schema{file: fd, msgs: map[protoreflect.FullName]*Message{}}
	if opt, ok := findMetaOption(fd); ok {
		s.meta = &opt
	}
	s.addMessages(fd.Messages())
	if fd.Messages().Len() > 0 {
		s.first = s.msgs[fd.Messages().Get(0).FullName()]
	}
	return s, nil
}

// File returns the compiled file's descriptor, for code that reads or
// rewrites records with protoreflect or dynamicpb.
func (s *Schema) File() protoreflect.FileDescriptor { return s.file }

// Message returns the message that a Confluent message-index path selects:
// indexes[0] is a top-level message of the file, each further index a
// message nested in the previous one.
func (s *Schema) Message(indexes []int) (*Message, error) {
	if len(indexes) == 1 && indexes[0] == 0 && s.first != nil {
		return s.first, nil
	}
	if len(indexes) == 0 {
		return nil, errors.New("empty message index path")
	}
	msgs := s.file.Messages()
	var md protoreflect.MessageDescriptor
	for i, idx := range indexes {
		if idx < 0 || idx >= msgs.Len() {
			return nil, fmt.Errorf("message index path %v: index %d at position %d is out of range (%d messages)", indexes, idx, i, msgs.Len())
		}
		md = msgs.Get(idx)
		msgs = md.Messages()
	}
	return s.msgs[md.FullName()], nil
}

// MessageByName returns the message of the given full name, if the file
// defines or uses it.
func (s *Schema) MessageByName(name protoreflect.FullName) (*Message, bool) {
	m, ok := s.msgs[name]
	return m, ok
}

// FullName returns the full name (package.Outer.Inner) of the message that
// indexes select.
func (s *Schema) FullName(indexes []int) (string, error) {
	m, err := s.Message(indexes)
	if err != nil {
		return "", err
	}
	return string(m.desc.FullName()), nil
}

func (s *Schema) addMessages(list protoreflect.MessageDescriptors) {
	for i := range list.Len() {
		s.table(list.Get(i))
	}
}

// table returns md's validation table, building it (and those of the
// messages its fields hold) on first use.
func (s *Schema) table(md protoreflect.MessageDescriptor) *Message {
	if m, ok := s.msgs[md.FullName()]; ok {
		return m
	}
	m := &Message{desc: md, meta: s.meta}
	s.msgs[md.FullName()] = m
	fields := md.Fields()
	maxSmall := 0
	for i := range fields.Len() {
		if n := int(fields.Get(i).Number()); n < smallFields && n > maxSmall {
			maxSmall = n
		}
	}
	m.small = make([]*field, maxSmall+1)
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := &field{name: string(fd.Name()), kind: fd.Kind()}
		f.wire, f.packed = wireTypes(fd)
		f.utf8 = fd.Kind() == protoreflect.StringKind && validatesUTF8(fd)
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			f.msg = s.table(fd.Message())
		}
		if n := int(fd.Number()); n < smallFields {
			m.small[n] = f
		} else {
			if m.large == nil {
				m.large = map[protowire.Number]*field{}
			}
			m.large[fd.Number()] = f
		}
	}
	s.addMessages(md.Messages())
	return m
}

// smallFields is the bound under which field numbers index a slice instead
// of a map: records' fields are numbered from 1, mostly densely.
const smallFields = 256

// Message is one message type of a schema, ready to validate records.
type Message struct {
	desc  protoreflect.MessageDescriptor
	small []*field
	large map[protowire.Number]*field
	meta  *metaOption
}

// Descriptor returns the message's descriptor.
func (m *Message) Descriptor() protoreflect.MessageDescriptor { return m.desc }

func (m *Message) field(n protowire.Number) *field {
	if int(n) < len(m.small) {
		return m.small[n]
	}
	return m.large[n]
}

type field struct {
	name string
	kind protoreflect.Kind
	// wire is the wire type the field's kind is written with; packed is
	// the element wire type when the field is a repeated scalar that may
	// also come packed (as one length-delimited run), else -1.
	wire, packed protowire.Type
	utf8         bool
	msg          *Message
}

// wireTypes returns the wire type of fd's kind and, for a repeated numeric
// field, the element type of its packed form (else -1).
func wireTypes(fd protoreflect.FieldDescriptor) (wire, packed protowire.Type) {
	switch fd.Kind() {
	case protoreflect.BoolKind, protoreflect.EnumKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		wire = protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		wire = protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		wire = protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType, -1
	default: // string, bytes, message
		return protowire.BytesType, -1
	}
	// Parsers accept both forms of a repeated scalar whatever the schema
	// says, so validation does too.
	if fd.IsList() {
		return wire, wire
	}
	return wire, -1
}

// validatesUTF8 reports whether a string field must hold valid UTF-8: always
// in proto3, never in proto2, and in editions unless the utf8_validation
// feature, looked up from the field outwards, says NONE.
func validatesUTF8(fd protoreflect.FieldDescriptor) bool {
	switch fd.ParentFile().Syntax() {
	case protoreflect.Proto3:
		return true
	case protoreflect.Proto2:
		return false
	}
	var d protoreflect.Descriptor = fd
	for d != nil {
		var fs *descriptorpb.FeatureSet
		switch o := d.Options().(type) {
		case *descriptorpb.FieldOptions:
			fs = o.GetFeatures()
		case *descriptorpb.MessageOptions:
			fs = o.GetFeatures()
		case *descriptorpb.FileOptions:
			fs = o.GetFeatures()
		}
		switch fs.GetUtf8Validation() {
		case descriptorpb.FeatureSet_VERIFY:
			return true
		case descriptorpb.FeatureSet_NONE:
			return false
		}
		if _, isFile := d.(protoreflect.FileDescriptor); isFile {
			break
		}
		d = d.Parent()
	}
	return true // the editions default
}
