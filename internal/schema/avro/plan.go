package avro

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	hamba "github.com/hamba/avro/v2"

	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// Plan finds the targets in records of one schema. It walks a record's
// binary encoding with the part of the schema that leads to the targets,
// skips every other value without checking it, and stops after the last
// field of the top-level record that holds a target: the rest is copied as
// it is.
//
// A Plan is read-only once made and safe for concurrent use.
type Plan struct {
	targets []fieldpath.Target
	root    *want
}

// want is a part of the schema that holds targets, in the form Locate
// walks.
type want struct {
	// kind is kString or kBytes for a target's value, else kRecord,
	// kArray or kMap.
	kind kind
	node *node // the schema's type (past the union, if any)

	// union is set when the value is a union of null and kind's type,
	// looked through: of its branches, value holds the value and null
	// (-1 when there is no null branch) holds nothing.
	union       bool
	null, value int64
	branches    int64
	target      int         // kString, kBytes: the target's index
	fields      []wantField // kRecord: the fields up to the last holding a target
	rest        []field     // kRecord: the fields after it (none at the top, where Locate stops)
	every       *want       // kArray, kMap: what every item or value holds, or nil
	items       []itemWant  // kArray: what single items hold, by index, merged with every
	blockWhat   string      // kArray, kMap: "array" or "map", for messages
	perItem     int         // kArray, kMap: the least bytes an item (and its key) takes
	isMap       bool
}

// wantField is a field of a record on the way to a target: one to skip, or
// one to walk into.
type wantField struct {
	name string
	skip *node
	want *want
}

// itemWant is what the item at index holds.
type itemWant struct {
	index int
	want  *want
}

// Plan compiles the targets for Locate. Paths go through record fields by
// name, every array item or map value with [*], and the N-th array item
// with [N]; a union of null and one other type is looked through (null at
// run time means nothing is there). A target must be a string or bytes
// field, or such a union with null, without a logical type. The errors
// name the path and say what to change.
func (s *Schema) Plan(targets []fieldpath.Target) (*Plan, error) {
	if len(targets) == 0 {
		return nil, errors.New("avro field paths: none given; name at least one string or bytes field")
	}
	if err := checkOverlaps(targets); err != nil {
		return nil, err
	}
	ps := make([]pending, len(targets))
	for i, t := range targets {
		ps[i] = pending{target: i, path: t.Path}
	}
	root, err := plan(s.root, ps, 0)
	if err != nil {
		return nil, err
	}
	root.rest = nil // Locate stops after the last field holding a target.
	return &Plan{targets: slices.Clone(targets), root: root}, nil
}

// Targets returns the plan's targets; a Span's Target indexes them. The
// slice is the plan's own: do not change it.
func (p *Plan) Targets() []fieldpath.Target { return p.targets }

// pending is a target on its way down the schema while a plan is made.
type pending struct {
	target int
	path   fieldpath.Path
}

func planErr(p fieldpath.Path, format string, args ...any) error {
	return fmt.Errorf("avro field path %q: %s", p.Text, fmt.Sprintf(format, args...))
}

// checkOverlaps refuses a path listed twice, and one that holds another:
// a field cannot be replaced whole and in part.
func checkOverlaps(targets []fieldpath.Target) error {
	for i, a := range targets {
		for _, b := range targets[i+1:] {
			switch {
			case slices.Equal(a.Path.Steps, b.Path.Steps):
				return planErr(b.Path, "listed twice; list each field once")
			case isPrefix(a.Path.Steps, b.Path.Steps):
				return planErr(a.Path, "holds %q, which is listed too; list one of them", b.Path.Text)
			case isPrefix(b.Path.Steps, a.Path.Steps):
				return planErr(b.Path, "holds %q, which is listed too; list one of them", a.Path.Text)
			}
		}
	}
	return nil
}

func isPrefix(short, long []fieldpath.Step) bool {
	return len(short) < len(long) && slices.Equal(short, long[:len(short)])
}

