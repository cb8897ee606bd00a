package protobuf

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// FuzzValidate feeds arbitrary bytes to the validator of a message that
// uses maps, packed scalars, nested and imported messages and a well-known
// type. Invariants: it never panics and fails only with *Error; what it
// accepts, the Protobuf runtime parses too (the runtime is laxer: it keeps a
// known field of the wrong wire type as an unknown one); and a valid record
// split in two validates as the concatenation of its halves would, since
// Protobuf records concatenate: if both halves are valid so is the whole.
func FuzzValidate(f *testing.F) {
	s := orderSchema(f)
	m := message(f, s, 0)
	ref, refValid := reference(f)
	valid := sampleOrder(f, s)
	f.Add(valid, uint(len(valid)/2))
	f.Add(refValid, uint(17))
	f.Add([]byte{0x0b, 0x0c}, uint(1))
	f.Add([]byte{}, uint(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint) {
		_ = ref.Validate(data)
		err := m.Validate(data)
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("error of type %T: %v", err, err)
		}
		if err == nil {
			msg := dynamicpb.NewMessage(m.Descriptor())
			if perr := proto.Unmarshal(data, msg); perr != nil {
				t.Fatalf("validator accepts %x, the runtime refuses it: %v", data, perr)
			}
		}
		if len(data) == 0 {
			return
		}
		k := int(cut % uint(len(data)))
		if m.Validate(data[:k]) == nil && m.Validate(data[k:]) == nil && err != nil {
			t.Fatalf("both halves of %x (cut at %d) validate, the whole does not: %v", data, k, err)
		}
	})
}

func BenchmarkValidateReference(b *testing.B) {
	m, rec := reference(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Validate(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDynamicUnmarshal is the alternative the validator replaces:
// parsing the record into a dynamic message.
func BenchmarkDynamicUnmarshal(b *testing.B) {
	m, rec := reference(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := proto.Unmarshal(rec, dynamicpb.NewMessage(m.Descriptor())); err != nil {
			b.Fatal(err)
		}
	}
}
