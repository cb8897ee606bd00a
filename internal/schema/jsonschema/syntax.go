package jsonschema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// SyntaxOptions tighten what counts as valid JSON.
type SyntaxOptions struct {
	// RejectDuplicateKeys refuses an object that names a key twice. JSON
	// allows it (RFC 8259 says names SHOULD be unique) but readers disagree
	// on which value wins, so a record that two consumers read differently
	// can be refused at the door. Keys are compared after unescaping.
	RejectDuplicateKeys bool
}

// SyntaxError is a payload that is not valid JSON.
type SyntaxError struct {
	// Offset is the byte at which the fault was found.
	Offset int
	// Reason says what is wrong.
	Reason string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// maxNesting bounds the depth of arrays and objects, as encoding/json does.
const maxNesting = 10000

// CheckSyntax reports whether b is exactly one JSON value (RFC 8259),
// surrounded by nothing but whitespace, with strings in valid UTF-8. It
// allocates nothing for a valid document unless duplicate keys are refused
// and an object has more than a few keys.
func CheckSyntax(b []byte, opts SyntaxOptions) error {
	d := decoder{b: b, dupes: opts.RejectDuplicateKeys}
	return d.document(false)
}

// Decode parses b as CheckSyntax does and returns its value as
// encoding/json would decode it into an any with UseNumber: maps, slices,
// strings, json.Number, bools and nil. With duplicate keys allowed the last
// value of a key wins.
func Decode(b []byte, opts SyntaxOptions) (any, error) {
	d := decoder{b: b, dupes: opts.RejectDuplicateKeys}
	if err := d.document(true); err != nil {
		return nil, err
	}
	return d.val, nil
}

type decoder struct {
	b     []byte
	pos   int
	dupes bool
	depth int
	val   any // the last value decoded, when building
	// keys holds the keys of the objects being read (innermost last),
	// when duplicates are refused without building maps.
	keys [][]byte
	// scratch holds unescaped strings being built.
	scratch []byte
}

func (d *decoder) fail(format string, args ...any) error {
	return &SyntaxError{Offset: d.pos, Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) document(build bool) error {
	d.space()
	if err := d.value(build); err != nil {
		return err
	}
	d.space()
	if d.pos != len(d.b) {
		return d.fail("%d bytes after the top-level value", len(d.b)-d.pos)
	}
	return nil
}

func (d *decoder) space() {
	for d.pos < len(d.b) {
		switch d.b[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(build bool) error {
	if d.pos >= len(d.b) {
		return d.fail("unexpected end of input, want a value")
	}
	switch c := d.b[d.pos]; {
	case c == '{':
		return d.object(build)
	case c == '[':
		return d.array(build)
	case c == '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		if build {
			d.val = string(s)
		}
		return nil
	case c == '-' || c >= '0' && c <= '9':
		return d.number(build)
	case c == 't':
		return d.literal("true", true, build)
	case c == 'f':
		return d.literal("false", false, build)
	case c == 'n':
		return d.literal("null", nil, build)
	default:
		return d.fail("unexpected %s, want a value", describe(c))
	}
}

func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (d *decoder) literal(word string, v any, build bool) error {
	if !bytes.HasPrefix(d.b[d.pos:], []byte(word)) {
		return d.fail("invalid literal, want %s", word)
	}
	d.pos += len(word)
	if build {
		d.val = v
	}
	return nil
}

func (d *decoder) number(build bool) error {
	start := d.pos
	b := d.b
	i := d.pos
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		d.pos = i
		return d.fail("invalid number: want a digit")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.pos = i
			return d.fail("invalid number: want a digit after the decimal point")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.pos = i
			return d.fail("invalid number: want a digit in the exponent")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	d.pos = i
	if build {
		d.val = json.Number(b[start:i])
	}
	return nil
}

// str reads a string at d.pos (its opening quote) and returns its
// content, unescaped. It aliases the input, or the scratch buffer when the
// string has escapes, and is valid until the next call.
func (d *decoder) str() ([]byte, error) {
	d.pos++ // the opening quote
	start := d.pos
	b := d.b
	i := d.pos
	// Skip eight bytes at a time while none of them is a quote, a
	// backslash or a control character: strings are most of a record.
	for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			raw := b[start:i]
			if !utf8.Valid(raw) {
				d.pos = start
				return nil, d.fail("string is not valid UTF-8")
			}
			return raw, nil
		case c == '\\':
			d.pos = i
			return d.escaped(start)
		case c < 0x20:
			d.pos = i
			return nil, d.fail("control character %s in a string", describe(c))
		}
		i++
	}
	d.pos = len(b)
	return nil, d.fail("unterminated string")
}

// escaped finishes a string that has escapes: the bytes from start to d.pos
// are plain; d.pos is at a backslash.
func (d *decoder) escaped(start int) ([]byte, error) {
	b := d.b
	out := append(d.scratch[:0], b[start:d.pos]...)
	if !utf8.Valid(out) {
		d.pos = start
		return nil, d.fail("string is not valid UTF-8")
	}
	plain := d.pos // start of the current run of unescaped bytes
	i := d.pos
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			if !utf8.Valid(b[plain:i]) {
				d.pos = plain
				return nil, d.fail("string is not valid UTF-8")
			}
			out = append(out, b[plain:i]...)
			d.pos = i + 1
			d.scratch = out
			return out, nil
		case c < 0x20:
			d.pos = i
			return nil, d.fail("control character %s in a string", describe(c))
		case c != '\\':
			i++
			continue
		}
		if !utf8.Valid(b[plain:i]) {
			d.pos = plain
			return nil, d.fail("string is not valid UTF-8")
		}
		out = append(out, b[plain:i]...)
		if i+1 >= len(b) {
			d.pos = len(b)
			return nil, d.fail("unterminated string")
		}
		switch e := b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
			i += 2
		case 'b':
			out, i = append(out, '\b'), i+2
		case 'f':
			out, i = append(out, '\f'), i+2
		case 'n':
			out, i = append(out, '\n'), i+2
		case 'r':
			out, i = append(out, '\r'), i+2
		case 't':
			out, i = append(out, '\t'), i+2
		case 'u':
			r, ok := hex4(b[i+2:])
			if !ok {
				d.pos = i
				return nil, d.fail("invalid \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A valid pair makes one rune; a lone surrogate becomes
				// U+FFFD, as encoding/json decodes it.
				if len(b) >= i+6 && b[i] == '\\' && b[i+1] == 'u' {
					if r2, ok := hex4(b[i+2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							r, i = dec, i+6
						} else {
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			d.pos = i
			return nil, d.fail("invalid escape %s", describe(e))
		}
		plain = i
	}
	d.pos = len(b)
	return nil, d.fail("unterminated string")
}

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
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > maxNesting {
		return d.fail("nested deeper than %d levels", maxNesting)
	}
	return nil
}

func (d *decoder) array(build bool) error {
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++ // [
	var arr []any
	if build {
		arr = []any{}
	}
	d.space()
	if d.pos < len(d.b) && d.b[d.pos] == ']' {
		d.pos++
		d.depth--
		if build {
			d.val = arr
		}
		return nil
	}
	for {
		d.space()
		if err := d.value(build); err != nil {
			return err
		}
		if build {
			arr = append(arr, d.val)
		}
		d.space()
		if d.pos >= len(d.b) {
			return d.fail("unexpected end of input in an array")
		}
		switch d.b[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			if build {
				d.val = arr
			}
			return nil
		default:
			return d.fail("unexpected %s in an array, want ',' or ']'", describe(d.b[d.pos]))
		}
	}
}

// smallObject is the key count up to which duplicate keys are found by
// comparing with each earlier key rather than through a map.
const smallObject = 16

func (d *decoder) object(build bool) error {
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++ // {
	var obj map[string]any
	if build {
		obj = map[string]any{}
	}
	keysAt := len(d.keys)
	var seen map[string]struct{}
	defer func() { d.keys = d.keys[:keysAt] }()
	d.space()
	if d.pos < len(d.b) && d.b[d.pos] == '}' {
		d.pos++
		d.depth--
		if build {
			d.val = obj
		}
		return nil
	}
	for {
		d.space()
		if d.pos >= len(d.b) {
			return d.fail("unexpected end of input in an object, want a key")
		}
		if d.b[d.pos] != '"' {
			return d.fail("unexpected %s in an object, want a string key", describe(d.b[d.pos]))
		}
		keyAt := d.pos
		k, err := d.str()
		if err != nil {
			return err
		}
		var key string
		switch {
		case build:
			key = string(k)
			if _, dup := obj[key]; dup && d.dupes {
				d.pos = keyAt
				return d.fail("duplicate key %q", key)
			}
		case d.dupes:
			if dupe := d.seenKey(k, keysAt, &seen); dupe {
				d.pos = keyAt
				return d.fail("duplicate key %q", k)
			}
		}
		d.space()
		if d.pos >= len(d.b) || d.b[d.pos] != ':' {
			if d.pos >= len(d.b) {
				return d.fail("unexpected end of input in an object, want ':'")
			}
			return d.fail("unexpected %s after an object key, want ':'", describe(d.b[d.pos]))
		}
		d.pos++
		d.space()
		if err := d.value(build); err != nil {
			return err
		}
		if build {
			obj[key] = d.val
		}
		d.space()
		if d.pos >= len(d.b) {
			return d.fail("unexpected end of input in an object")
		}
		switch d.b[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			if build {
				d.val = obj
			}
			return nil
		default:
			return d.fail("unexpected %s in an object, want ',' or '}'", describe(d.b[d.pos]))
		}
	}
}

// seenKey records key k of the object whose keys start at keysAt in
// d.keys, and reports whether the object already had it.
func (d *decoder) seenKey(k []byte, keysAt int, seen *map[string]struct{}) bool {
	if *seen != nil {
		if _, ok := (*seen)[string(k)]; ok {
			return true
		}
		(*seen)[string(k)] = struct{}{}
		return false
	}
	for _, prev := range d.keys[keysAt:] {
		if bytes.Equal(prev, k) {
			return true
		}
	}
	if len(d.keys)-keysAt < smallObject {
		// k may alias the scratch buffer, which the next string reuses.
		if len(d.scratch) > 0 && len(k) > 0 && &k[0] == &d.scratch[0] {
			k = bytes.Clone(k)
		}
		d.keys = append(d.keys, k)
		return false
	}
	*seen = make(map[string]struct{}, 2*smallObject)
	for _, prev := range d.keys[keysAt:] {
		(*seen)[string(prev)] = struct{}{}
	}
	(*seen)[string(k)] = struct{}{}
	return false
}

// special reports whether any byte of w is '"', '\\' or below 0x20, with
// the bit tricks of "Bit Twiddling Hacks" (haszero, hasless).
func special(w uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	hasZero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	return hasZero(w^(ones*'"'))|hasZero(w^(ones*'\\'))|((w-ones*0x20) & ^w & highs) != 0
}
