package avro

import (
	"bytes"
	"errors"
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

func TestPlanRefuses(t *testing.T) {
	s := mustCompile(t, shopSchema)
	const advice = "field encryption keeps a field's type and only string and bytes can hold ciphertext; " +
		"make the field a string or bytes, or encrypt the whole record with record-encryption"
	const unionAdvice = "a path goes only through a union of null and one other type, where it is clear what lies beyond; " +
		"encrypt the whole record with record-encryption"
	tests := []struct {
		paths []string
		want  string
	}{
		// Types that cannot hold ciphertext.
		{[]string{"id"}, `avro field path "id": is a long: ` + advice},
		{[]string{"cards[0].expiry"}, `avro field path "cards[0].expiry": is an int: ` + advice},
		{[]string{"placed"}, `avro field path "placed": is a long with logical type "timestamp-millis": ` + advice},
		{[]string{"flag"}, `avro field path "flag": is a boolean: ` + advice},
		{[]string{"score"}, `avro field path "score": is a float: ` + advice},
		{[]string{"ratio"}, `avro field path "ratio": is a double: ` + advice},
		{[]string{"state"}, `avro field path "state": is an enum (shop.State): ` + advice},
		{[]string{"digest"}, `avro field path "digest": is a fixed (shop.Digest): ` + advice},
		{[]string{"customer"}, `avro field path "customer": is a record (shop.Customer): ` + advice},
		{[]string{"customer.address"}, `avro field path "customer.address": is a record (shop.Address): ` + advice},
		{[]string{"cards"}, `avro field path "cards": is an array: ` + advice},
		{[]string{"notes"}, `avro field path "notes": is a map: ` + advice},
		{[]string{"matrix[*]"}, `avro field path "matrix[*]": is an array: ` + advice},
		{[]string{"choice"}, `avro field path "choice": is a union of null, string and int: ` + advice},
		// Logical types over string and bytes.
		{[]string{"total"}, `avro field path "total": is a decimal (bytes holding a number): readers decode it as a number, ` +
			`and ciphertext in its place is no number; drop the logical type, or encrypt the whole record with record-encryption`},
		{[]string{"ref"}, `avro field path "ref": is a string with logical type "uuid": readers that know the logical type parse the value, ` +
			`and ciphertext in its place would not parse; drop the logical type, or encrypt the whole record with record-encryption`},
		// Paths the schema does not have.
		{[]string{"nope"}, `avro field path "nope": no field "nope" in a record (shop.Order); its fields are: ` +
			`id, placed, due, total, ref, customer, cards, notes, lines, state, digest, choice, flag, score, ratio, matrix, parent, tail`},
		{[]string{"customer.nope"}, `avro field path "customer.nope": no field "nope" in a record (shop.Customer) at customer; its fields are: name, ssn, photo, address`},
		{[]string{"customer[0]"}, `avro field path "customer[0]": customer is a record (shop.Customer), not an array or map: select one of its fields (name, ssn, photo, address) instead of [0]`},
		{[]string{"cards.number"}, `avro field path "cards.number": cards is an array: select its items with [*] or [N] before naming their field "number"`},
		{[]string{"notes.gate"}, `avro field path "notes.gate": notes is a map: select its values with [*] before naming their field "gate"`},
		{[]string{"notes[0]"}, `avro field path "notes[0]": notes is a map: [0] selects an array item; select every value of a map with [*]`},
		{[]string{"id.x"}, `avro field path "id.x": id is a long: it has no fields or items to select`},
		{[]string{"parent.customer.address.street.x"}, `avro field path "parent.customer.address.street.x": parent.customer.address.street is a string: it has no fields or items to select`},
		{[]string{"choice.x"}, `avro field path "choice.x": choice is a union of null, string and int: ` + unionAdvice},
		// Targets that overlap.
		{nil, `avro field paths: none given; name at least one string or bytes field`},
		{[]string{"customer.ssn", "tail", "customer.ssn"}, `avro field path "customer.ssn": listed twice; list each field once`},
		{[]string{"customer", "customer.ssn"}, `avro field path "customer": holds "customer.ssn", which is listed too; list one of them`},
		{[]string{"customer.ssn", "customer"}, `avro field path "customer": holds "customer.ssn", which is listed too; list one of them`},
		{[]string{"lines[*]", "lines[1]"}, `avro field path "lines[1]": names a value "lines[*]" names too; list each value once`},
		{[]string{"lines[*]", "lines[1].x"}, `avro field path "lines[1].x": goes into lines[1], which "lines[*]" names whole; list one of them`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.paths, ","), func(t *testing.T) {
			p, err := s.Plan(targets(tt.paths...))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Plan = %v\nwant %s", err, tt.want)
			}
			if p != nil {
				t.Error("Plan returned a plan with its error")
			}
		})
	}
}

