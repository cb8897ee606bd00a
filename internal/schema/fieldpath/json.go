package fieldpath

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds how deeply a JSON record may nest arrays and objects.
const maxJSONDepth = 1000

// manyNames is the number of member names wanted in one object above which
// a plan looks names up in a map rather than comparing them one by one.
const manyNames = 8

// JSONPlan finds the targets in JSON texts. It is read-only once compiled:
// any number of goroutines may use it at once, each with its own Found.
type JSONPlan struct {
	targets []Target
	root    *jnode
}

// jnode is what a plan wants of one value of a record. A value can match
// several steps at once (member "b" of an object matches both ".b" and
// "[*]"; item 0 of an array both "[0]" and "[*]"), so the plan merges their
// paths when it is compiled, and the walk follows one node per value.
type jnode struct {
	// target is the index of the target whose value this is, or -1 for a
	// value that holds targets.
	target int
	// field is the Error.Field for faults at this value: the path of its
	// target, or of the first target below it.
	field string
	// text is where the value lies, as a path ("customer", "cards[*]"),
	// for messages about a value that holds targets.
	text string

	// A value that holds targets is an object whose members named names
	// hold them, or an array whose items listed in items hold them; any is
	// what every other member or item holds (nil: nothing).
	names  []string
	named  []jedge // named[i] is member names[i]
	byName map[string]int
	items  []jedge // by ascending index
	any    *jnode
}

// jedge leads from a value to a member or item that holds targets.
type jedge struct {
	node *jnode
	// index is the item's position, for an array's item.
	index int
	// required: a target that is not Optional needs the member or item.
	required bool
	// field is the Error.Field when the member or item is missing or
	// named twice: the first target that requires it, else the first
	// target below it.
	field string
}

// CompileJSON plans the search for targets in JSON records. It refuses
// targets it could not locate unambiguously: a target whose path is a
// prefix of another's (its value would have to be both a string and hold a
// field), two targets that can name the same value ("a[*]" and "a[0]"),
// and a value that one target needs as an object and another as an array.
func CompileJSON(targets []Target) (*JSONPlan, error) {
	if len(targets) == 0 {
		return nil, errors.New("no field paths to locate")
	}
	t := trie{targets: targets, root: newTnode()}
	for i := range targets {
		if err := t.insert(i); err != nil {
			return nil, err
		}
	}
	c := merger{targets: targets, budget: 4*t.size + 4096}
	root, err := c.merge([]*tnode{t.root}, "")
	if err != nil {
		return nil, err
	}
	return &JSONPlan{targets: slices.Clone(targets), root: root}, nil
}

// Targets returns the plan's targets, which Span.Target indexes. The slice
// is the plan's own: do not modify it.
func (p *JSONPlan) Targets() []Target { return p.targets }

// Locate finds p's targets in the JSON text body and sets f's spans to
// where their string values lie, in record order. It checks the whole text's syntax as it
// goes, except that string contents are copied as they are: neither their
// UTF-8 nor raw control characters are checked, only their escapes. On
// error, f holds nothing.
func (p *JSONPlan) Locate(body []byte, f *Found) error {
	f.Reset()
	// The member marks of the objects being read live in f.stack, which
	// Splice resets before using it for its own work.
	f.stack = f.stack[:0]
	w := jsonWalk{b: body, f: f}
	w.space()
	err := w.value(p.root, 0)
	if err == nil {
		w.space()
		if w.pos < len(body) {
			err = w.syntax("text after the value")
		}
	}
	if err != nil {
		f.Reset()
		return err
	}
	return nil
}

// jsonWalk is one Locate's position in a record.
type jsonWalk struct {
	b   []byte
	pos int
	f   *Found
}

