package avro

import (
	"testing"

	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// FuzzLocateAvro feeds arbitrary bytes to the locator of a schema with
// nested records, arrays of records, maps, arrays of arrays, unions and a
// recursive field. Invariants: it never panics, on the bytes or on their
// first split bytes; what it locates is in order and in bounds; and
// splicing longer values in and the originals back gives the bytes again.
func FuzzLocateAvro(f *testing.F) {
	s, err := Compile(shopSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	p, err := s.Plan(targets(shopTargets...))
	if err != nil {
		f.Fatal(err)
	}
	for _, api := range encoders {
		for _, o := range []shopOrder{fullOrder(), sparseOrder(), nullSSNOrder()} {
			b, err := api.Marshal(s.Avro(), o)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint16(len(b)/2))
		}
	}
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		var found fieldpath.Found
		_ = p.Locate(data[:int(split)%(len(data)+1)], &found)
		if p.Locate(data, &found) != nil {
			return
		}
		checkFound(t, &found, len(data))
		roundTrip(t, p, data, int(split%80))
	})
}