func TestPlanRefusesOtherSchemas(t *testing.T) {
	tests := []struct {
		schema, path, want string
	}{
		{`{"type": "array", "items": "string"}`, "x",
			`avro field path "x": the schema's top-level type is an array, not a record: field paths name fields of a record`},
		{`["int", {"type": "record", "name": "R", "fields": [{"name": "x", "type": "string"}]}]`, "x",
			`avro field path "x": the schema's top-level type is a union of int and R: a path goes only through a union of null and one other type, ` +
				`where it is clear what lies beyond; encrypt the whole record with record-encryption`},
		// A logical type hamba does not know, which other readers may.
		{`{"type": "record", "name": "R", "fields": [{"name": "b", "type": {"type": "bytes", "logicalType": "big-decimal"}}]}`, "b",
			`avro field path "b": is bytes with logical type "big-decimal": readers that know the logical type parse the value, ` +
				`and ciphertext in its place would not parse; drop the logical type, or encrypt the whole record with record-encryption`},
		{`{"type": "record", "name": "R", "fields": [{"name": "n", "type": "null"}]}`, "n",
			`avro field path "n": is a null: field encryption keeps a field's type and only string and bytes can hold ciphertext; ` +
				`make the field a string or bytes, or encrypt the whole record with record-encryption`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, err := mustCompile(t, tt.schema).Plan(targets(tt.path))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Plan = %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestPlanTargets(t *testing.T) {
	s := mustCompile(t, shopSchema)
	ts := targets("tail", "customer.ssn")
	p, err := s.Plan(ts)
	if err != nil {
		t.Fatal(err)
	}
	ts[0].Path = fieldpath.MustParse("id")
	if got := p.Targets(); len(got) != 2 || got[0].Path.Text != "tail" || got[1].Path.Text != "customer.ssn" {
		t.Errorf("Targets = %v, want tail and customer.ssn in their order, unchanged by the caller's slice", got)
	}
}

// TestLocateTopLevelUnion: a schema whose top level is a record or null
// is looked through like a field.
func TestLocateTopLevelUnion(t *testing.T) {
	s := mustCompile(t, `["null", {"type": "record", "name": "R", "fields": [{"name": "x", "type": "string"}, {"name": "y", "type": "long"}]}]`)
	p := mustPlan(t, s, "x")
	var f fieldpath.Found
	if err := p.Locate([]byte{2, 4, 'h', 'i', 0xff}, &f); err != nil || len(f.Spans) != 1 || f.Spans[0] != (fieldpath.Span{LenAt: 1, Start: 2, End: 4, Len: fieldpath.Zigzag}) {
		t.Errorf("record branch: %v, spans %+v", err, f.Spans)
	}
	if err := p.Locate([]byte{0}, &f); err != nil || len(f.Spans) != 0 {
		t.Errorf("null branch: %v, spans %+v", err, f.Spans)
	}
}

// smallSchema is the schema of the hand-written records: a value skipped
// before the targets, a target in a record behind a union, in the records
// of an array and in a map, and a value after them that is never read.
const smallSchema = `{
  "type": "record", "name": "R", "fields": [
    {"name": "skipped", "type": "string"},
    {"name": "c", "type": ["null", {"type": "record", "name": "C", "fields": [
      {"name": "secret", "type": ["null", "string"]},
      {"name": "after", "type": "long"}
    ]}]},
    {"name": "list", "type": {"type": "array", "items": {"type": "record", "name": "I", "fields": [
      {"name": "v", "type": "bytes"}
    ]}}},
    {"name": "m", "type": {"type": "map", "values": "string"}},
    {"name": "tail", "type": "string"}
  ]
}`

// small writes a record of smallSchema: skipped "", c null, then list and
// m as given (each its blocks and the closing zero). The tail is left out:
// the walk stops before it.
func small(c, list, m []byte) []byte {
	b := []byte{0}
	if c == nil {
		b = append(b, 0)
	} else {
		b = append(append(b, 2), c...)
	}
	return append(append(b, list...), m...)
}

func TestLocateErrors(t *testing.T) {
	s := mustCompile(t, smallSchema)
	p := mustPlan(t, s, "c.secret", "list[*].v", "m[*]")
	const secret = "s3cr3t"
	secretLen := byte(2 * len(secret))
	none := []byte{0}
	cWith := func(after ...byte) []byte { return append([]byte{2, secretLen}, append([]byte(secret), after...)...) }
	overlong := bytes.Repeat([]byte{0xff}, 11)
	tests := []struct {
		name          string
		body          []byte
		field, reason string
	}{
		{"empty", nil, "skipped", "string length: truncated"},
		{"skipped value past the end", []byte{10, 'a'}, "skipped", "string of 5 bytes but only 1 bytes left"},
		{"skipped length negative", []byte{1}, "skipped", "string length is negative"},
		{"union branch out of range", []byte{0, 4}, "c", "union branch 2 out of range [0, 2)"},
		{"inner union branch out of range", []byte{0, 2, 6}, "c.secret", "union branch 3 out of range [0, 2)"},
		{"target past the end", []byte{0, 2, 2, 40, 's', '3'}, "c.secret", "string of 20 bytes but only 2 bytes left"},
		{"target length negative", []byte{0, 2, 2, 3}, "c.secret", "string length is negative"},
		{"target length padded", small(append([]byte{2, secretLen | 0x80, 0}, append([]byte(secret), 0)...), none, none), "c.secret", "string length is not in its shortest form"},
		{"skipped long truncated", small(cWith(), nil, nil), "c.after", "long: truncated"},
		{"skipped long overlong", small(cWith(overlong...), none, none), "c.after", "long: varint longer than 10 bytes"},
		{"no array", small(cWith(0), nil, nil), "list", "array block count: truncated"},
		{"array count out of range", small(nil, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, none), "list", "array block count out of range"},
		{"array count the bytes cannot hold", small(nil, append(appendLong(nil, 1000), 2, 'x', 0), none), "list", "array block of 1000 items cannot fit in the 4 bytes left"},
		{"array size past the end", small(nil, append(appendLong(nil, -1), 100, 2, 'x', 0), none), "list", "array block of 50 bytes but only 4 bytes left"},
		{"array size overlong", small(nil, append(appendLong(nil, -1), overlong...), none), "list", "array block size: varint longer than 10 bytes"},
		{"array size not its items'", small(nil, []byte{1, 10, 2, 'x', 0, 0, 0, 0}, none), "list", "array block of 5 bytes holds items of 2 bytes"},
		{"array size padded", small(nil, []byte{1, 0x84, 0, 2, 'x', 0}, none), "list", "array block size is not in its shortest form"},
		{"item truncated", small(nil, []byte{4, 2, 'x', 40, 'y'}, none), "list[1].v", "bytes of 20 bytes but only 2 bytes left"},
		{"second block's item truncated", small(nil, []byte{2, 2, 'x', 2, 40}, none), "list[1].v", "bytes of 20 bytes but only 1 bytes left"},
		{"map key past the end", small(nil, none, []byte{2, 20, 'k'}), "m[0]", "map key of 10 bytes but only 1 bytes left"},
		{"map key overlong", small(nil, none, append([]byte{2}, overlong...)), "m[0]", "map key length: varint longer than 10 bytes"},
		{"map value missing", small(nil, none, []byte{2, 2, 'k'}), "m[0]", "string length: truncated"},
		{"map count the bytes cannot hold", small(nil, none, []byte{6, 2, 'k', 0}), "m", "map block of 3 items cannot fit in the 3 bytes left"},
	}
	var f fieldpath.Found
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Locate(tt.body, &f)
			var e *fieldpath.Error
			if !errors.As(err, &e) {
				t.Fatalf("Locate = %v, want a *fieldpath.Error", err)
			}
			if e.Field != tt.field || e.Reason != tt.reason {
				t.Errorf("got field %q reason %q, want field %q reason %q", e.Field, e.Reason, tt.field, tt.reason)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("message %q holds the value", err)
			}
		})
	}
}

