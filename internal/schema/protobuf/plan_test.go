package protobuf

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/straitgw/strait/internal/schema/fieldpath"
)

func targets(paths ...string) []fieldpath.Target {
	out := make([]fieldpath.Target, len(paths))
	for i, p := range paths {
		out[i] = fieldpath.Target{Path: fieldpath.MustParse(p)}
	}
	return out
}

func plan(t testing.TB, m *Message, paths ...string) *Plan {
	t.Helper()
	p, err := m.Plan(targets(paths...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dyn builds dynamic messages by field name.
type dyn struct {
	protoreflect.Message
}

func newDyn(md protoreflect.MessageDescriptor) dyn { return dyn{dynamicpb.NewMessage(md)} }

func (d dyn) fd(name string) protoreflect.FieldDescriptor {
	fd := d.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name)
	}
	return fd
}

func (d dyn) set(name string, v any) dyn {
	d.Set(d.fd(name), protoreflect.ValueOf(v))
	return d
}

func (d dyn) msg(name string) dyn { return dyn{d.Mutable(d.fd(name)).Message()} }

func (d dyn) add(name string, vs ...any) dyn {
	l := d.Mutable(d.fd(name)).List()
	for _, v := range vs {
		l.Append(protoreflect.ValueOf(v))
	}
	return d
}

func (d dyn) addMsg(name string) dyn {
	l := d.Mutable(d.fd(name)).List()
	e := l.AppendMutable()
	return dyn{e.Message()}
}

func (d dyn) put(name string, key string, v any) dyn {
	d.Mutable(d.fd(name)).Map().Set(protoreflect.ValueOfString(key).MapKey(), protoreflect.ValueOf(v))
	return d
}

func (d dyn) putMsg(name string, key string) dyn {
	return dyn{d.Mutable(d.fd(name)).Map().Mutable(protoreflect.ValueOfString(key).MapKey()).Message()}
}

func (d dyn) marshal(t testing.TB) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(d.Interface())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleShopOrder fills every field of an Order, the iban of the oneof.
func sampleShopOrder(t testing.TB, m *Message) []byte {
	o := newDyn(m.Descriptor())
	o.set("id", int64(42))
	c := o.msg("customer").set("name", "Ada").set("ssn", "123-45-6789").set("age", int32(36))
	c.msg("home").set("street", "1 Main St").set("city", "Springfield")
	c.add("emails", "a@x.org", "b@y.org")
	o.addMsg("cards").set("number", "4111111111111111").set("cvv", []byte{1, 2, 3}).set("month", int32(7)).add("notes", "n1", "n2")
	o.addMsg("cards").set("number", "5500000000000004").set("cvv", []byte{9}).add("notes", "n3")
	o.add("qty", int32(1), int32(300), int32(70000))
	o.put("attrs", "k1", "v1").put("attrs", "k2", "v2")
	o.putMsg("saved", "home").set("number", "340000000000009")
	o.set("iban", "DE89370400440532013000")
	o.set("blob", []byte{0xff, 0, 0x10})
	o.add("chunks", []byte{1}, []byte{2, 3})
	o.set("note", "large field number")
	o.msg("parent").set("id", int64(1)).msg("customer").set("ssn", "987-65-4321")
	return o.marshal(t)
}

// checkFound checks what Locate reports for body: spans and frames in
// record order, within body and each frame's bounds, frames nested.
func checkFound(t testing.TB, body []byte, p *Plan, f *fieldpath.Found) {
	t.Helper()
	prevEnd := 0
	for i, s := range f.Spans {
		if s.LenAt < prevEnd || s.LenAt > s.Start || s.Start > s.End || s.End > len(body) || s.Len != fieldpath.Uvarint {
			t.Fatalf("span %d %+v out of order or bounds (record of %d bytes, previous span ends at %d)", i, s, len(body), prevEnd)
		}
		if s.Target < 0 || s.Target >= len(p.Targets()) {
			t.Fatalf("span %d has target %d of %d", i, s.Target, len(p.Targets()))
		}
		if v, n := protowire.ConsumeVarint(body[s.LenAt:]); n != s.Start-s.LenAt || int(v) != s.End-s.Start {
			t.Fatalf("span %d: prefix at %d does not measure %d..%d", i, s.LenAt, s.Start, s.End)
		}
		prevEnd = s.End
	}
	var open []fieldpath.Frame
	for i, fr := range f.Frames {
		if fr.LenAt > fr.Start || fr.Start > fr.End || fr.End > len(body) || fr.Len != fieldpath.Uvarint {
			t.Fatalf("frame %d %+v out of bounds (record of %d bytes)", i, fr, len(body))
		}
		if i > 0 && fr.LenAt <= f.Frames[i-1].LenAt {
			t.Fatalf("frame %d at %d after frame %d at %d", i, fr.LenAt, i-1, f.Frames[i-1].LenAt)
		}
		for len(open) > 0 && open[len(open)-1].End <= fr.LenAt {
			open = open[:len(open)-1]
		}
		if len(open) > 0 && (fr.End > open[len(open)-1].End) {
			t.Fatalf("frame %d %+v overlaps the end of the frame around it %+v", i, fr, open[len(open)-1])
		}
		open = append(open, fr)
		if v, n := protowire.ConsumeVarint(body[fr.LenAt:]); n != fr.Start-fr.LenAt || int(v) != fr.End-fr.Start {
			t.Fatalf("frame %d: prefix at %d does not measure %d..%d", i, fr.LenAt, fr.Start, fr.End)
		}
		if !slices.ContainsFunc(f.Spans, func(s fieldpath.Span) bool { return s.LenAt >= fr.Start && s.End <= fr.End }) {
			t.Fatalf("frame %d %+v holds no span", i, fr)
		}
	}
}

// located lists "path=value" for each span, in record order.
func located(t testing.TB, p *Plan, body []byte) []string {
	t.Helper()
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil {
		t.Fatalf("Locate: %v", err)
	}
	checkFound(t, body, p, &f)
	var out []string
	for _, s := range f.Spans {
		out = append(out, fmt.Sprintf("%s=%q", p.Targets()[s.Target].Path.Text, body[s.Start:s.End]))
	}
	return out
}

func TestLocateEveryShape(t *testing.T) {
	m := shopOrder(t)
	body := sampleShopOrder(t, m)
	p := plan(t, m, "customer.ssn", "customer.home.street", "customer.emails[*]", "cards[*].number",
		"attrs[*]", "saved[*].number", "iban", "blob", "parent.customer.ssn",
		"cards[*].notes[1]", "cards[1].cvv", "note", "chunks[0]", "card.number")
	got := located(t, p, body)
	want := []string{
		`customer.ssn="123-45-6789"`, `customer.home.street="1 Main St"`,
		`customer.emails[*]="a@x.org"`, `customer.emails[*]="b@y.org"`,
		`cards[*].number="4111111111111111"`, `cards[*].notes[1]="n2"`,
		`cards[*].number="5500000000000004"`, `cards[1].cvv="\t"`,
		`attrs[*]="v1"`, `attrs[*]="v2"`, `saved[*].number="340000000000009"`,
		`blob="\xff\x00\x10"`, `chunks[0]="\x01"`,
		`parent.customer.ssn="987-65-4321"`, `note="large field number"`,
		// The runtime writes a oneof's fields last.
		`iban="DE89370400440532013000"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("located\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Spans {
		path := p.Targets()[s.Target].Path.Text
		if wantBytes := path == "blob" || path == "chunks[0]" || path == "cards[1].cvv"; s.Bytes != wantBytes {
			t.Errorf("%s: Bytes = %v", path, s.Bytes)
		}
	}
	// Frames: customer, home, each card, each attrs entry, the saved entry
	// and its card, parent and its customer.
	if len(f.Frames) != 10 {
		t.Errorf("%d frames, want 10: %+v", len(f.Frames), f.Frames)
	}

	// The other member of the oneof.
	o := newDyn(m.Descriptor())
	o.msg("card").set("number", "4000").set("month", int32(1))
	if got := located(t, p, o.marshal(t)); !slices.Equal(got, []string{`card.number="4000"`}) {
		t.Errorf("oneof card: %q", got)
	}
	if got := located(t, p, nil); len(got) != 0 {
		t.Errorf("empty record: %q", got)
	}
}

// grow returns a replacement k bytes longer than val (shorter for k < 0),
// keeping it ASCII where val is.
func grow(k int) func([]byte) []byte {
	return func(val []byte) []byte {
		if k < 0 {
			return val[:max(len(val)+k, 0)]
		}
		return append(append([]byte("<"), val...), bytes.Repeat([]byte{'~'}, k-1)...)
	}
}

// roundTrip replaces every located value of body by g(value) with
// fieldpath.Splice and checks that the result is a valid record equal to
// body's but for those values, then locates them again and splices the
// originals back, which must give body byte for byte. It returns the
// spliced record.
func roundTrip(t *testing.T, m *Message, p *Plan, body []byte, g func([]byte) []byte) []byte {
	t.Helper()
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil {
		t.Fatalf("Locate: %v", err)
	}
	checkFound(t, body, p, &f)
	spliced, err := fieldpath.Splice(nil, body, &f, func(dst []byte, _ *fieldpath.Span, val []byte) ([]byte, error) {
		return append(dst, g(val)...), nil
	})
	if err != nil {
		t.Fatalf("Splice: %v", err)
	}
	if err := m.Validate(spliced); err != nil {
		t.Fatalf("spliced record does not validate: %v", err)
	}
	want := decode(t, m, body)
	for _, tg := range p.Targets() {
		apply(want, tg.Path.Steps, g)
	}
	if got := decode(t, m, spliced); !proto.Equal(got.Interface(), want.Interface()) {
		t.Fatalf("spliced record decodes to\n%v\nwant\n%v", got, want)
	}

	var again fieldpath.Found
	if err := p.Locate(spliced, &again); err != nil {
		t.Fatalf("Locate in the spliced record: %v", err)
	}
	checkFound(t, spliced, p, &again)
	if len(again.Spans) != len(f.Spans) {
		t.Fatalf("%d spans in the spliced record, %d in the original", len(again.Spans), len(f.Spans))
	}
	i := 0
	back, err := fieldpath.Splice(nil, spliced, &again, func(dst []byte, s *fieldpath.Span, val []byte) ([]byte, error) {
		orig := f.Spans[i]
		i++
		if s.Target != orig.Target || !bytes.Equal(val, g(body[orig.Start:orig.End])) {
			return nil, fmt.Errorf("span %d of the spliced record is %q of target %d, want the replacement of target %d", i-1, val, s.Target, orig.Target)
		}
		return append(dst, body[orig.Start:orig.End]...), nil
	})
	if err != nil {
		t.Fatalf("Splice back: %v", err)
	}
	if !bytes.Equal(back, body) {
		t.Fatalf("splice back gives\n%x\nwant\n%x", back, body)
	}
	return spliced
}

func decode(t testing.TB, m *Message, b []byte) protoreflect.Message {
	t.Helper()
	msg := dynamicpb.NewMessage(m.Descriptor())
	if err := proto.Unmarshal(b, msg); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	return msg
}

// apply replaces, in msg, every value that steps select by g(value): the
// decoded form of what roundTrip splices into the bytes.
func apply(msg protoreflect.Message, steps []fieldpath.Step, g func([]byte) []byte) {
	fd := msg.Descriptor().Fields().ByName(protoreflect.Name(steps[0].Name))
	if !msg.Has(fd) {
		return
	}
	rest := steps[1:]
	leaf := func(v protoreflect.Value) protoreflect.Value {
		if s, ok := v.Interface().(string); ok {
			return protoreflect.ValueOfString(string(g([]byte(s))))
		}
		return protoreflect.ValueOfBytes(g(bytes.Clone(v.Bytes())))
	}
	switch {
	case fd.IsMap():
		mp := msg.Mutable(fd).Map()
		var keys []protoreflect.MapKey
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
		for _, k := range keys {
			if len(rest) == 1 {
				mp.Set(k, leaf(mp.Get(k)))
			} else {
				apply(mp.Mutable(k).Message(), rest[1:], g)
			}
		}
	case fd.IsList():
		l := msg.Mutable(fd).List()
		for i := range l.Len() {
			if rest[0].Index != fieldpath.Any && rest[0].Index != i {
				continue
			}
			if len(rest) == 1 {
				l.Set(i, leaf(l.Get(i)))
			} else {
				apply(l.Get(i).Message(), rest[1:], g)
			}
		}
	case len(rest) == 0:
		msg.Set(fd, leaf(msg.Get(fd)))
	default:
		apply(msg.Mutable(fd).Message(), rest, g)
	}
}

func TestLocateRoundTrip(t *testing.T) {
	m := shopOrder(t)
	body := sampleShopOrder(t, m)
	p := plan(t, m, append(m.Tagged("PII"), "parent.customer.ssn", "cards[*].notes[1]", "cards[1].cvv", "note", "chunks[0]")...)
	for _, k := range []int{-100, -3, 1, 7, 200} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			roundTrip(t, m, p, body, grow(k))
		})
	}
}

// A nested message of 120 bytes needs a one-byte length; 10 bytes more
// need two, and so do the messages around it.
func TestLocateLengthWidths(t *testing.T) {
	m := shopOrder(t)
	o := newDyn(m.Descriptor())
	o.msg("customer").msg("home").set("street", strings.Repeat("s", 118))
	body := o.marshal(t)
	if len(body) != 124 || body[1] != 122 || body[3] != 120 || body[5] != 118 {
		t.Fatalf("record of %d bytes, lengths %d, %d, %d; the test expects 124 bytes with 122, 120, 118", len(body), body[1], body[3], body[5])
	}
	p := plan(t, m, "customer.home.street")
	spliced := roundTrip(t, m, p, body, grow(10))
	// Ten bytes more, and a byte more in each of the three length
	// prefixes: the street's, the address's and the customer's.
	if len(spliced) != len(body)+10+3 || spliced[1] != 0x86 || spliced[2] != 1 {
		t.Errorf("spliced record of %d bytes, customer length %x; want %d bytes, 134 as 86 01", len(spliced), spliced[1:3], len(body)+13)
	}
	shrunk := roundTrip(t, m, p, spliced, grow(-20))
	if len(shrunk) != len(spliced)-20-3 {
		t.Errorf("shrunk record of %d bytes, want %d", len(shrunk), len(spliced)-23)
	}
}

// raw writes fields by hand, in any order, known or not.
type raw struct{ b []byte }

func (r *raw) bytes(num protowire.Number, v []byte) *raw {
	r.b = protowire.AppendTag(r.b, num, protowire.BytesType)
	r.b = protowire.AppendBytes(r.b, v)
	return r
}

func (r *raw) str(num protowire.Number, v string) *raw { return r.bytes(num, []byte(v)) }

func (r *raw) varint(num protowire.Number, v uint64) *raw {
	r.b = protowire.AppendTag(r.b, num, protowire.VarintType)
	r.b = protowire.AppendVarint(r.b, v)
	return r
}

func (r *raw) fixed32(num protowire.Number, v uint32) *raw {
	r.b = protowire.AppendTag(r.b, num, protowire.Fixed32Type)
	r.b = protowire.AppendFixed32(r.b, v)
	return r
}

func (r *raw) fixed64(num protowire.Number, v uint64) *raw {
	r.b = protowire.AppendTag(r.b, num, protowire.Fixed64Type)
	r.b = protowire.AppendFixed64(r.b, v)
	return r
}

func (r *raw) group(num protowire.Number, inner []byte) *raw {
	r.b = protowire.AppendTag(r.b, num, protowire.StartGroupType)
	r.b = append(r.b, inner...)
	r.b = protowire.AppendTag(r.b, num, protowire.EndGroupType)
	return r
}

// outOfOrder is an Order written as no encoder of ours would: fields out of
// number order, repeated fields spread among others, the customer (not
// repeated) twice, which parsers merge, packed and unpacked quantities, and
// unknown fields of every wire type in the record and in nested messages.
func outOfOrder() []byte {
	card1 := (&raw{}).str(1, "4111").fixed32(50, 7).str(4, "a").str(4, "b").b
	cust1 := (&raw{}).str(4, "e1").str(2, "s1").
		group(77, (&raw{}).group(78, (&raw{}).varint(1, 5).b).str(2, "x").b).
		str(4, "e2").b
	card2 := (&raw{}).str(4, "c").str(1, "5500").b
	cust2 := (&raw{}).str(2, "s2").b
	packed := protowire.AppendVarint(protowire.AppendVarint(nil, 300), 1)
	return (&raw{}).
		varint(99, 7).
		bytes(3, card1).
		str(7, "DE89").
		bytes(2, cust1).
		bytes(4, packed).
		bytes(3, card2).
		str(100, "unknown").
		bytes(2, cust2).
		fixed64(101, 1).
		varint(1, 42).
		varint(4, 5).
		b
}

func TestLocateOutOfOrder(t *testing.T) {
	m := shopOrder(t)
	body := outOfOrder()
	if err := m.Validate(body); err != nil {
		t.Fatalf("hand-written record: %v", err)
	}
	p := plan(t, m, "customer.ssn", "customer.emails[1]", "cards[*].number", "cards[*].notes[1]", "iban")
	got := located(t, p, body)
	want := []string{
		`cards[*].number="4111"`, `cards[*].notes[1]="b"`, `iban="DE89"`,
		`customer.ssn="s1"`, `customer.emails[1]="e2"`, `cards[*].number="5500"`, `customer.ssn="s2"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("located\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, k := range []int{-2, 3, 130} {
		roundTrip(t, m, p, body, grow(k))
	}
}

func TestLocateGroups(t *testing.T) {
	m := message(t, compile(t, legacy), 0)
	line := func(text string) []byte { return (&raw{}).varint(3, 1).str(4, text).fixed32(60, 9).b }
	body := (&raw{}).group(2, line("first")).str(1, "name").
		group(2, (&raw{}).varint(3, 2).b).
		group(2, line("third")).b
	p := plan(t, m, "line[*].text", "name")
	got := located(t, p, body)
	want := []string{`line[*].text="first"`, `name="name"`, `line[*].text="third"`}
	if !slices.Equal(got, want) {
		t.Errorf("located %q, want %q", got, want)
	}
	var f fieldpath.Found
	if err := p.Locate(body, &f); err != nil || len(f.Frames) != 0 {
		t.Errorf("groups have no length prefix, so no frame: %+v, %v", f.Frames, err)
	}
	roundTrip(t, m, p, body, grow(3))
	roundTrip(t, m, p, body, grow(-2))

	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"group as bytes", (&raw{}).bytes(2, line("x")).b, `field "line": wire type length-delimited, want start-group`},
		{"group without its end", append(protowire.AppendTag(nil, 2, protowire.StartGroupType), line("x")...), `field "line[*]": group without its end-group tag`},
		{"end of another group", protowire.AppendTag(append(protowire.AppendTag(nil, 2, protowire.StartGroupType), line("x")...), 3, protowire.EndGroupType),
			`field "line[*]": end-group tag of field 3 without its start`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantLocateErr(t, p, tt.body, tt.want)
		})
	}
}