// value reads the value at w.pos, which depth containers enclose, and
// locates what n wants of it.
func (w *jsonWalk) value(n *jnode, depth int) error {
	if w.pos >= len(w.b) {
		return w.syntax("want a value")
	}
	if n.target >= 0 {
		return w.leaf(n, depth)
	}
	switch w.b[w.pos] {
	case '{':
		if n.items == nil {
			return w.object(n, depth+1)
		}
	case '[':
		if n.names == nil {
			return w.array(n, depth+1)
		}
	case 'n':
		// Nothing there, so nothing to find.
		return w.literal("null")
	}
	return w.wrongType(n, depth)
}

// leaf reads a target's value: a string, whose content becomes a span, or
// null.
func (w *jsonWalk) leaf(n *jnode, depth int) error {
	switch w.b[w.pos] {
	case '"':
		start := w.pos + 1
		if _, err := w.str(); err != nil {
			return err
		}
		w.f.Spans = append(w.f.Spans, Span{Target: n.target, LenAt: start, Start: start, End: w.pos - 1, Len: NoLen})
		return nil
	case 'n':
		return w.literal("null")
	}
	return w.wrongType(n, depth)
}

// wrongType reports the value at w.pos as not what n needs, unless it is
// not JSON at all.
func (w *jsonWalk) wrongType(n *jnode, depth int) error {
	is := jsonKind(w.b[w.pos])
	if err := w.skip(depth); err != nil {
		return err
	}
	return &Error{Field: n.field, Reason: n.about("is " + is + ", not " + n.needs())}
}

// needs says what n needs its value to be.
func (n *jnode) needs() string {
	switch {
	case n.target >= 0:
		return "a string"
	case n.items != nil:
		return "an array"
	case n.names != nil:
		return "an object"
	}
	return "an object or array"
}