// TestLocateStopsAfterTargets: the bytes after the last top-level field
// holding a target are neither read nor checked.
func TestLocateStopsAfterTargets(t *testing.T) {
	s := mustCompile(t, smallSchema)
	p := mustPlan(t, s, "c.secret")
	var f fieldpath.Found
	body := []byte{0, 2, 2, 4, 'h', 'i', 0, 0xff, 0xff} // list and m are garbage
	if err := p.Locate(body, &f); err != nil || len(f.Spans) != 1 || f.Spans[0].Start != 4 || f.Spans[0].End != 6 {
		t.Errorf("Locate = %v, spans %+v; want the secret at 4..6", err, f.Spans)
	}
	// Without the secret, nothing is read past c.
	if err := p.Locate([]byte{0, 2, 0, 0}, &f); err != nil || len(f.Spans) != 0 {
		t.Errorf("Locate of a null secret = %v, spans %+v", err, f.Spans)
	}
}

// TestLocateDeepAndEmpty: nesting and empty items are bounded as in
// validation, in skipped values too.
func TestLocateDeepAndEmpty(t *testing.T) {
	s := mustCompile(t, `{"type": "record", "name": "N", "fields": [
	  {"name": "next", "type": ["null", "N"]},
	  {"name": "nulls", "type": {"type": "array", "items": "null"}},
	  {"name": "s", "type": "string"}
	]}`)
	p := mustPlan(t, s, "s")
	var f fieldpath.Found
	deep := bytes.Repeat([]byte{2}, 2*maxDepth)
	err := p.Locate(deep, &f)
	var e *fieldpath.Error
	if !errors.As(err, &e) || !strings.HasPrefix(e.Field, "next.next.next.") || e.Reason != "nested deeper than 256 levels" {
		t.Errorf("deep record: %v", err)
	}
	empty := append([]byte{0}, appendLong(nil, 1<<40)...)
	if err := p.Locate(empty, &f); err == nil || err.Error() != `field "nulls": array of more than 1048576 empty items` {
		t.Errorf("array of 2^40 nulls: %v", err)
	}
	// A sized block of nulls is jumped over, whatever its count.
	jumped := append(append(append([]byte{0}, appendLong(nil, -(1<<40))...), 0, 0), 4, 'o', 'k')
	if err := p.Locate(jumped, &f); err != nil || len(f.Spans) != 1 || string(jumped[f.Spans[0].Start:f.Spans[0].End]) != "ok" {
		t.Errorf("sized block of 2^40 nulls: %v, spans %+v", err, f.Spans)
	}
}

