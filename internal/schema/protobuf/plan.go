package protobuf

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// Plan is where a set of targets lies in records of one message type: for
// each message on the targets' paths, what each targeted field number
// holds. It is built once per schema and read-only after, so any number of
// goroutines may Locate with it.
type Plan struct {
	targets []fieldpath.Target
	root    *node
}

// node is what Locate looks for in one message: the fields that are, or
// lead to, targets. Every other field is skipped.
type node struct {
	// path names the message in errors about its bytes: the path of the
	// field that holds it, "" for the record.
	path string
	// small holds actions by field number below smallFields, up to the
	// largest one targeted; large the few numbered from smallFields.
	small []*action
	large []*action
	// counted is how many actions count their occurrences, for [N] steps.
	counted int
}

func (n *node) action(num protowire.Number) *action {
	if int(num) < len(n.small) {
		return n.small[num]
	}
	for _, a := range n.large {
		if a.num == num {
			return a
		}
	}
	return nil
}

// action is a targeted field number of a message.
type action struct {
	num protowire.Number
	// name is the field's path, for errors about its wire type.
	name string
	// wire is the wire type the field must come as: length-delimited, or
	// start-group for a group (and a delimited message in editions).
	wire protowire.Type
	// every is what each occurrence holds; nil when only [N] steps select
	// occurrences of the field.
	every *step
	// slot is the action's occurrence counter in the message's walk, or
	// -1. When counted, nth[k] is what occurrence k holds (every's
	// selection merged with the [k] step's), and occurrences from
	// len(nth) on hold every.
	slot int
	nth  []*step
}

// step is what one occurrence of a targeted field holds: a target's value
// or a message with targets inside.
type step struct {
	// target is the index of the target whose value this is, or -1.
	target int
	bytes  bool
	child  *node
}

// maxCounted bounds the repeated fields of one message that [N] steps
// select, so that their counters live in a fixed array of the walk.
const maxCounted = 8

// maxSteps bounds a path's steps, as fieldpath.Parse does. Locate descends
// only into the messages on the paths, so it also bounds Locate's depth;
// the groups it skips, protowire bounds.
const maxSteps = 64

// maxIndex bounds N in a [N] step; a plan holds a step for each position up
// to it.
const maxIndex = 1024

// Targets returns the plan's targets, in the order Plan was given them: a
// Span's Target indexes them. The slice must not be modified.
func (p *Plan) Targets() []fieldpath.Target { return p.targets }

// Plan prepares Locate for the given fields of m's records. A path names
// fields by name, nested messages and oneof members included; a repeated
// field is followed by [*] (every item) or [N] (the N-th occurrence in
// wire order), a map field by [*] (every value). Each path must end at a
// string or bytes field (or at the items or values of one), as field
// encryption keeps each field's type. The errors name the path and say
// what to write instead.
func (m *Message) Plan(targets []fieldpath.Target) (*Plan, error) {
	if err := checkOverlaps(targets); err != nil {
		return nil, err
	}
	b := &planner{targets: targets}
	root := &tmsg{md: m.desc}
	for i, t := range targets {
		if err := b.add(root, i, t.Path); err != nil {
			return nil, err
		}
	}
	rn, err := b.compile(root)
	if err != nil {
		return nil, err
	}
	return &Plan{targets: slices.Clone(targets), root: rn}, nil
}

// checkOverlaps refuses a path given twice and a path inside another: a
// value is encrypted once, and a field whole or not at all.
func checkOverlaps(targets []fieldpath.Target) error {
	for i, a := range targets {
		if n := len(a.Path.Steps); n == 0 || n > maxSteps {
			return fmt.Errorf("field path %q has %d steps, not 1 to %d: write it as fieldpath.Parse reads it", a.Path.Text, n, maxSteps)
		}
		for _, b := range targets[:i] {
			switch {
			case slices.Equal(a.Path.Steps, b.Path.Steps):
				return fmt.Errorf("field path %q is listed twice: keep one", a.Path.Text)
			case hasPrefix(a.Path.Steps, b.Path.Steps):
				return fmt.Errorf("field path %q lies inside %q: a field is encrypted whole or not at all; keep one of the two", a.Path.Text, b.Path.Text)
			case hasPrefix(b.Path.Steps, a.Path.Steps):
				return fmt.Errorf("field path %q lies inside %q: a field is encrypted whole or not at all; keep one of the two", b.Path.Text, a.Path.Text)
			}
		}
	}
	return nil
}

func hasPrefix(s, prefix []fieldpath.Step) bool {
	return len(s) > len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}

// The plan is first built as a tree of the targets' paths (tmsg, tfield,
// tval), then compiled into nodes, where the steps that [*] and [N] select
// in the same repeated field are merged for each position.

// tmsg is a message on the targets' paths.
type tmsg struct {
	md     protoreflect.MessageDescriptor
	path   string
	fields []*tfield
}