// plan compiles the targets ps, whose first d steps lead to a value of n.
func plan(n *node, ps []pending, d int) (*want, error) {
	w := &want{kind: n.kind, node: n, target: -1, null: -1}
	if n.kind == kUnion {
		if !lookThrough(n, w) {
			return nil, planErr(ps[0].path, "%sis %s: %s", subject(ps[0], d), describe(n), unionAdvice(ps[0], d))
		}
		n = w.node
	}
	ended := 0
	for _, p := range ps {
		if len(p.path.Steps) == d {
			ended++
		}
	}
	switch {
	case ended > 0 && len(ps) > 1:
		return nil, sameValue(ps, d)
	case ended == 1:
		if err := checkValue(n, ps[0]); err != nil {
			return nil, err
		}
		w.target = ps[0].target
		return w, nil
	}
	if d == 0 && n.kind != kRecord {
		return nil, planErr(ps[0].path, "the schema's top-level type is %s, not a record: field paths name fields of a record", describe(n))
	}
	switch n.kind {
	case kRecord:
		return w, planRecord(w, ps, d)
	case kArray:
		return w, planArray(w, ps, d)
	case kMap:
		return w, planMap(w, ps, d)
	}
	return nil, planErr(ps[0].path, "%sis %s: it has no fields or items to select", subject(ps[0], d), describe(n))
}

// lookThrough sets w up for a union of null and one other type (or of one
// type alone), and reports whether n is such a union.
func lookThrough(n *node, w *want) bool {
	var other *node
	for i, b := range n.branches {
		switch {
		case b.kind == kNull && w.null < 0 && len(n.branches) == 2:
			w.null = int64(i)
		case other == nil:
			other, w.value = b, int64(i)
		default:
			return false
		}
	}
	if other == nil {
		return false
	}
	w.union, w.branches = true, int64(len(n.branches))
	w.kind, w.node = other.kind, other
	return true
}

func unionAdvice(p pending, d int) string {
	if len(p.path.Steps) == d {
		return typeAdvice
	}
	return "a path goes only through a union of null and one other type, where it is clear what lies beyond; encrypt the whole record with record-encryption"
}

const typeAdvice = "field encryption keeps a field's type and only string and bytes can hold ciphertext; " +
	"make the field a string or bytes, or encrypt the whole record with record-encryption"

// checkValue refuses a target that cannot hold ciphertext.
func checkValue(n *node, p pending) error {
	if n.kind != kString && n.kind != kBytes {
		return planErr(p.path, "is %s: %s", describe(n), typeAdvice)
	}
	switch n.logical {
	case "":
		return nil
	case string(decimalType):
		return planErr(p.path, "is a decimal (bytes holding a number): readers decode it as a number, "+
			"and ciphertext in its place is no number; drop the logical type, or encrypt the whole record with record-encryption")
	}
	return planErr(p.path, "is %s: readers that know the logical type parse the value, "+
		"and ciphertext in its place would not parse; drop the logical type, or encrypt the whole record with record-encryption", describe(n))
}

const decimalType = "decimal"

// sameValue explains why some of ps, which meet at one value, cannot all
// be targets: one ends here while another goes on, or two name one value
// (a[*].x and a[0].x do, in item 0).
func sameValue(ps []pending, d int) error {
	var ends, other pending
	found := false
	for _, p := range ps {
		if len(p.path.Steps) == d && !found {
			ends, found = p, true
		} else {
			other = p
		}
	}
	if len(other.path.Steps) > d {
		return planErr(other.path, "goes into %s, which %q names whole; list one of them", stepsText(other.path.Steps[:d]), ends.path.Text)
	}
	return planErr(ends.path, "names a value %q names too; list each value once", other.path.Text)
}

// planRecord plans the fields of a record that targets go into.
func planRecord(w *want, ps []pending, d int) error {
	n := w.node
	last := -1
	groups := make([][]pending, len(n.fields))
	for _, p := range ps {
		st := p.path.Steps[d]
		if st.IsIndex() {
			return planErr(p.path, "%sis %s, not an array or map: select one of its fields (%s) instead of %s",
				subject(p, d), describe(n), fieldNames(n), indexText(st.Index))
		}
		i := slices.IndexFunc(n.fields, func(f field) bool { return f.name == st.Name })
		if i < 0 {
			return planErr(p.path, "no field %q in %s%s; its fields are: %s", st.Name, describe(n), where(p, d), fieldNames(n))
		}
		groups[i] = append(groups[i], p)
		last = max(last, i)
	}
	for i := range last + 1 {
		f := &n.fields[i]
		if groups[i] == nil {
			w.fields = append(w.fields, wantField{name: f.name, skip: f.node})
			continue
		}
		fw, err := plan(f.node, groups[i], d+1)
		if err != nil {
			return err
		}
		w.fields = append(w.fields, wantField{name: f.name, want: fw})
	}
	w.rest = n.fields[last+1:]
	return nil
}

