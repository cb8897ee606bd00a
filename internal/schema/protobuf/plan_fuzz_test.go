package protobuf

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// FuzzLocateProtobuf locates fields of every shape (nested, repeated by
// [*] and by [N], map values, a oneof member, bytes, a large field number,
// a message within its own type) in arbitrary bytes. Invariants: Locate
// never panics and fails only with *fieldpath.Error; what Validate accepts,
// Locate accepts; on success its spans and frames are in record order,
// within the record and measured by their prefixes. Then each value is
// replaced by one of a length that split chooses (crossing the one- and
// two-byte prefix widths), and the result must locate to the replacements;
// splicing the originals back must give the record as Splice writes it
// unchanged, which is the record itself when its prefixes are minimal, as
// encoders write them.
func FuzzLocateProtobuf(f *testing.F) {
	m := shopOrder(f)
	p := plan(f, m, append(m.Tagged("PII"), "parent.customer.ssn", "cards[*].notes[1]", "cards[1].cvv", "note", "chunks[0]")...)
	_, ref := reference(f)
	f.Add(sampleShopOrder(f, m), uint16(0))
	f.Add(outOfOrder(), uint16(120))
	f.Add(ref, uint16(7))
	f.Add([]byte{}, uint16(0))
	// The customer's and the ssn's lengths written in two bytes, 0x85 0x00
	// and 0x83 0x00, where one would do.
	f.Add([]byte{2<<3 | 2, 0x85, 0, 2<<3 | 2, 0x83, 0, 's', 's', 'n'}, uint16(140))
	f.Add((&raw{}).bytes(2, (&raw{}).str(2, "ssn").b).group(99, (&raw{}).varint(1, 1).b).b, uint16(300))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		var found fieldpath.Found
		err := p.Locate(data, &found)
		if err != nil {
			var e *fieldpath.Error
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if verr := m.Validate(data); verr == nil {
				t.Fatalf("Validate accepts %x, Locate refuses it: %v", data, err)
			}
			return
		}
		checkFound(t, data, p, &found)
		size := func(i int) int { return (int(split) + 61*i) % 300 }
		i := 0
		spliced, err := fieldpath.Splice(nil, data, &found, func(dst []byte, _ *fieldpath.Span, _ []byte) ([]byte, error) {
			n := size(i)
			i++
			return append(dst, bytes.Repeat([]byte{'a'}, n)...), nil
		})
		if err != nil {
			t.Fatalf("Splice: %v", err)
		}
		if m.Validate(data) == nil {
			if err := m.Validate(spliced); err != nil {
				t.Fatalf("valid record spliced into an invalid one: %v", err)
			}
		}
		var again fieldpath.Found
		if err := p.Locate(spliced, &again); err != nil {
			t.Fatalf("Locate in the spliced record: %v", err)
		}
		checkFound(t, spliced, p, &again)
		if len(again.Spans) != len(found.Spans) {
			t.Fatalf("%d spans in the spliced record, %d in the original", len(again.Spans), len(found.Spans))
		}
		i = 0
		back, err := fieldpath.Splice(nil, spliced, &again, func(dst []byte, s *fieldpath.Span, val []byte) ([]byte, error) {
			orig := found.Spans[i]
			if s.Target != orig.Target || len(val) != size(i) {
				t.Fatalf("span %d: target %d of %d bytes, want target %d of %d", i, s.Target, len(val), orig.Target, size(i))
			}
			i++
			return append(dst, data[orig.Start:orig.End]...), nil
		})
		if err != nil {
			t.Fatalf("Splice back: %v", err)
		}
		same, err := fieldpath.Splice(nil, data, &found, func(dst []byte, _ *fieldpath.Span, val []byte) ([]byte, error) {
			return append(dst, val...), nil
		})
		if err != nil {
			t.Fatalf("Splice unchanged: %v", err)
		}
		if !bytes.Equal(back, same) {
			t.Fatalf("splice and back gives\n%x\nwant\n%x", back, same)
		}
		if minimalPrefixes(&found) && !bytes.Equal(back, data) {
			t.Fatalf("splice and back gives\n%x\nwant the record\n%x", back, data)
		}
	})
}

// minimalPrefixes reports whether every prefix f measures is written in
// the fewest bytes.
func minimalPrefixes(f *fieldpath.Found) bool {
	for _, s := range f.Spans {
		if s.Start-s.LenAt != protowire.SizeVarint(uint64(s.End-s.Start)) {
			return false
		}
	}
	for _, fr := range f.Frames {
		if fr.Start-fr.LenAt != protowire.SizeVarint(uint64(fr.End-fr.Start)) {
			return false
		}
	}
	return true
}
