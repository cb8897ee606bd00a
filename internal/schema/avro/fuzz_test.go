package avro

import (
	"testing"

	hamba "github.com/hamba/avro/v2"
)

// FuzzValidate feeds arbitrary bytes to the validator of a schema that uses
// every Avro type. Invariants: it never panics; what it accepts, hamba's
// decoder reads too; and a valid datum cut anywhere (the first part of a
// split read) is refused.
func FuzzValidate(f *testing.F) {
	s, err := Compile(orderSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	valid, err := hamba.Marshal(s.Avro(), sampleOrder())
	if err != nil {
		f.Fatal(err)
	}
	ref, refValid := reference(f)
	f.Add(valid, uint(len(valid)/2))
	f.Add(valid[:len(valid)-3], uint(7))
	f.Add(refValid, uint(40))
	f.Add([]byte{}, uint(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint(3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint) {
		_ = ref.Validate(data)
		if s.Validate(data) != nil {
			return
		}
		var v any
		if err := hamba.Unmarshal(s.Avro(), data, &v); err != nil {
			t.Fatalf("validator accepts %x, hamba refuses it: %v", data, err)
		}
		if len(data) > 0 {
			k := int(cut % uint(len(data)))
			if s.Validate(data[:k]) == nil {
				t.Fatalf("the first %d of %d bytes of a valid datum validate", k, len(data))
			}
		}
	})
}

func BenchmarkValidateReference(b *testing.B) {
	s, rec := reference(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHambaDecode is the alternative the validator replaces: decoding
// the record into a generic value.
func BenchmarkHambaDecode(b *testing.B) {
	s, rec := reference(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := hamba.Unmarshal(s.Avro(), rec, &v); err != nil {
			b.Fatal(err)
		}
	}
}