// planArray plans the items targets go into: every item, single items, or
// both (an item then holds the targets of both).
func planArray(w *want, ps []pending, d int) error {
	setBlocks(w, "array", 0)
	var every []pending
	single := map[int][]pending{}
	for _, p := range ps {
		st := p.path.Steps[d]
		switch {
		case !st.IsIndex():
			return planErr(p.path, "%sis an array: select its items with [*] or [N] before naming their field %q", subject(p, d), st.Name)
		case st.Index == fieldpath.Any:
			every = append(every, p)
		default:
			single[st.Index] = append(single[st.Index], p)
		}
	}
	if every != nil {
		var err error
		if w.every, err = plan(w.node.items, every, d+1); err != nil {
			return err
		}
	}
	for _, i := range slices.Sorted(maps.Keys(single)) {
		iw, err := plan(w.node.items, append(single[i], every...), d+1)
		if err != nil {
			return err
		}
		w.items = append(w.items, itemWant{index: i, want: iw})
	}
	return nil
}

// planMap plans the values targets go into: every value, by [*].
func planMap(w *want, ps []pending, d int) error {
	setBlocks(w, "map", 1)
	for _, p := range ps {
		st := p.path.Steps[d]
		switch {
		case !st.IsIndex():
			return planErr(p.path, "%sis a map: select its values with [*] before naming their field %q", subject(p, d), st.Name)
		case st.Index != fieldpath.Any:
			return planErr(p.path, "%sis a map: %s selects an array item; select every value of a map with [*]", subject(p, d), indexText(st.Index))
		}
	}
	var err error
	w.every, err = plan(w.node.items, ps, d+1)
	return err
}

// setBlocks readies w to walk the blocks of an array or map; a map's
// entries also hold a key of at least one byte.
func setBlocks(w *want, what string, key int) {
	w.blockWhat, w.isMap, w.perItem = what, key > 0, w.node.items.minSize+key
}

// subject is the path to the value at step d, with a space, when it is
// not the whole path; messages about the whole path need no subject.
func subject(p pending, d int) string {
	if d == len(p.path.Steps) {
		return ""
	}
	if d == 0 {
		return "the schema's top-level type "
	}
	return stepsText(p.path.Steps[:d]) + " "
}

// where says where a record lies, for messages: " at customer", or
// nothing at the top.
func where(p pending, d int) string {
	if d == 0 {
		return ""
	}
	return " at " + stepsText(p.path.Steps[:d])
}

