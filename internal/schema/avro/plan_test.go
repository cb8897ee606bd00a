package avro

import (
	"bytes"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// shopSchema has a target of every shape around values that are not: a
// record behind a union with null, nested records, arrays of records, a
// map, an array of arrays, logical types, a wider union and the record
// itself again behind a union.
const shopSchema = `{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "due", "type": {"type": "int", "logicalType": "date"}},
    {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "customer", "type": ["null", {
      "type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": ["null", "string"], "default": null, "confluent:tags": ["PII"]},
        {"name": "photo", "type": "bytes"},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
          {"name": "street", "type": "string", "confluent:tags": ["PII"]},
          {"name": "zip", "type": "string"}
        ]}}
      ]}], "default": null},
    {"name": "cards", "type": {"type": "array", "items": {
      "type": "record", "name": "Card", "fields": [
        {"name": "number", "type": "string", "confluent:tags": ["PCI", "PII"]},
        {"name": "expiry", "type": "int", "confluent:tags": ["PII"]},
        {"name": "pin", "type": "bytes"}
      ]}}},
    {"name": "notes", "type": {"type": "map", "values": "string"}},
    {"name": "lines", "type": {"type": "array", "items": "string"}, "confluent:tags": ["INTERNAL"]},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "choice", "type": ["null", "string", "int"], "default": null},
    {"name": "flag", "type": "boolean"},
    {"name": "score", "type": "float"},
    {"name": "ratio", "type": "double"},
    {"name": "matrix", "type": {"type": "array", "items": {"type": "array", "items": "string"}}},
    {"name": "parent", "type": ["null", "Order"], "default": null},
    {"name": "tail", "type": "string"}
  ]
}`

type shopAddress struct {
	Street string `avro:"street"`
	Zip    string `avro:"zip"`
}

type shopCustomer struct {
	Name    string      `avro:"name"`
	SSN     *string     `avro:"ssn"`
	Photo   []byte      `avro:"photo"`
	Address shopAddress `avro:"address"`
}

type shopCard struct {
	Number string `avro:"number"`
	Expiry int32  `avro:"expiry"`
	Pin    []byte `avro:"pin"`
}

type shopOrder struct {
	ID       int64             `avro:"id"`
	Placed   time.Time         `avro:"placed"`
	Due      time.Time         `avro:"due"`
	Total    *big.Rat          `avro:"total"`
	Ref      string            `avro:"ref"`
	Customer *shopCustomer     `avro:"customer"`
	Cards    []shopCard        `avro:"cards"`
	Notes    map[string]string `avro:"notes"`
	Lines    []string          `avro:"lines"`
	State    string            `avro:"state"`
	Digest   [4]byte           `avro:"digest"`
	Choice   any               `avro:"choice"`
	Flag     bool              `avro:"flag"`
	Score    float32           `avro:"score"`
	Ratio    float64           `avro:"ratio"`
	Matrix   [][]string        `avro:"matrix"`
	Parent   *shopOrder        `avro:"parent"`
	Tail     string            `avro:"tail"`
}

// shopTail is the value of the last field, which no target reaches: the
// walk stops before it.
const shopTail = "the end"

func fullOrder() shopOrder {
	ssn := "123-45-6789"
	parentSSN := "987-65-4321"
	return shopOrder{
		ID: 7, Placed: time.UnixMilli(1_700_000_000_123).UTC(), Due: time.Unix(19_000*86400, 0).UTC(),
		Total: big.NewRat(12345, 100), Ref: uuid,
		Customer: &shopCustomer{
			Name: "Ada", SSN: &ssn, Photo: []byte{0, 1, 2, 0xff},
			Address: shopAddress{Street: "1 Main St", Zip: "12345"},
		},
		Cards: []shopCard{
			{Number: "4111 1111 1111 1111", Expiry: 2712, Pin: []byte("1234")},
			{Number: "5500 0000 0000 0004", Expiry: 2801, Pin: []byte("98765")},
			{Number: "", Expiry: 2902, Pin: nil},
		},
		Notes: map[string]string{"gate": "code 4321", "dog": "friendly"},
		Lines: []string{"first line", "second line", "third"},
		State: "PAID", Digest: [4]byte{9, 8, 7, 6}, Choice: "maybe",
		Flag: true, Score: 1.5, Ratio: 2.25,
		Matrix: [][]string{{"a", "b"}, {}, {"c"}},
		Parent: &shopOrder{
			ID: 6, Placed: time.UnixMilli(0).UTC(), Due: time.Unix(0, 0).UTC(), Total: big.NewRat(0, 1), Ref: uuid,
			Customer: &shopCustomer{Name: "Bob", SSN: &parentSSN, Address: shopAddress{Street: "2 Side St"}},
			Cards:    []shopCard{{Number: "3400 0000 0000 009"}}, Notes: map[string]string{},
			State: "NEW", Tail: "parent's tail",
		},
		Tail: shopTail,
	}
}

// sparseOrder has every union at null and every array and map empty.
func sparseOrder() shopOrder {
	return shopOrder{
		Placed: time.UnixMilli(0).UTC(), Due: time.Unix(0, 0).UTC(), Total: big.NewRat(-5, 1), Ref: uuid,
		Cards: []shopCard{}, Notes: map[string]string{}, Lines: []string{}, Matrix: [][]string{},
		State: "NEW", Tail: shopTail,
	}
}

// nullSSNOrder has a customer without an ssn.
func nullSSNOrder() shopOrder {
	o := fullOrder()
	o.Customer.SSN = nil
	o.Choice = int32(5)
	return o
}

// shopTargets are the targets of the round trips; shopReplaced applies to
// a decoded order what the replacement of enc does to them.
var shopTargets = []string{
	"customer.ssn", "customer.photo", "customer.address.street",
	"cards[*].number", "cards[1].pin", "notes[*]", "lines[0]", "lines[2]",
	"matrix[*][*]", "parent.customer.ssn", "parent.cards[*].number",
}

func shopReplaced(o *shopOrder, enc func(target int, v string) string) {
	if c := o.Customer; c != nil {
		if c.SSN != nil {
			s := enc(0, *c.SSN)
			c.SSN = &s
		}
		c.Photo = []byte(enc(1, string(c.Photo)))
		c.Address.Street = enc(2, c.Address.Street)
	}
	for i := range o.Cards {
		o.Cards[i].Number = enc(3, o.Cards[i].Number)
		if i == 1 {
			o.Cards[i].Pin = []byte(enc(4, string(o.Cards[i].Pin)))
		}
	}
	for k, v := range o.Notes {
		o.Notes[k] = enc(5, v)
	}
	for i, target := range map[int]int{0: 6, 2: 7} {
		if i < len(o.Lines) {
			o.Lines[i] = enc(target, o.Lines[i])
		}
	}
	for _, row := range o.Matrix {
		for i := range row {
			row[i] = enc(8, row[i])
		}
	}
	if p := o.Parent; p != nil {
		if p.Customer != nil && p.Customer.SSN != nil {
			s := enc(9, *p.Customer.SSN)
			p.Customer.SSN = &s
		}
		for i := range p.Cards {
			p.Cards[i].Number = enc(10, p.Cards[i].Number)
		}
	}
}

// shopBytesTargets are the targets that are bytes fields.
var shopBytesTargets = []int{1, 4}

func mustCompile(t testing.TB, text string) *Schema {
	t.Helper()
	s, err := Compile(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func targets(paths ...string) []fieldpath.Target {
	ts := make([]fieldpath.Target, len(paths))
	for i, p := range paths {
		ts[i] = fieldpath.Target{Path: fieldpath.MustParse(p)}
	}
	return ts
}

func mustPlan(t testing.TB, s *Schema, paths ...string) *Plan {
	t.Helper()
	p, err := s.Plan(targets(paths...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// encoders write arrays and maps the three ways a writer may: in blocks
// with a byte size (hamba's default), in many small sized blocks, and with
// plain counts.
var encoders = map[string]hamba.API{
	"sized blocks":       hamba.Config{}.Freeze(),
	"small sized blocks": hamba.Config{BlockLength: 1}.Freeze(),
	"counted blocks":     hamba.Config{DisableBlockSizeHeader: true}.Freeze(),
}

// grow is the replacement of the round trips: each value gains a prefix
// naming its target, so the result shows which target each span had.
func grow(extra int) fieldpath.ReplaceFunc {
	return func(dst []byte, s *fieldpath.Span, val []byte) ([]byte, error) {
		dst = append(dst, growPrefix(s.Target, extra)...)
		return append(dst, val...), nil
	}
}

func growPrefix(target, extra int) string {
	return fmt.Sprintf("<%d>", target) + strings.Repeat("+", extra)
}

// shrink undoes grow.
func shrink(extra int) fieldpath.ReplaceFunc {
	return func(dst []byte, s *fieldpath.Span, val []byte) ([]byte, error) {
		prefix := growPrefix(s.Target, extra)
		if !bytes.HasPrefix(val, []byte(prefix)) {
			return dst, fmt.Errorf("span of target %d at %d does not start with %q", s.Target, s.Start, prefix)
		}
		return append(dst, val[len(prefix):]...), nil
	}
}

// roundTrip splices grown values into body, then locates them in the
// result and splices the originals back, which must give body again. It
// returns the grown record.
func roundTrip(t *testing.T, p *Plan, body []byte, extra int) []byte {
	t.Helper()
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil {
		t.Fatalf("Locate: %v", err)
	}
	checkFound(t, &f, len(body))
	grown, err := fieldpath.Splice(nil, body, &f, grow(extra))
	if err != nil {
		t.Fatalf("Splice: %v", err)
	}
	spans := len(f.Spans)
	if err := p.Locate(grown, &f); err != nil {
		t.Fatalf("Locate in the spliced record: %v", err)
	}
	if len(f.Spans) != spans {
		t.Fatalf("%d spans in the spliced record, %d in the original", len(f.Spans), spans)
	}
	back, err := fieldpath.Splice(nil, grown, &f, shrink(extra))
	if err != nil {
		t.Fatalf("Splice back: %v", err)
	}
	if !bytes.Equal(back, body) {
		t.Fatalf("splicing the values back gives\n%x\nnot the record\n%x", back, body)
	}
	return grown
}

// checkFound checks that spans and frames are in record order, within n
// bytes, and that frames nest.
func checkFound(t testing.TB, f *fieldpath.Found, n int) {
	t.Helper()
	for i, s := range f.Spans {
		if s.LenAt >= s.Start || s.Start > s.End || s.End > n || (i > 0 && s.LenAt < f.Spans[i-1].End) {
			t.Fatalf("span %d %+v out of order or bounds (record of %d bytes)", i, s, n)
		}
	}
	for i, fr := range f.Frames {
		if fr.LenAt >= fr.Start || fr.Start > fr.End || fr.End > n || (i > 0 && fr.LenAt < f.Frames[i-1].LenAt) {
			t.Fatalf("frame %d %+v out of order or bounds (record of %d bytes)", i, fr, n)
		}
		for _, outer := range f.Frames[:i] {
			if fr.LenAt < outer.End && fr.End > outer.End {
				t.Fatalf("frame %+v overlaps the end of frame %+v", fr, outer)
			}
		}
		held := slices.ContainsFunc(f.Spans, func(s fieldpath.Span) bool { return s.LenAt >= fr.Start && s.End <= fr.End })
		if !held {
			t.Fatalf("frame %+v holds no span", fr)
		}
	}
}

// decodeOrder reads b with hamba. Orders compare decoded by hamba on both
// sides, so that values hamba builds (times, decimals) compare alike.
func decodeOrder(t *testing.T, s *Schema, b []byte) shopOrder {
	t.Helper()
	var o shopOrder
	if err := hamba.Unmarshal(s.Avro(), b, &o); err != nil {
		t.Fatalf("hamba cannot read the record: %v", err)
	}
	return o
}

func encodeOrder(t *testing.T, s *Schema, api hamba.API, o shopOrder) []byte {
	t.Helper()
	b, err := api.Marshal(s.Avro(), o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLocateShopRoundTrips(t *testing.T) {
	s := mustCompile(t, shopSchema)
	p := mustPlan(t, s, shopTargets...)
	orders := map[string]func() shopOrder{"full": fullOrder, "sparse": sparseOrder, "null ssn": nullSSNOrder}
	for encName, api := range encoders {
		for name, order := range orders {
			for _, extra := range []int{0, 1, 61, 200} {
				t.Run(fmt.Sprintf("%s/%s/%d", encName, name, extra), func(t *testing.T) {
					body := encodeOrder(t, s, api, order())
					grown := roundTrip(t, p, body, extra)
					if err := s.Validate(grown); err != nil {
						t.Fatalf("the spliced record does not validate: %v", err)
					}
					want := order()
					shopReplaced(&want, func(target int, v string) string { return growPrefix(target, extra) + v })
					want = decodeOrder(t, s, encodeOrder(t, s, api, want))
					if got := decodeOrder(t, s, grown); !reflect.DeepEqual(got, want) {
						t.Fatalf("the spliced record holds\n%+v\nnot the order with its targets replaced\n%+v", got, want)
					}
				})
			}
		}
	}
}

func TestLocateShopSpans(t *testing.T) {
	s := mustCompile(t, shopSchema)
	p := mustPlan(t, s, shopTargets...)
	var f fieldpath.Found
	count := func(o shopOrder) map[int]int {
		return countSpans(t, s, p, &f, encoders["sized blocks"], o)
	}
	// Every value of the full order once: a card's empty number too, and
	// only the items [0] and [2] name.
	want := map[int]int{0: 1, 1: 1, 2: 1, 3: 3, 4: 1, 5: 2, 6: 1, 7: 1, 8: 3, 9: 1, 10: 1}
	if got := count(fullOrder()); !maps.Equal(got, want) {
		t.Errorf("full order: spans per target %v, want %v", got, want)
	}
	// Nulls hold nothing.
	if got := count(sparseOrder()); len(got) != 0 {
		t.Errorf("sparse order: spans per target %v, want none", got)
	}
	delete(want, 0)
	if got := count(nullSSNOrder()); !maps.Equal(got, want) {
		t.Errorf("order without an ssn: spans per target %v, want %v", got, want)
	}

	// A sized block holding spans is a frame; one holding none is not
	// (with one item a block: the empty row of the matrix, the item of
	// lines no target names).
	frames := func(api hamba.API) int {
		countSpans(t, s, p, &f, api, fullOrder())
		return len(f.Frames)
	}
	for _, tt := range []struct {
		encoder string
		want    int
	}{
		// cards, notes, lines, the matrix and its two rows with values,
		// and the parent's cards.
		{"sized blocks", 7},
		// One block per item: three cards, two notes, lines [0] and
		// [2], two rows and three values in the matrix, the parent's card.
		{"small sized blocks", 13},
		{"counted blocks", 0},
	} {
		if got := frames(encoders[tt.encoder]); got != tt.want {
			t.Errorf("%s: %d frames, want %d", tt.encoder, got, tt.want)
		}
	}
}

// countSpans locates the targets in o, checks each span's kind, and counts
// the spans of each target.
func countSpans(t *testing.T, s *Schema, p *Plan, f *fieldpath.Found, api hamba.API, o shopOrder) map[int]int {
	t.Helper()
	body := encodeOrder(t, s, api, o)
	if err := p.Locate(body, f); err != nil {
		t.Fatal(err)
	}
	checkFound(t, f, len(body))
	n := map[int]int{}
	for _, sp := range f.Spans {
		n[sp.Target]++
		if got, want := sp.Bytes, slices.Contains(shopBytesTargets, sp.Target); got != want {
			t.Errorf("span of %s: Bytes = %v, want %v", shopTargets[sp.Target], got, want)
		}
		if sp.Len != fieldpath.Zigzag {
			t.Errorf("span of %s: Len = %v, want Zigzag", shopTargets[sp.Target], sp.Len)
		}
	}
	return n
}