// about prefixes reason with where n lies, for a value that holds targets;
// a target's own value is the Error's Field already.
func (n *jnode) about(reason string) string {
	switch {
	case n.target >= 0:
		return reason
	case n.text == "":
		return "the record " + reason
	}
	return strconv.Quote(n.text) + " " + reason
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// object reads the object at w.pos, the depth-th container, whose members
// n names or n.any covers.
func (w *jsonWalk) object(n *jnode, depth int) error {
	if depth > maxJSONDepth {
		return w.tooDeep()
	}
	// f.stack[base+i] becomes 1 when member names[i] is read.
	base := len(w.f.stack)
	for range n.named {
		w.f.stack = append(w.f.stack, 0)
	}
	w.pos++
	w.space()
	if w.at('}') {
		w.pos++
	} else {
		for {
			child, err := w.member(n, base)
			if err == nil {
				err = w.valueOrSkip(child, depth)
			}
			if err != nil {
				return err
			}
			w.space()
			if w.at(',') {
				w.pos++
				w.space()
				continue
			}
			if !w.at('}') {
				return w.syntax("want ',' or '}'")
			}
			w.pos++
			break
		}
	}
	for i, e := range n.named {
		if e.required && w.f.stack[base+i] == 0 {
			return &Error{Field: e.field, Reason: e.node.about("is missing")}
		}
	}
	w.f.stack = w.f.stack[:base]
	return nil
}

// member reads a member's name and the ':' after it, and returns what n
// wants of its value (nil: nothing). A name that n wants must not appear
// twice: readers of the record disagree on which copy wins, and the other
// copy would travel unchanged.
func (w *jsonWalk) member(n *jnode, base int) (*jnode, error) {
	key, escaped, err := w.name()
	if err != nil || n.names == nil {
		return n.any, err
	}
	if escaped {
		key = w.unescape(key)
	}
	i := n.lookup(key)
	if i < 0 {
		return n.any, nil
	}
	e := &n.named[i]
	if w.f.stack[base+i] != 0 {
		return nil, &Error{Field: e.field, Reason: e.node.about("appears twice in one object")}
	}
	w.f.stack[base+i] = 1
	return e.node, nil
}

// lookup returns the index in n.names of key, or -1.
func (n *jnode) lookup(key []byte) int {
	if n.byName != nil {
		if i, ok := n.byName[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, name := range n.names {
		if name == string(key) {
			return i
		}
	}
	return -1
}

// array reads the array at w.pos, the depth-th container, whose items
// n.items lists or n.any covers.
func (w *jsonWalk) array(n *jnode, depth int) error {
	if depth > maxJSONDepth {
		return w.tooDeep()
	}
	w.pos++
	w.space()
	next := 0 // n.items[next] is the next item n lists
	if w.at(']') {
		w.pos++
	} else {
		for i := 0; ; i++ {
			child := n.any
			if next < len(n.items) && n.items[next].index == i {
				child = n.items[next].node
				next++
			}
			if err := w.valueOrSkip(child, depth); err != nil {
				return err
			}
			w.space()
			if w.at(',') {
				w.pos++
				w.space()
				continue
			}
			if !w.at(']') {
				return w.syntax("want ',' or ']'")
			}
			w.pos++
			break
		}
	}
	for _, e := range n.items[next:] {
		if e.required {
			return &Error{Field: e.field, Reason: e.node.about("is missing")}
		}
	}
	return nil
}

func (w *jsonWalk) valueOrSkip(n *jnode, depth int) error {
	if n == nil {
		return w.skip(depth)
	}
	return w.value(n, depth)
}

// skip reads the value at w.pos, which depth containers enclose, checking
// its syntax and keeping nothing.
func (w *jsonWalk) skip(depth int) error {
	if w.pos >= len(w.b) {
		return w.syntax("want a value")
	}
	switch w.b[w.pos] {
	case '"':
		_, err := w.str()
		return err
	case '{', '[':
		return w.skipContainer(depth)
	}
	return w.scalar()
}

// skipContainer skips the object or array at w.pos. It keeps the kinds of
// the containers open inside it in a bit stack rather than recursing, so
// that a deep record costs no call stack.
func (w *jsonWalk) skipContainer(depth int) error {
	var inObject [maxJSONDepth/64 + 1]uint64 // bit k: the k-th open container is an object
	open := 0
	for {
		// w.pos is at a value.
		if w.pos >= len(w.b) {
			return w.syntax("want a value")
		}
		switch c := w.b[w.pos]; c {
		case '{', '[':
			if depth+open >= maxJSONDepth {
				return w.tooDeep()
			}
			isObject := c == '{'
			if isObject {
				inObject[open/64] |= 1 << (open % 64)
			} else {
				inObject[open/64] &^= 1 << (open % 64)
			}
			open++
			w.pos++
			w.space()
			if !w.at(closer(isObject)) {
				if isObject {
					if _, _, err := w.name(); err != nil {
						return err
					}
				}
				continue
			}
			w.pos++
			open--
		case '"':
			if _, err := w.str(); err != nil {
				return err
			}
		default:
			if err := w.scalar(); err != nil {
				return err
			}
		}
		// After a value: close the containers that end here, then go on
		// to the next member or item.
		for {
			if open == 0 {
				return nil
			}
			w.space()
			isObject := inObject[(open-1)/64]&(1<<((open-1)%64)) != 0
			if w.at(',') {
				w.pos++
				w.space()
				if isObject {
					if _, _, err := w.name(); err != nil {
						return err
					}
				}
				break
			}
			if !w.at(closer(isObject)) {
				if isObject {
					return w.syntax("want ',' or '}'")
				}
				return w.syntax("want ',' or ']'")
			}
			w.pos++
			open--
		}
	}
}

func closer(isObject bool) byte {
	if isObject {
		return '}'
	}
	return ']'
}

// name reads a member's name and the ':' after it, leaving w.pos at the
// member's value. key is the name as written; escaped reports whether it
// holds escapes.
func (w *jsonWalk) name() (key []byte, escaped bool, err error) {
	if !w.at('"') {
		return nil, false, w.syntax("want a member name")
	}
	start := w.pos + 1
	if escaped, err = w.str(); err != nil {
		return nil, false, err
	}
	key = w.b[start : w.pos-1]
	w.space()
	if !w.at(':') {
		return nil, false, w.syntax("want ':'")
	}
	w.pos++
	w.space()
	return key, escaped, nil
}

// str reads the string whose opening quote is at w.pos, checking its
// escapes, and leaves w.pos after its closing quote. It reports whether
// the string holds escapes.
func (w *jsonWalk) str() (escaped bool, err error) {
	b := w.b
	i := w.pos + 1 // the first byte not yet read
	q := w.pos     // the first '"' at or after i, once found
	for {
		if q < i {
			q = bytes.IndexByte(b[i:], '"')
			if q < 0 {
				w.pos = len(b)
				return false, w.syntax("want '\"'")
			}
			q += i
		}
		e := bytes.IndexByte(b[i:q], '\\')
		if e < 0 {
			w.pos = q + 1
			return escaped, nil
		}
		escaped = true
		if i, err = w.escape(i + e); err != nil {
			return false, err
		}
	}
}

// escape checks the escape whose backslash is at at and returns the index
// of the byte after it.
func (w *jsonWalk) escape(at int) (int, error) {
	b := w.b
	if at+1 < len(b) {
		switch b[at+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return at + 2, nil
		case 'u':
			if _, ok := hex4(b[at+2:]); ok {
				return at + 6, nil
			}
		}
	}
	w.pos = at
	if escapeCut(b[at+1:]) {
		w.pos = len(b)
	}
	return 0, w.syntax("bad escape")
}

// escapeCut reports whether rest, what follows a backslash, is the start
// of an escape that the end of the record cuts.
func escapeCut(rest []byte) bool {
	if len(rest) == 0 {
		return true
	}
	if rest[0] != 'u' || len(rest) >= 5 {
		return false
	}
	for _, c := range rest[1:] {
		if !isHex(c) {
			return false
		}
	}
	return true
}

// unescape decodes key, a member name with escapes that str has checked,
// into f.repl, which Splice resets before using it for its own work.
func (w *jsonWalk) unescape(key []byte) []byte {
	out := w.f.repl[:0]
	for {
		e := bytes.IndexByte(key, '\\')
		if e < 0 {
			out = append(out, key...)
			break
		}
		out = append(out, key[:e]...)
		c := key[e+1]
		key = key[e+2:]
		if c != 'u' {
			out = append(out, unescaped(c))
			continue
		}
		r, _ := hex4(key)
		key = key[4:]
		if utf16.IsSurrogate(r) {
			// A pair makes one rune; a lone surrogate is U+FFFD, as
			// encoding/json decodes it.
			r2, ok := rune(0), false
			if len(key) >= 6 && key[0] == '\\' && key[1] == 'u' {
				r2, ok = hex4(key[2:])
			}
			if r = utf16.DecodeRune(r, r2); ok && r != utf8.RuneError {
				key = key[6:]
			}
		}
		out = utf8.AppendRune(out, r)
	}
	w.f.repl = out
	return out
}

// unescaped is the byte a one-letter escape stands for.
func unescaped(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // '"', '\\', '/'
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scalar reads the number, true, false or null at w.pos.
func (w *jsonWalk) scalar() error {
	switch c := w.b[w.pos]; {
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return w.number()
	}
	return w.syntax("want a value")
}

func (w *jsonWalk) literal(word string) error {
	rest := w.b[w.pos:]
	if len(rest) < len(word) {
		if string(rest) == word[:len(rest)] {
			w.pos = len(w.b) // cut
		}
		return w.syntax("bad literal")
	}
	if string(rest[:len(word)]) != word {
		return w.syntax("bad literal")
	}
	w.pos += len(word)
	return nil
}

// number reads a number as RFC 8259 spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *jsonWalk) number() error {
	b, i := w.b, w.pos
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		w.pos = i
		return w.syntax("bad number")
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(b, i+1); b[i-1] == '.' {
			w.pos = i
			return w.syntax("bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			w.pos = i
			return w.syntax("bad number")
		}
		i = j
	}
	w.pos = i
	return nil
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func (w *jsonWalk) space() {
	for w.pos < len(w.b) {
		switch w.b[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// at reports whether the byte at w.pos is c.
func (w *jsonWalk) at(c byte) bool { return w.pos < len(w.b) && w.b[w.pos] == c }

// syntax reports the record as not JSON at w.pos. Its reason never quotes
// the record's bytes: they may be secrets.
func (w *jsonWalk) syntax(want string) error {
	if w.pos >= len(w.b) {
		return &Error{Reason: "not JSON: unexpected end at byte " + strconv.Itoa(len(w.b))}
	}
	return &Error{Reason: "not JSON: " + want + " at byte " + strconv.Itoa(w.pos)}
}

func (w *jsonWalk) tooDeep() error {
	return &Error{Reason: fmt.Sprintf("nested deeper than %d levels at byte %d", maxJSONDepth, w.pos)}
}

// trie holds the targets' paths as written, one node per distinct prefix.
type trie struct {
	targets []Target
	root    *tnode
	size    int
}

// tnode is a node of the trie: the value at the end of a path prefix.
type tnode struct {
	target   int // the target whose path ends here, or -1
	first    int // the first target whose path goes through here
	required int // the first target through here that is not Optional, or -1
	steps    []Step
	next     []*tnode // next[i] follows steps[i]
}

func newTnode() *tnode { return &tnode{target: -1, first: -1, required: -1} }

func (t *trie) insert(i int) error {
	p := t.targets[i].Path
	if err := checkJSONSteps(p); err != nil {
		return err
	}
	n := t.root
	t.reach(n, i)
	for _, s := range p.Steps {
		if n.target >= 0 {
			return t.prefixError(n.target, i)
		}
		n = t.child(n, s)
		t.reach(n, i)
	}
	switch {
	case n.target >= 0:
		return fmt.Errorf("field paths %q and %q name the same field", t.targets[n.target].Path.Text, p.Text)
	case len(n.steps) > 0:
		return t.prefixError(i, n.first)
	}
	n.target = i
	return nil
}

func checkJSONSteps(p Path) error {
	if len(p.Steps) == 0 || len(p.Steps) > maxSteps {
		return fmt.Errorf("field path %q has %d steps, not 1 to %d", p.Text, len(p.Steps), maxSteps)
	}
	if p.Steps[0].IsIndex() {
		return fmt.Errorf("field path %q starts with an index: a JSON record is an object, so a path starts with a member name", p.Text)
	}
	for _, s := range p.Steps {
		if s.IsIndex() && s.Index < Any {
			return fmt.Errorf("field path %q has a negative index", p.Text)
		}
	}
	return nil
}

// reach notes that target i's path goes through n.
func (t *trie) reach(n *tnode, i int) {
	if n.first < 0 {
		n.first = i
	}
	if n.required < 0 && !t.targets[i].Optional {
		n.required = i
	}
}

// child returns n's node for step s, adding it if it is new.
func (t *trie) child(n *tnode, s Step) *tnode {
	if !s.IsIndex() {
		s.Index = 0 // a name step's Index means nothing
	}
	for i, have := range n.steps {
		if have == s {
			return n.next[i]
		}
	}
	c := newTnode()
	n.steps = append(n.steps, s)
	n.next = append(n.next, c)
	t.size++
	return c
}

func (t *trie) prefixError(short, long int) error {
	a, b := t.targets[short].Path.Text, t.targets[long].Path.Text
	return fmt.Errorf("field path %q is a prefix of %q: its value cannot be both a string and hold another field", a, b)
}

// merger turns sets of trie nodes that match the same value into jnodes.
type merger struct {
	targets []Target
	// budget bounds the jnodes made: paths mixing [*] with names or [N]
	// at many levels could otherwise multiply them.
	budget int
}

// merge makes the jnode for a value that every node of set matches, at
// text.
func (m *merger) merge(set []*tnode, text string) (*jnode, error) {
	if m.budget--; m.budget < 0 {
		return nil, errors.New("field paths mix [*] with names or indexes at too many levels")
	}
	if err := m.checkOneKind(set, text); err != nil {
		return nil, err
	}
	first := set[0]
	for _, t := range set {
		if t.first < first.first {
			first = t
		}
	}
	n := &jnode{target: first.target, field: m.targets[first.first].Path.Text, text: text}
	if n.target >= 0 {
		return n, nil
	}
	var anys []*tnode
	for _, t := range set {
		for i, s := range t.steps {
			if s.IsIndex() && s.Index == Any {
				anys = append(anys, t.next[i])
			}
		}
	}
	if err := m.mergeSteps(n, set, anys); err != nil {
		return nil, err
	}
	if anys != nil {
		var err error
		if n.any, err = m.merge(anys, text+"[*]"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// checkOneKind refuses a set whose nodes want the value as different
// kinds: a string for one target and an object or array for another, a
// string for two targets at once, or an object for one and an array for
// another.
func (m *merger) checkOneKind(set []*tnode, text string) error {
	leaf, inner, named, indexed := -1, -1, -1, -1 // a target of each kind
	for _, t := range set {
		if t.target < 0 {
			inner = t.first
		} else if leaf >= 0 {
			return m.overlap(leaf, t.target, fmt.Sprintf("both name %q", text))
		} else {
			leaf = t.target
		}
		for i, s := range t.steps {
			switch {
			case !s.IsIndex():
				named = t.next[i].first
			case s.Index != Any:
				indexed = t.next[i].first
			}
		}
	}
	if leaf >= 0 && inner >= 0 {
		return m.overlap(leaf, inner, fmt.Sprintf("%q cannot be both a string and hold another field", text))
	}
	if named >= 0 && indexed >= 0 {
		return m.overlap(named, indexed, fmt.Sprintf("%q cannot be both an object and an array", text))
	}
	return nil
}

func (m *merger) overlap(a, b int, why string) error {
	if a > b {
		a, b = b, a
	}
	return fmt.Errorf("field paths %q and %q overlap: %s", m.targets[a].Path.Text, m.targets[b].Path.Text, why)
}

// mergeSteps gives n an edge for every name and [N] that a node of set
// follows, leading to the merge of the nodes that step reaches and of
// anys, the nodes that [*] reaches.
func (m *merger) mergeSteps(n *jnode, set, anys []*tnode) error {
	var steps []Step
	for _, t := range set {
		for _, s := range t.steps {
			if (!s.IsIndex() || s.Index != Any) && !slices.Contains(steps, s) {
				steps = append(steps, s)
			}
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int { return cmp.Compare(a.Index, b.Index) }) // items by index; names keep their order
	for _, s := range steps {
		e, err := m.edge(set, anys, s, n.text)
		if err != nil {
			return err
		}
		if s.IsIndex() {
			e.index = s.Index
			n.items = append(n.items, e)
		} else {
			n.names = append(n.names, s.Name)
			n.named = append(n.named, e)
		}
	}
	if len(n.names) > manyNames {
		n.byName = make(map[string]int, len(n.names))
		for i, name := range n.names {
			n.byName[name] = i
		}
	}
	return nil
}

// edge makes the edge for step s from the value that set matches.
func (m *merger) edge(set, anys []*tnode, s Step, text string) (jedge, error) {
	group := slices.Clone(anys)
	required := -1
	for _, t := range set {
		for i, have := range t.steps {
			if have != s {
				continue
			}
			c := t.next[i]
			group = append(group, c)
			if c.required >= 0 && (required < 0 || c.required < required) {
				required = c.required
			}
		}
	}
	if s.IsIndex() {
		text += "[" + strconv.Itoa(s.Index) + "]"
	} else if text != "" {
		text += "." + s.Name
	} else {
		text = s.Name
	}
	c, err := m.merge(group, text)
	if err != nil {
		return jedge{}, err
	}
	e := jedge{node: c, required: required >= 0, field: c.field}
	if e.required {
		e.field = m.targets[required].Path.Text
	}
	return e, nil
}