// TestLocateSizedBlocksByHand: blocks with a byte size, mixed with counted
// ones, and sizes whose varint grows and shrinks a byte when the values
// do (63 bytes fit one byte of zigzag varint, 64 need two).
func TestLocateSizedBlocksByHand(t *testing.T) {
	s := mustCompile(t, `{"type": "record", "name": "R", "fields": [
	  {"name": "a", "type": {"type": "array", "items": "string"}},
	  {"name": "z", "type": "string"}
	]}`)
	p := mustPlan(t, s, "a[*]")
	item := func(n int, c byte) []byte { return encodeStrings(bytes.Repeat([]byte{c}, n)) }
	var body []byte
	body = appendLong(appendLong(body, -1), 63) // one item, 63 bytes
	body = append(body, item(62, 'a')...)
	body = appendLong(body, 2) // two items, counted
	body = append(append(body, item(3, 'b')...), item(0, 'c')...)
	body = appendLong(appendLong(body, -2), 64) // two items, 64 bytes
	body = append(append(body, item(1, 'd')...), item(61, 'e')...)
	body = append(appendLong(body, 0), encodeStrings([]byte("zz"))...)
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil {
		t.Fatal(err)
	}
	wantFrames := []fieldpath.Frame{{LenAt: 1, Start: 2, End: 65, Len: fieldpath.Zigzag}, {LenAt: 72, Start: 74, End: 138, Len: fieldpath.Zigzag}}
	if !slices.Equal(f.Frames, wantFrames) || len(f.Spans) != 5 {
		t.Fatalf("frames %+v, %d spans; want frames %+v and 5 spans", f.Frames, len(f.Spans), wantFrames)
	}

	// One byte more in the first item, one less in the last: the first
	// size takes two bytes, the second one.
	edit := func(dst []byte, sp *fieldpath.Span, val []byte) ([]byte, error) {
		switch {
		case sp.Start == 3:
			return append(append(dst, val...), 'a'), nil
		case len(val) == 61:
			return append(dst, val[1:]...), nil
		}
		return append(dst, val...), nil
	}
	got, err := fieldpath.Splice(nil, body, &f, edit)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = appendLong(appendLong(want, -1), 64)
	want = append(want, item(63, 'a')...)
	want = appendLong(want, 2)
	want = append(append(want, item(3, 'b')...), item(0, 'c')...)
	want = appendLong(appendLong(want, -2), 63)
	want = append(append(want, item(1, 'd')...), item(60, 'e')...)
	want = append(appendLong(want, 0), encodeStrings([]byte("zz"))...)
	if !bytes.Equal(got, want) {
		t.Fatalf("spliced\n%x\nwant\n%x", got, want)
	}
	var r struct {
		A []string `avro:"a"`
		Z string   `avro:"z"`
	}
	if err := hamba.Unmarshal(s.Avro(), got, &r); err != nil {
		t.Fatal(err)
	}
	wantA := []string{strings.Repeat("a", 63), "bbb", "", "d", strings.Repeat("e", 60)}
	if !slices.Equal(r.A, wantA) || r.Z != "zz" {
		t.Errorf("hamba reads %q, %q", r.A, r.Z)
	}
	for _, extra := range []int{0, 1, 60, 61, 62, 200} {
		roundTrip(t, p, body, extra)
	}
}