func wantLocateErr(t *testing.T, p *Plan, body []byte, want string) {
	t.Helper()
	var f fieldpath.Found
	err := p.Locate(body, &f)
	var e *fieldpath.Error
	if !errors.As(err, &e) || err.Error() != want {
		t.Errorf("Locate = %v (%T), want %q", err, err, want)
	}
}

func TestLocateErrors(t *testing.T) {
	m := shopOrder(t)
	p := plan(t, m, "customer.ssn", "cards[*].number", "attrs[*]", "note")
	deep := (&raw{}).varint(1, 1).b
	for range protowire.DefaultRecursionLimit + 2 {
		deep = (&raw{}).group(99, deep).b
	}
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"target as a varint", (&raw{}).bytes(2, (&raw{}).varint(2, 5).b).b, `field "customer.ssn": wire type varint, want length-delimited`},
		{"target as fixed64, large number", (&raw{}).fixed64(300, 5).b, `field "note": wire type fixed64, want length-delimited`},
		{"message as a varint", (&raw{}).varint(2, 1).b, `field "customer": wire type varint, want length-delimited`},
		{"list item as fixed32", (&raw{}).fixed32(3, 1).b, `field "cards": wire type fixed32, want length-delimited`},
		{"map value as a varint", (&raw{}).bytes(5, (&raw{}).str(1, "k").varint(2, 1).b).b, `field "attrs[*]": wire type varint, want length-delimited`},
		{"reserved wire type", []byte{2<<3 | 6}, `field "customer": wire type reserved (6), want length-delimited`},
		{"target cut short", (&raw{}).bytes(2, append(protowire.AppendTag(nil, 2, protowire.BytesType), 5, 'a')).b, `field "customer.ssn": truncated`},
		{"target without its length", (&raw{}).bytes(2, protowire.AppendTag(nil, 2, protowire.BytesType)).b, `field "customer.ssn": truncated`},
		{"target length overflows", (&raw{}).bytes(2, append(protowire.AppendTag(nil, 2, protowire.BytesType), bytes.Repeat([]byte{0xff}, 10)...)).b, `field "customer.ssn": malformed length: varint overflows 64 bits`},
		{"message cut short", []byte{2<<3 | 2, 9, 0}, `field "customer": truncated`},
		{"tag cut short", []byte{0x80}, `malformed tag: truncated`},
		{"field number 0", []byte{0x02, 0x00}, `malformed tag: invalid field number`},
		{"field number too large", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), `malformed tag: invalid field number`},
		{"bad tag in a nested message", (&raw{}).bytes(2, []byte{0x80}).b, `field "customer": malformed tag: truncated`},
		{"unknown field cut short", append(protowire.AppendTag(nil, 99, protowire.Fixed32Type), 1, 2), `field number 99: truncated`},
		{"untargeted field cut short", (&raw{}).bytes(2, []byte{1<<3 | 2, 5, 'a'}).b, `field "customer": field number 1: truncated`},
		{"stray end-group", protowire.AppendTag(nil, 9, protowire.EndGroupType), `end-group tag of field 9 without its start`},
		{"unknown groups nested too deep", deep, `field number 99: groups nested too deep`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantLocateErr(t, p, tt.body, tt.want)
		})
	}
	// A field that is absent is no error.
	if got := located(t, p, (&raw{}).varint(1, 1).b); len(got) != 0 {
		t.Errorf("record without targets: %q", got)
	}
}