// tfield is a field of a tmsg that paths go through or end at.
type tfield struct {
	fd   protoreflect.FieldDescriptor
	name string
	// sel holds what each index step selects: fieldpath.Any for [*] (and
	// for a field that is not repeated), N for [N].
	sel map[int]*tval
}

// tval is the value a path reaches: a target's, or a message it goes on in.
type tval struct {
	target int
	bytes  bool
	msg    *tmsg
}

func (t *tmsg) field(fd protoreflect.FieldDescriptor, name string) *tfield {
	for _, f := range t.fields {
		if f.fd.Number() == fd.Number() {
			return f
		}
	}
	f := &tfield{fd: fd, name: name, sel: map[int]*tval{}}
	t.fields = append(t.fields, f)
	return f
}

func (f *tfield) value(index int) *tval {
	v := f.sel[index]
	if v == nil {
		v = &tval{target: -1}
		f.sel[index] = v
	}
	return v
}

type planner struct {
	targets []fieldpath.Target
}

// add puts target i, at path p, in the tree under root.
func (b *planner) add(root *tmsg, i int, p fieldpath.Path) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("field path %q: %s", p.Text, fmt.Sprintf(format, args...))
	}
	cur := root
	steps := p.Steps
	text := ""
	for j := 0; j < len(steps); {
		name := steps[j].Name
		fd := cur.md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return bad("%s has no field %q; its fields are %s", cur.md.FullName(), name, fieldNames(cur.md))
		}
		if text != "" {
			text += "."
		}
		text += name
		fieldText := text
		j++
		index := fieldpath.Any
		next := j < len(steps) && steps[j].IsIndex()
		switch {
		case fd.IsMap():
			if !next {
				return bad("%s is a map: write %s[*] to select its values", text, text)
			}
			if steps[j].Index != fieldpath.Any {
				return bad("%s is a map, whose entries have no order: write %s[*] to select its values", text, text)
			}
		case fd.IsList():
			if !next {
				return bad("%s is repeated: write %s[*] for every item or %s[0] for the first", text, text, text)
			}
			index = steps[j].Index
			if index >= maxIndex {
				return bad("index [%d] of %s is above %d; select the items with [*]", index, text, maxIndex-1)
			}
		case next:
			return bad("%s is not repeated: drop the [%s] after it", text, indexText(steps[j].Index))
		}
		if next {
			text += "[" + indexText(steps[j].Index) + "]"
			j++
		}
		v := cur.field(fd, fieldText).value(index)
		if fd.IsMap() {
			// A map is a repeated entry message whose field 2 is the value.
			if v.msg == nil {
				v.msg = &tmsg{md: fd.Message(), path: text}
			}
			v = v.msg.field(fd.MapValue(), text).value(fieldpath.Any)
			fd = fd.MapValue()
		}
		if j == len(steps) {
			return b.leaf(v, i, fd, text, bad)
		}
		if steps[j].IsIndex() {
			return bad("%s holds %s values, which have no items: drop the [%s]", text, kindName(fd), indexText(steps[j].Index))
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return bad("%s is %s, not a message: it has no field %q", text, kindName(fd), steps[j].Name)
		}
		if v.msg == nil {
			v.msg = &tmsg{md: fd.Message(), path: text}
		}
		cur = v.msg
	}
	return nil // not reached: the last step returns
}

// leaf makes v, the value of field fd at path text, target i's.
func (b *planner) leaf(v *tval, i int, fd protoreflect.FieldDescriptor, text string, bad func(string, ...any) error) error {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return bad("%s is a message (%s): name the string or bytes fields inside it, as %s.<field>", text, fd.Message().FullName(), text)
	default:
		return bad("%s is %s: field encryption keeps a field's type and only string and bytes can hold ciphertext; make the field a string or bytes, or encrypt the whole record with record-encryption", text, kindName(fd))
	}
	// checkOverlaps has refused a path that ends at or goes through
	// another's value, so v is free.
	v.target = i
	v.bytes = fd.Kind() == protoreflect.BytesKind
	return nil
}

// compile turns the tree under t into the node Locate walks.
func (b *planner) compile(t *tmsg) (*node, error) {
	n := &node{path: t.path}
	for _, tf := range t.fields {
		a, err := b.compileField(n, tf)
		if err != nil {
			return nil, err
		}
		num := int(a.num)
		if num >= smallFields {
			n.large = append(n.large, a)
			continue
		}
		if num >= len(n.small) {
			n.small = append(n.small, make([]*action, num+1-len(n.small))...)
		}
		n.small[num] = a
	}
	return n, nil
}