// TestLocateJumpsBlocks: a sized block none of whose items a target names
// is jumped over unread; a counted one is walked.
func TestLocateJumpsBlocks(t *testing.T) {
	s := mustCompile(t, `{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "array", "items": "string"}}]}`)
	p := mustPlan(t, s, "a[2]")
	var body []byte
	body = appendLong(appendLong(body, -2), 4) // items 0 and 1, garbage inside
	body = append(body, 0xff, 0xff, 0xff, 0xff)
	body = appendLong(appendLong(body, -1), 3) // item 2
	body = append(body, encodeStrings([]byte("xy"))...)
	body = append(appendLong(body, 1), encodeStrings([]byte("3"))...) // item 3, counted
	body = appendLong(body, 0)
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Spans) != 1 || string(body[f.Spans[0].Start:f.Spans[0].End]) != "xy" || len(f.Frames) != 1 || f.Frames[0].LenAt != 7 {
		t.Errorf("spans %+v frames %+v; want item 2 in the frame of the second block", f.Spans, f.Frames)
	}
	body[len(body)-3] = 40 // item 3 is read: its length is past the end
	if err := p.Locate(body, &f); err == nil || err.Error() != `field "a[3]": string of 20 bytes but only 2 bytes left` {
		t.Errorf("Locate with item 3 broken: %v", err)
	}
}

