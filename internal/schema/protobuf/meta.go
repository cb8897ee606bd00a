package protobuf

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// metaName is the import path of Confluent's metadata options, which data
// contracts use to tag fields: [(confluent.field_meta) = { tags: ["PII"] }].
// Confluent's clients ship the file, so schemas import it without
// registering it as a reference; Compile supplies metaProto for it unless a
// reference of that name is given.
const metaName = "confluent/meta.proto"

// metaProto declares the options of confluent/meta.proto that clients rely
// on: the Meta message and its extension of each options message, all
// numbered 1088 as in Confluent's clients.
const metaProto = `syntax = "proto3";
package confluent;

import "google/protobuf/descriptor.proto";

message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
}

extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
`

// fieldMetaName is the extension of FieldOptions that holds a field's tags.
const fieldMetaName protoreflect.FullName = "confluent.field_meta"

// metaOption is where a compiled schema keeps field tags: the number of the
// confluent.field_meta extension and of the tags field of its message, as
// the imported confluent/meta.proto declares them.
type metaOption struct {
	ext, tags protowire.Number
}

// findMetaOption looks for confluent.field_meta in the files fd imports,
// directly or not. ok is false when no file declares it: then no field of
// fd can carry tags.
func findMetaOption(fd protoreflect.FileDescriptor) (opt metaOption, ok bool) {
	seen := map[string]bool{}
	var visit func(f protoreflect.FileDescriptor) bool
	visit = func(f protoreflect.FileDescriptor) bool {
		if seen[f.Path()] {
			return false
		}
		seen[f.Path()] = true
		if xd := f.Extensions().ByName(fieldMetaName.Name()); xd != nil && xd.FullName() == fieldMetaName {
			tags := xd.Message()
			if tags == nil {
				return false
			}
			td := tags.Fields().ByName("tags")
			if td == nil || td.Kind() != protoreflect.StringKind || !td.IsList() {
				return false
			}
			opt = metaOption{ext: xd.Number(), tags: td.Number()}
			return true
		}
		imports := f.Imports()
		for i := range imports.Len() {
			if visit(imports.Get(i).FileDescriptor) {
				return true
			}
		}
		return false
	}
	return opt, visit(fd)
}

// fieldTags returns the tags in the confluent.field_meta option of opts, a
// field's options. protocompile interprets the option into an extension
// field of FieldOptions, typed by the schema's own Meta; descriptors built
// elsewhere (from a FileDescriptorProto, say) may hold it as unknown fields
// instead. Both marshal to the same wire form, so the tags are read there.
func (o metaOption) fieldTags(opts proto.Message) []string {
	if opts == nil {
		return nil
	}
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(opts)
	if err != nil {
		return nil
	}
	var tags []string
	forEachBytes(b, o.ext, func(meta []byte) {
		forEachBytes(meta, o.tags, func(tag []byte) {
			tags = append(tags, string(tag))
		})
	})
	return tags
}

// forEachBytes calls fn with the value of every length-delimited field num
// of the message b. It stops at the first malformed field: the options
// come from the compiler, so none are expected.
func forEachBytes(b []byte, num protowire.Number, fn func([]byte)) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return
			}
			fn(v)
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return
		}
		b = b[l:]
	}
}

// Tagged returns the paths of every string or bytes field of m whose
// (confluent.field_meta).tags holds tag, in declaration order: fields of
// nested messages as "outer.inner", items of repeated fields and values of
// maps as "name[*]". A message type that holds itself, directly or not, is
// followed once along each path. Fields of other kinds are left out, as
// field encryption cannot hold ciphertext in them.
func (m *Message) Tagged(tag string) []string {
	if m.meta == nil {
		return nil
	}
	var out []string
	var walk func(md protoreflect.MessageDescriptor, prefix string, open []protoreflect.FullName)
	walk = func(md protoreflect.MessageDescriptor, prefix string, open []protoreflect.FullName) {
		if slices.Contains(open, md.FullName()) || len(open) > maxDepth {
			return
		}
		open = append(open, md.FullName())
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			path := prefix + string(fd.Name())
			if fd.IsList() || fd.IsMap() {
				path += "[*]"
			}
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			switch fd.Kind() {
			case protoreflect.StringKind, protoreflect.BytesKind:
				if slices.Contains(m.meta.fieldTags(fields.Get(i).Options()), tag) {
					out = append(out, path)
				}
			case protoreflect.MessageKind, protoreflect.GroupKind:
				walk(fd.Message(), path+".", open)
			}
		}
	}
	walk(m.desc, "", nil)
	return out
}