func (b *planner) compileField(n *node, tf *tfield) (*action, error) {
	a := &action{num: tf.fd.Number(), name: tf.name, wire: protowire.BytesType, slot: -1}
	if tf.fd.Kind() == protoreflect.GroupKind {
		a.wire = protowire.StartGroupType
	}
	every := tf.sel[fieldpath.Any]
	if every != nil {
		var err error
		if a.every, err = b.compileValue(every); err != nil {
			return nil, err
		}
	}
	last := -1
	for k := range tf.sel {
		last = max(last, k)
	}
	if last < 0 {
		return a, nil
	}
	if n.counted == maxCounted {
		return nil, fmt.Errorf("field path %q: more than %d repeated fields of %s are selected by position; select some with [*]",
			tf.name, maxCounted, tf.fd.ContainingMessage().FullName())
	}
	a.slot = n.counted
	n.counted++
	a.nth = make([]*step, last+1)
	for k := range a.nth {
		v := tf.sel[k]
		switch {
		case v == nil:
			a.nth[k] = a.every
			continue
		case every != nil:
			var err error
			if v, err = b.merge(every, v); err != nil {
				return nil, err
			}
		}
		var err error
		if a.nth[k], err = b.compileValue(v); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (b *planner) compileValue(v *tval) (*step, error) {
	s := &step{target: v.target, bytes: v.bytes}
	if v.msg != nil {
		var err error
		if s.child, err = b.compile(v.msg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// merge returns what an item selected both by [*] (x) and by its position
// (y) holds: the fields of both. Two targets at the same value are
// refused, as the value would be encrypted twice.
func (b *planner) merge(x, y *tval) (*tval, error) {
	if x.target >= 0 || y.target >= 0 {
		tx, ty := max(x.target, 0), max(y.target, 0)
		return nil, fmt.Errorf("field paths %q and %q select the same value: keep one", b.targets[tx].Path.Text, b.targets[ty].Path.Text)
	}
	m := &tmsg{md: y.msg.md, path: y.msg.path}
	for _, src := range []*tmsg{x.msg, y.msg} {
		for _, f := range src.fields {
			dst := m.field(f.fd, f.name)
			for _, k := range slices.Sorted(maps.Keys(f.sel)) {
				v := f.sel[k]
				if have := dst.sel[k]; have != nil {
					var err error
					if v, err = b.merge(have, v); err != nil {
						return nil, err
					}
				}
				dst.sel[k] = v
			}
		}
	}
	return &tval{target: -1, msg: m}, nil
}

func indexText(i int) string {
	if i == fieldpath.Any {
		return "*"
	}
	return strconv.Itoa(i)
}

// fieldNames lists md's field names for an error.
func fieldNames(md protoreflect.MessageDescriptor) string {
	fields := md.Fields()
	if fields.Len() == 0 {
		return "none"
	}
	names := make([]string, fields.Len())
	for i := range names {
		names[i] = string(fields.Get(i).Name())
	}
	return strings.Join(names, ", ")
}

// kindName is fd's kind with its article: "an int32", "a bool".
func kindName(fd protoreflect.FieldDescriptor) string {
	k := fd.Kind().String()
	if strings.HasPrefix(k, "int") || strings.HasPrefix(k, "enum") ||
		strings.HasPrefix(k, "sint") || strings.HasPrefix(k, "sfixed") {
		return "an " + k
	}
	return "a " + k
}

// Locate appends to f where the plan's targets lie in body, a record of
// the plan's message: a Span for each targeted string or bytes value
// (every occurrence, for a field that is not repeated, as a parser keeps
// the last but the bytes hold them all), and a Frame for each nested
// message whose length prefix encloses spans. Fields are read in wire
// order, however they are ordered or spread; untargeted and unknown fields
// are skipped. A field that is absent is not an error: Protobuf cannot
// tell it from one holding its default. On an error f holds a part of the
// record's spans: discard them.
//
// Splice rewrites every length prefix it is given in the minimal form, as
// Protobuf encoders write them; one written longer (a valid but unusual
// encoding) comes back in the minimal form.
func (p *Plan) Locate(body []byte, f *fieldpath.Found) error {
	_, err := p.walk(p.root, body, 0, len(body), 0, f)
	return err
}

// walk locates n's fields in body[off:end]: a message's fields or, when
// group is not 0, a group's, which end at its end-group tag. It returns
// where the walk stopped: end, or after the end-group tag.
func (p *Plan) walk(n *node, body []byte, off, end int, group protowire.Number, f *fieldpath.Found) (int, error) {
	var counts [maxCounted]int
	for off < end {
		// The tag: one byte for field numbers below 16.
		v := uint64(body[off])
		if v < 0x80 {
			off++
		} else {
			var l int
			v, l = protowire.ConsumeVarint(body[off:end])
			if l < 0 {
				return 0, &fieldpath.Error{Field: n.path, Reason: "malformed tag: " + cut(l)}
			}
			off += l
		}
		num, typ := protowire.Number(v>>3), protowire.Type(v&7)
		if v>>3 < uint64(protowire.MinValidNumber) || v>>3 > uint64(protowire.MaxValidNumber) {
			return 0, &fieldpath.Error{Field: n.path, Reason: "malformed tag: invalid field number"}
		}
		if typ == protowire.EndGroupType {
			if num != group {
				return 0, &fieldpath.Error{Field: n.path, Reason: "end-group tag of field " + strconv.Itoa(int(num)) + " without its start"}
			}
			return off, nil
		}
		a := n.action(num)
		if a == nil {
			l := skip(num, typ, body[off:end])
			if l < 0 {
				return 0, &fieldpath.Error{Field: n.path, Reason: "field number " + strconv.Itoa(int(num)) + ": " + cut(l)}
			}
			off += l
			continue
		}
		if typ != a.wire {
			return 0, &fieldpath.Error{Field: a.name, Reason: "wire type " + wireTypeName(typ) + ", want " + wireTypeName(a.wire)}
		}
		s := a.every
		if a.slot >= 0 {
			k := counts[a.slot]
			counts[a.slot]++
			if k < len(a.nth) {
				s = a.nth[k]
			}
		}
		var err error
		switch {
		case s == nil:
			l := skip(num, typ, body[off:end])
			if l < 0 {
				return 0, &fieldpath.Error{Field: a.name, Reason: cut(l)}
			}
			off += l
		case a.wire == protowire.StartGroupType:
			off, err = p.walk(s.child, body, off, end, num, f)
		default:
			off, err = p.take(a, s, body, off, end, f)
		}
		if err != nil {
			return 0, err
		}
	}
	if group != 0 {
		return 0, &fieldpath.Error{Field: n.path, Reason: "group without its end-group tag"}
	}
	return off, nil
}

// take records the length-delimited value at body[off:] that step s
// selects: a target's value as a span, or a message as a frame around the
// spans found inside it. It returns the offset after the value.
func (p *Plan) take(a *action, s *step, body []byte, off, end int, f *fieldpath.Found) (int, error) {
	lenAt := off
	if off >= end {
		return 0, &fieldpath.Error{Field: p.stepName(a, s), Reason: "truncated"}
	}
	v := uint64(body[off])
	if v < 0x80 {
		off++
	} else {
		var l int
		v, l = protowire.ConsumeVarint(body[off:end])
		if l < 0 {
			return 0, &fieldpath.Error{Field: p.stepName(a, s), Reason: "malformed length: " + cut(l)}
		}
		off += l
	}
	if v > uint64(end-off) {
		return 0, &fieldpath.Error{Field: p.stepName(a, s), Reason: "truncated"}
	}
	stop := off + int(v)
	if s.child == nil {
		f.Spans = append(f.Spans, fieldpath.Span{Target: s.target, LenAt: lenAt, Start: off, End: stop, Len: fieldpath.Uvarint, Bytes: s.bytes})
		return stop, nil
	}
	spans, frame := len(f.Spans), len(f.Frames)
	f.Frames = append(f.Frames, fieldpath.Frame{LenAt: lenAt, Start: off, End: stop, Len: fieldpath.Uvarint})
	if _, err := p.walk(s.child, body, off, stop, 0, f); err != nil {
		return 0, err
	}
	if len(f.Spans) == spans {
		// No target inside: the frame and those within need no rewriting.
		f.Frames = f.Frames[:frame]
	}
	return stop, nil
}

// stepName names the value a step selects in errors: its target's path,
// or the field's.
func (p *Plan) stepName(a *action, s *step) string {
	if s.target >= 0 {
		return p.targets[s.target].Path.Text
	}
	return a.name
}

// skip returns the length of the value of field num, of wire type typ, at
// the start of b, or a negative protowire error code. Length-delimited
// values under 16 KiB, the most common in records, take the short way.
func skip(num protowire.Number, typ protowire.Type, b []byte) int {
	if typ == protowire.BytesType {
		n := -1
		switch {
		case len(b) > 0 && b[0] < 0x80:
			n = 1 + int(b[0])
		case len(b) > 1 && b[1] < 0x80:
			n = 2 + (int(b[0]&0x7f) | int(b[1])<<7)
		}
		if n > 0 {
			if n <= len(b) {
				return n
			}
			return -1
		}
	}
	return protowire.ConsumeFieldValue(num, typ, b)
}

// cut describes a protowire error code in a locator error.
func cut(code int) string {
	if code == -1 {
		return "truncated"
	}
	return wireErr(code)
}

func wireTypeName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "length-delimited"
	case protowire.StartGroupType:
		return "start-group"
	case protowire.EndGroupType:
		return "end-group"
	case protowire.Fixed32Type:
		return "fixed32"
	}
	return "reserved (" + strconv.Itoa(int(t)) + ")"
}