func stepsText(steps []fieldpath.Step) string {
	var sb strings.Builder
	for _, st := range steps {
		if st.IsIndex() {
			sb.WriteString(indexText(st.Index))
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(st.Name)
	}
	return sb.String()
}

func indexText(i int) string {
	if i == fieldpath.Any {
		return "[*]"
	}
	return "[" + strconv.Itoa(i) + "]"
}

func fieldNames(n *node) string {
	names := make([]string, len(n.fields))
	for i, f := range n.fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// describe names a type for messages: "an int", "a long
// (timestamp-millis)", "a record (shop.Customer)", "a union of null, int
// and string".
func describe(n *node) string {
	if n.kind == kUnion {
		names := make([]string, len(n.branches))
		for i, b := range n.branches {
			names[i] = typeName(b)
		}
		last := len(names) - 1
		if last == 0 {
			return "a union of " + names[0]
		}
		return "a union of " + strings.Join(names[:last], ", ") + " and " + names[last]
	}
	name := kindNames[n.kind]
	article := "a "
	if strings.IndexByte("aeiou", name[0]) >= 0 {
		article = "an "
	}
	if n.kind == kBytes {
		article = ""
	}
	switch {
	case n.name != "":
		return article + name + " (" + n.name + ")"
	case n.logical != "":
		return article + name + " with logical type " + strconv.Quote(n.logical)
	}
	return article + name
}

// typeName is a type's name in a schema: its full name if it has one.
func typeName(n *node) string {
	if n.name != "" {
		return n.name
	}
	return kindNames[n.kind]
}

var kindNames = [...]string{
	kNull: "null", kBoolean: "boolean", kInt: "int", kLong: "long", kFloat: "float",
	kDouble: "double", kBytes: "bytes", kString: "string", kFixed: "fixed", kEnum: "enum",
	kRecord: "record", kArray: "array", kMap: "map", kUnion: "union",
}

// Locate finds the plan's targets in body, one record of the plan's schema
// in Avro's binary encoding, and sets f (after resetting it) to their
// spans and to the frames of the array and map blocks written with a byte
// size that hold them. A union at null holds nothing: no span. It checks
// only what it walks, up to the end of the last top-level field holding a
// target; a record that does not parse that far is an *fieldpath.Error
// naming where it stopped.
func (p *Plan) Locate(body []byte, f *fieldpath.Found) error {
	f.Reset()
	if _, perr := p.root.locate(body, 0, 0, f); perr != nil {
		e := perr.err()
		return &fieldpath.Error{Field: e.Field, Reason: e.Reason}
	}
	return nil
}

// locate walks the value of w at b[at:] and returns where it ends.
func (w *want) locate(b []byte, at, depth int, f *fieldpath.Found) (int, *pathErr) {
	if depth > maxDepth {
		return 0, fault("nested deeper than %d levels", maxDepth)
	}
	if w.union {
		v, k := readLong(b[at:])
		if k <= 0 {
			return 0, fault("union branch: %s", varintFault(k))
		}
		at += k
		switch v {
		case w.null:
			return at, nil
		case w.value:
		default:
			return 0, fault("union branch %d out of range [0, %d)", v, w.branches)
		}
	}
	switch w.kind {
	case kString, kBytes:
		return w.locateValue(b, at, f)
	case kRecord:
		return w.locateRecord(b, at, depth, f)
	}
	return w.locateBlocks(b, at, depth, f)
}

// locateValue reports the string or bytes at b[at:] as a span.
func (w *want) locateValue(b []byte, at int, f *fieldpath.Found) (int, *pathErr) {
	l, k := readLong(b[at:])
	if k <= 0 {
		return 0, fault("%s length: %s", kindName(w.kind), varintFault(k))
	}
	start := at + k
	switch {
	case l < 0:
		return 0, fault("%s length is negative", kindName(w.kind))
	case l > int64(len(b)-start):
		return 0, fault("%s of %d bytes but only %d bytes left", kindName(w.kind), l, len(b)-start)
	case padded(b[at:start]):
		// Splice writes lengths in their shortest form: the value could
		// not be restored byte for byte.
		return 0, fault("%s length is not in its shortest form", kindName(w.kind))
	}
	end := start + int(l)
	// Filled in place: appending the literal measured slower (it is
	// built aside and copied).
	f.Spans = append(f.Spans, fieldpath.Span{})
	sp := &f.Spans[len(f.Spans)-1]
	sp.Target, sp.LenAt, sp.Start, sp.End = w.target, at, start, end
	sp.Len, sp.Bytes = fieldpath.Zigzag, w.kind == kBytes
	return end, nil
}

// padded reports whether the varint v is longer than it needs to be: a
// last byte of zero adds nothing.
func padded(v []byte) bool { return len(v) > 1 && v[len(v)-1] == 0 }

func (w *want) locateRecord(b []byte, at, depth int, f *fieldpath.Found) (int, *pathErr) {
	var perr *pathErr
	for i := range w.fields {
		fw := &w.fields[i]
		if fw.want != nil {
			at, perr = fw.want.locate(b, at, depth+1, f)
		} else {
			at, perr = skip(fw.skip, b, at, depth+1)
		}
		if perr != nil {
			return 0, perr.at(fw.name)
		}
	}
	for i := range w.rest {
		if at, perr = skip(w.rest[i].node, b, at, depth+1); perr != nil {
			return 0, perr.at(w.rest[i].name)
		}
	}
	return at, nil
}

// locateBlocks walks the blocks of an array or map: each a count, then (if
// the count is negative) a byte size, then the items; a zero count ends
// the value. A sized block that holds spans becomes a frame; one that can
// hold none is jumped over.
func (w *want) locateBlocks(b []byte, at, depth int, f *fieldpath.Found) (int, *pathErr) {
	item, next := 0, 0 // next: the first of w.items not yet reached
	for {
		count, k := readLong(b[at:])
		if k <= 0 {
			return 0, fault("%s block count: %s", w.blockWhat, varintFault(k))
		}
		at += k
		if count == 0 {
			return at, nil
		}
		end, sizeAt := len(b), -1
		if count < 0 {
			if count == math.MinInt64 {
				return 0, fault("%s block count out of range", w.blockWhat)
			}
			count = -count
			size, k := readLong(b[at:])
			if k <= 0 {
				return 0, fault("%s block size: %s", w.blockWhat, varintFault(k))
			}
			if size < 0 || size > int64(len(b)-at-k) {
				return 0, fault("%s block of %d bytes but only %d bytes left", w.blockWhat, size, len(b)-at-k)
			}
			sizeAt, at = at, at+k
			end = at + int(size)
		}
		start := at
		if perr := w.checkCount(count, item, end-at); perr != nil {
			return 0, perr
		}
		n := int(count)
		if sizeAt >= 0 && w.every == nil && (next == len(w.items) || w.items[next].index >= item+n) {
			at, item = end, item+n
			continue
		}
		frame, spans := len(f.Frames), len(f.Spans)
		if sizeAt >= 0 {
			f.Frames = append(f.Frames, fieldpath.Frame{LenAt: sizeAt, Start: at, End: end, Len: fieldpath.Zigzag})
		}
		for range n {
			var perr *pathErr
			if at, perr = w.locateItem(b, at, depth, item, &next, f); perr != nil {
				return 0, perr.at(index(item))
			}
			item++
		}
		if sizeAt < 0 {
			continue
		}
		switch {
		case at != end:
			return 0, fault("%s block of %d bytes holds items of %d bytes", w.blockWhat, end-start, at-start)
		case len(f.Spans) == spans:
			f.Frames = f.Frames[:frame]
		case padded(b[sizeAt:start]):
			return 0, fault("%s block size is not in its shortest form", w.blockWhat)
		}
	}
}

// checkCount refuses a block of count items that room bytes cannot hold,
// and, for items that may take no bytes, too many of them.
func (w *want) checkCount(count int64, item, room int) *pathErr {
	if w.perItem > 0 && count > int64(room/w.perItem) {
		return fault("%s block of %d items cannot fit in the %d bytes left", w.blockWhat, count, room)
	}
	if w.perItem == 0 && int64(item)+count > maxZeroSizeItems {
		return fault("%s of more than %d empty items", w.blockWhat, maxZeroSizeItems)
	}
	return nil
}

// locateItem walks item number item (and, in a map, its key first).
func (w *want) locateItem(b []byte, at, depth, item int, next *int, f *fieldpath.Found) (int, *pathErr) {
	if w.isMap {
		var perr *pathErr
		if at, perr = skipKey(b, at); perr != nil {
			return 0, perr
		}
	}
	iw := w.every
	if *next < len(w.items) && w.items[*next].index == item {
		iw = w.items[*next].want
		*next++
	}
	if iw == nil {
		return skip(w.node.items, b, at, depth+1)
	}
	return iw.locate(b, at, depth+1, f)
}

func skipKey(b []byte, at int) (int, *pathErr) {
	l, k := readLong(b[at:])
	switch {
	case k <= 0:
		return 0, fault("map key length: %s", varintFault(k))
	case l < 0 || l > int64(len(b)-at-k):
		return 0, fault("map key of %d bytes but only %d bytes left", l, len(b)-at-k)
	}
	return at + k + int(l), nil
}

// skip returns where the value of n at b[at:] ends. It checks only what
// it must to find the end without reading past b: lengths, counts, union
// branches and nesting depth; not UTF-8, booleans, int ranges or enum
// symbols. A block written with a byte size is jumped over.
func skip(n *node, b []byte, at, depth int) (int, *pathErr) {
	if depth > maxDepth {
		return 0, fault("nested deeper than %d levels", maxDepth)
	}
	switch n.kind {
	case kNull:
		return at, nil
	case kInt, kLong, kEnum:
		_, k := readLong(b[at:])
		if k <= 0 {
			return 0, fault("%s: %s", kindNames[n.kind], varintFault(k))
		}
		return at + k, nil
	case kBoolean, kFloat, kDouble, kFixed:
		if n.minSize > len(b)-at {
			return 0, fault("%s: %s", kindNames[n.kind], errTruncated)
		}
		return at + n.minSize, nil
	case kBytes, kString:
		l, k := readLong(b[at:])
		switch {
		case k <= 0:
			return 0, fault("%s length: %s", kindName(n.kind), varintFault(k))
		case l < 0:
			return 0, fault("%s length is negative", kindName(n.kind))
		case l > int64(len(b)-at-k):
			return 0, fault("%s of %d bytes but only %d bytes left", kindName(n.kind), l, len(b)-at-k)
		}
		return at + k + int(l), nil
	case kRecord:
		var perr *pathErr
		for i := range n.fields {
			if at, perr = skip(n.fields[i].node, b, at, depth+1); perr != nil {
				return 0, perr.at(n.fields[i].name)
			}
		}
		return at, nil
	case kUnion:
		v, k := readLong(b[at:])
		if k <= 0 {
			return 0, fault("union branch: %s", varintFault(k))
		}
		if v < 0 || v >= int64(len(n.branches)) {
			return 0, fault("union branch %d out of range [0, %d)", v, len(n.branches))
		}
		return skip(n.branches[v], b, at+k, depth+1)
	case kArray, kMap:
		return skipBlocks(n, b, at, depth)
	}
	return 0, fault("unknown node kind %d", n.kind)
}

// skipBlocks skips the blocks of an array or map.
func skipBlocks(n *node, b []byte, at, depth int) (int, *pathErr) {
	what, per := "array", n.items.minSize
	if n.kind == kMap {
		what, per = "map", per+1
	}
	item := 0
	for {
		count, k := readLong(b[at:])
		if k <= 0 {
			return 0, fault("%s block count: %s", what, varintFault(k))
		}
		at += k
		switch {
		case count == 0:
			return at, nil
		case count < 0:
			size, k := readLong(b[at:])
			if k <= 0 {
				return 0, fault("%s block size: %s", what, varintFault(k))
			}
			if size < 0 || size > int64(len(b)-at-k) {
				return 0, fault("%s block of %d bytes but only %d bytes left", what, size, len(b)-at-k)
			}
			at += k + int(size)
			continue
		case per > 0 && count > int64((len(b)-at)/per):
			return 0, fault("%s block of %d items cannot fit in the %d bytes left", what, count, len(b)-at)
		case per == 0 && int64(item)+count > maxZeroSizeItems:
			return 0, fault("%s of more than %d empty items", what, maxZeroSizeItems)
		}
		for range count {
			var perr *pathErr
			if n.kind == kMap {
				if at, perr = skipKey(b, at); perr != nil {
					return 0, perr.at(index(item))
				}
			}
			if at, perr = skip(n.items, b, at, depth+1); perr != nil {
				return 0, perr.at(index(item))
			}
			item++
		}
	}
}

// tagsProp is the field property holding Confluent's data-contract tags: a
// JSON array of strings.
const tagsProp = "confluent:tags"

// Tagged returns the paths of the string and bytes fields whose
// "confluent:tags" property holds tag, in schema order, as Plan reads
// them: [*] for every item of an array or value of a map. A tagged field
// holding an array or map of strings gives the path of its items. A walk
// does not enter a record it is already inside, so recursive types end.
//
// Every branch of a union is searched, not only the one a Plan can look
// through: a tagged field behind another union is returned, and Plan then
// says why it cannot be encrypted, rather than the field staying in clear
// unnoticed.
func (s *Schema) Tagged(tag string) []string {
	t := tagWalk{tag: tag}
	t.value(s.root, "")
	return t.paths
}

type tagWalk struct {
	tag   string
	open  []*node // the records the walk is inside
	paths []string
}

// value looks for tagged fields inside a value of n at path.
func (t *tagWalk) value(n *node, path string) {
	switch n.kind {
	case kRecord:
		if slices.Contains(t.open, n) {
			return
		}
		t.open = append(t.open, n)
		for _, f := range n.fields {
			p := f.name
			if path != "" {
				p = path + "." + f.name
			}
			if hasTag(f.avro, t.tag) {
				t.text(f.node, p)
			}
			t.value(f.node, p)
		}
		t.open = t.open[:len(t.open)-1]
	case kArray, kMap:
		t.value(n.items, path+"[*]")
	case kUnion:
		for _, b := range n.branches {
			t.value(b, path)
		}
	}
}

// text adds path if a value of n there is a string or bytes, or the paths
// of the strings or bytes it holds as items or union branches.
func (t *tagWalk) text(n *node, path string) {
	switch n.kind {
	case kString, kBytes:
		if !slices.Contains(t.paths, path) {
			t.paths = append(t.paths, path)
		}
	case kArray, kMap:
		t.text(n.items, path+"[*]")
	case kUnion:
		for _, b := range n.branches {
			t.text(b, path)
		}
	}
}

func hasTag(f *hamba.Field, tag string) bool {
	if f == nil {
		return false
	}
	tags, _ := f.Prop(tagsProp).([]any)
	for _, v := range tags {
		if s, ok := v.(string); ok && s == tag {
			return true
		}
	}
	return false
}