// Every prefix of a record is a record or fails with an error: never a
// panic, never a span beyond the prefix.
func TestLocateTruncated(t *testing.T) {
	m := shopOrder(t)
	p := plan(t, m, append(m.Tagged("PII"), "cards[*].notes[1]", "note")...)
	for _, body := range [][]byte{sampleShopOrder(t, m), outOfOrder()} {
		for i := range len(body) {
			var f fieldpath.Found
			err := p.Locate(body[:i], &f)
			var e *fieldpath.Error
			switch {
			case err == nil:
				checkFound(t, body[:i], p, &f)
			case !errors.As(err, &e):
				t.Fatalf("prefix %d: error of type %T: %v", i, err, err)
			}
		}
	}
	lm := message(t, compile(t, legacy), 0)
	lp := plan(t, lm, "line[*].text")
	body := (&raw{}).group(2, (&raw{}).str(4, "text").b).b
	for i := range len(body) {
		var f fieldpath.Found
		if err := lp.Locate(body[:i], &f); err == nil && i > 0 {
			t.Errorf("group cut at %d: no error", i)
		}
	}
}

func TestLocateAllocs(t *testing.T) {
	m := shopOrder(t)
	p := plan(t, m, append(m.Tagged("PII"), "cards[*].notes[1]", "cards[1].cvv")...)
	body := sampleShopOrder(t, m)
	var f fieldpath.Found
	allocs := testing.AllocsPerRun(100, func() {
		f.Reset()
		if err := p.Locate(body, &f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Locate allocates %v times per record", allocs)
	}
	rm, rec := reference(t)
	rp := plan(t, rm, "ssn")
	allocs = testing.AllocsPerRun(100, func() {
		f.Reset()
		if err := rp.Locate(rec, &f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Locate allocates %v times per reference record", allocs)
	}
}

// [N] selects the N-th occurrence in wire order, wherever the items lie.
func TestLocateByPosition(t *testing.T) {
	m := shopOrder(t)
	cust := (&raw{}).str(4, "e0").str(1, "name").str(4, "e1").str(2, "ssn").str(4, "e2").b
	body := (&raw{}).bytes(2, cust).bytes(10, []byte("c0")).bytes(10, []byte("c1")).b
	tests := []struct {
		paths []string
		want  []string
	}{
		{[]string{"customer.emails[0]"}, []string{`customer.emails[0]="e0"`}},
		{[]string{"customer.emails[2]", "chunks[1]"}, []string{`customer.emails[2]="e2"`, `chunks[1]="c1"`}},
		{[]string{"customer.emails[3]"}, nil},
		{[]string{"customer.emails[1]", "customer.emails[0]"}, []string{`customer.emails[0]="e0"`, `customer.emails[1]="e1"`}},
	}
	for _, tt := range tests {
		got := located(t, plan(t, m, tt.paths...), body)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: located %q, want %q", tt.paths, got, tt.want)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	m := shopOrder(t)
	const encryptWhole = "field encryption keeps a field's type and only string and bytes can hold ciphertext; make the field a string or bytes, or encrypt the whole record with record-encryption"
	tests := []struct {
		paths []string
		want  string
	}{
		{[]string{"custmer.ssn"}, `field path "custmer.ssn": shop.Order has no field "custmer"; its fields are id, customer, cards, qty, attrs, saved, iban, card, blob, chunks, parent, note`},
		{[]string{"customer.sn"}, `field path "customer.sn": shop.Customer has no field "sn"; its fields are name, ssn, home, emails, age`},
		{[]string{"customer.emails"}, `field path "customer.emails": customer.emails is repeated: write customer.emails[*] for every item or customer.emails[0] for the first`},
		{[]string{"cards.number"}, `field path "cards.number": cards is repeated: write cards[*] for every item or cards[0] for the first`},
		{[]string{"attrs"}, `field path "attrs": attrs is a map: write attrs[*] to select its values`},
		{[]string{"attrs[0]"}, `field path "attrs[0]": attrs is a map, whose entries have no order: write attrs[*] to select its values`},
		{[]string{"customer[0].ssn"}, `field path "customer[0].ssn": customer is not repeated: drop the [0] after it`},
		{[]string{"customer.age"}, `field path "customer.age": customer.age is an int32: ` + encryptWhole},
		{[]string{"qty[*]"}, `field path "qty[*]": qty[*] is an int32: ` + encryptWhole},
		{[]string{"id"}, `field path "id": id is an int64: ` + encryptWhole},
		{[]string{"customer.home"}, `field path "customer.home": customer.home is a message (shop.Address): name the string or bytes fields inside it, as customer.home.<field>`},
		{[]string{"saved[*]"}, `field path "saved[*]": saved[*] is a message (shop.Card): name the string or bytes fields inside it, as saved[*].<field>`},
		{[]string{"customer.emails[*][0]"}, `field path "customer.emails[*][0]": customer.emails[*] holds a string values, which have no items: drop the [0]`},
		{[]string{"customer.ssn.last4"}, `field path "customer.ssn.last4": customer.ssn is a string, not a message: it has no field "last4"`},
		{[]string{"cards[1024].number"}, `field path "cards[1024].number": index [1024] of cards is above 1023; select the items with [*]`},
		{[]string{"iban", "customer.ssn", "iban"}, `field path "iban" is listed twice: keep one`},
		{[]string{"customer.ssn", "customer"}, `field path "customer.ssn" lies inside "customer": a field is encrypted whole or not at all; keep one of the two`},
		{[]string{"customer", "customer.ssn"}, `field path "customer.ssn" lies inside "customer": a field is encrypted whole or not at all; keep one of the two`},
		{[]string{"customer.emails[*]", "customer.emails[0]"}, `field paths "customer.emails[*]" and "customer.emails[0]" select the same value: keep one`},
		{[]string{"cards[0].notes[*]", "cards[*].notes[1]"}, `field paths "cards[0].notes[*]" and "cards[*].notes[1]" select the same value: keep one`},
	}
	for _, tt := range tests {
		_, err := m.Plan(targets(tt.paths...))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Plan(%q) = %v\nwant %s", tt.paths, err, tt.want)
		}
	}

	many := `syntax = "proto3"; message M { ` + func() string {
		var sb strings.Builder
		for i := 1; i <= maxCounted+1; i++ {
			fmt.Fprintf(&sb, "repeated string r%d = %d; ", i, i)
		}
		return sb.String()
	}() + `}`
	mm := message(t, compile(t, many), 0)
	var paths []string
	for i := 1; i <= maxCounted+1; i++ {
		paths = append(paths, fmt.Sprintf("r%d[0]", i))
	}
	_, err := mm.Plan(targets(paths...))
	if want := `field path "r9": more than 8 repeated fields of M are selected by position; select some with [*]`; err == nil || err.Error() != want {
		t.Errorf("Plan(%q) = %v\nwant %s", paths, err, want)
	}
	if _, err := mm.Plan(targets(paths[:maxCounted]...)); err != nil {
		t.Errorf("Plan of %d positions: %v", maxCounted, err)
	}
}

func TestPlanTargets(t *testing.T) {
	m := shopOrder(t)
	ts := targets("iban", "customer.ssn")
	ts[1].Optional = true
	p, err := m.Plan(ts)
	if err != nil {
		t.Fatal(err)
	}
	ts[0] = fieldpath.Target{}
	if got := p.Targets(); len(got) != 2 || got[0].Path.Text != "iban" || !got[1].Optional {
		t.Errorf("Targets = %+v", got)
	}
	if _, err := m.Plan([]fieldpath.Target{{Path: fieldpath.Path{Text: "ssn"}}}); err == nil ||
		err.Error() != `field path "ssn" has 0 steps, not 1 to 64: write it as fieldpath.Parse reads it` {
		t.Errorf("Plan of a path without steps: %v", err)
	}
	long := fieldpath.Path{Text: "parent..."}
	for range 65 {
		long.Steps = append(long.Steps, fieldpath.Step{Name: "parent"})
	}
	if _, err := m.Plan([]fieldpath.Target{{Path: long}}); err == nil ||
		err.Error() != `field path "parent..." has 65 steps, not 1 to 64: write it as fieldpath.Parse reads it` {
		t.Errorf("Plan of a path of 65 steps: %v", err)
	}
	if p, err := m.Plan(nil); err != nil || len(located(t, p, sampleShopOrder(t, m))) != 0 {
		t.Errorf("empty plan: %v", err)
	}
}

func BenchmarkLocateProtobuf(b *testing.B) {
	m, rec := reference(b)
	p := plan(b, m, "ssn")
	var f fieldpath.Found
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		f.Reset()
		if err := p.Locate(rec, &f); err != nil {
			b.Fatal(err)
		}
	}
	if len(f.Spans) != 1 {
		b.Fatalf("%d spans", len(f.Spans))
	}
}

// skip's short ways agree with protowire's on every length around the
// widths of a length prefix, whole and cut short.
func TestSkip(t *testing.T) {
	for _, n := range []int{0, 1, 126, 127, 128, 129, 255, 256, 1000, 16383, 16384, 20000} {
		v := protowire.AppendBytes(nil, make([]byte, n))
		for _, b := range [][]byte{v, v[:len(v)-1], v[:1], v[:0]} {
			if got, want := skip(7, protowire.BytesType, b), protowire.ConsumeFieldValue(7, protowire.BytesType, b); got != want {
				t.Errorf("skip of %d of a %d-byte value = %d, want %d", len(b), n, got, want)
			}
		}
	}
	// A length written longer than it needs to be.
	if got := skip(7, protowire.BytesType, []byte{0x81, 0x00, 'x'}); got != 3 {
		t.Errorf("skip of a padded length = %d, want 3", got)
	}
}

// The paths Tagged returns are plans' paths.
func TestPlanTagged(t *testing.T) {
	m := shopOrder(t)
	if _, err := m.Plan(targets(m.Tagged("PII")...)); err != nil {
		t.Errorf("Plan(Tagged(PII)): %v", err)
	}
	nm := message(t, compile(t, nodeProto), 0)
	p := plan(t, nm, nm.Tagged("PII")...)
	body := (&raw{}).str(1, "top").group(3, (&raw{}).bytes(4, []byte{0xff}).b).bytes(2, (&raw{}).str(1, "child").b).b
	if got := located(t, p, body); !slices.Equal(got, []string{`secret="top"`, `extra.key="\xff"`}) {
		t.Errorf("located %q", got)
	}
}