// TestLocateTruncated cuts a record at every byte: it never panics, and
// succeeds exactly when the cut is at or after the end of the last field
// holding a target, with the spans of the whole record.
func TestLocateTruncated(t *testing.T) {
	s := mustCompile(t, shopSchema)
	p := mustPlan(t, s, shopTargets...)
	var whole, cut fieldpath.Found
	for name, api := range encoders {
		body := encodeOrder(t, s, api, fullOrder())
		if err := p.Locate(body, &whole); err != nil {
			t.Fatal(err)
		}
		stop := len(body) - len(encodeStrings([]byte(shopTail)))
		for i := range len(body) {
			err := p.Locate(body[:i], &cut)
			switch {
			case i < stop && err == nil:
				t.Fatalf("%s: the first %d of %d bytes locate; the walk ends at %d", name, i, len(body), stop)
			case i >= stop && err != nil:
				t.Fatalf("%s: the first %d of %d bytes: %v; the walk ends at %d", name, i, len(body), err, stop)
			case i >= stop && (!slices.Equal(cut.Spans, whole.Spans) || !slices.Equal(cut.Frames, whole.Frames)):
				t.Fatalf("%s: the first %d bytes give other spans than the whole record", name, i)
			}
		}
	}
}

func TestTagged(t *testing.T) {
	s := mustCompile(t, shopSchema)
	tests := []struct {
		tag  string
		want []string
	}{
		// Not cards[*].expiry, an int; not parent's fields: the walk does
		// not enter the record it is in.
		{"PII", []string{"customer.ssn", "customer.address.street", "cards[*].number"}},
		{"PCI", []string{"cards[*].number"}},
		// A tagged array of strings: its items.
		{"INTERNAL", []string{"lines[*]"}},
		{"pii", nil},
	}
	for _, tt := range tests {
		got := s.Tagged(tt.tag)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Tagged(%q) = %q, want %q", tt.tag, got, tt.want)
		}
		if len(got) > 0 {
			mustPlan(t, s, got...)
		}
	}

	// Behind a union Plan cannot look through, the field is still listed,
	// and Plan says why it cannot be encrypted.
	u := mustCompile(t, `{"type": "record", "name": "R", "fields": [
	  {"name": "who", "type": ["null",
	    {"type": "record", "name": "A", "fields": [{"name": "ssn", "type": "string", "confluent:tags": ["PII"]}]},
	    {"type": "record", "name": "B", "fields": [{"name": "ssn", "type": "bytes", "confluent:tags": ["PII"]}]}
	  ]},
	  {"name": "notes", "type": {"type": "map", "values": ["null", "string"]}, "confluent:tags": ["PII"]},
	  {"name": "tree", "type": {"type": "record", "name": "T", "fields": [
	    {"name": "label", "type": "string", "confluent:tags": ["PII"]},
	    {"name": "kids", "type": {"type": "array", "items": "T"}}
	  ]}}
	]}`)
	want := []string{"who.ssn", "notes[*]", "tree.label"}
	if got := u.Tagged("PII"); !slices.Equal(got, want) {
		t.Errorf("Tagged = %q, want %q", got, want)
	}
	if _, err := u.Plan(targets(want...)); err == nil || !strings.Contains(err.Error(), `"who.ssn": who is a union of null, A and B`) {
		t.Errorf("Plan of a field behind a wide union: %v", err)
	}
}

// TestLocateAllocs: a walk allocates nothing once Found has grown.
func TestLocateAllocs(t *testing.T) {
	ref, rec := reference(t)
	s := mustCompile(t, shopSchema)
	order := encodeOrder(t, s, encoders["small sized blocks"], fullOrder())
	for name, tt := range map[string]struct {
		p    *Plan
		body []byte
	}{
		"reference": {mustPlan(t, ref, "ssn"), rec},
		"order":     {mustPlan(t, s, shopTargets...), order},
	} {
		var f fieldpath.Found
		allocs := testing.AllocsPerRun(100, func() {
			if err := tt.p.Locate(tt.body, &f); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Locate", name, allocs)
		}
	}
}

// BenchmarkLocateAvro locates the ssn of the reference record (a 36-char
// id, a status, the ssn and 930 chars of notes).
func BenchmarkLocateAvro(b *testing.B) {
	s, rec := reference(b)
	p := mustPlan(b, s, "ssn")
	var f fieldpath.Found
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Locate(rec, &f); err != nil {
			b.Fatal(err)
		}
	}
	if len(f.Spans) != 1 || string(rec[f.Spans[0].Start:f.Spans[0].End]) != "123-45-6789" {
		b.Fatalf("spans %+v", f.Spans)
	}
}
