package translate

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The request and response bodies a translation reads most are decoded by
// hand: a struct decoded by reflection cost about two thirds of a
// request's translation. The hand decoders take the common shape of a
// body only: keys written as the struct tags spell them, each once, no
// string escapes they cannot undo exactly, numbers an int or a float64
// holds. At anything else (invalid JSON included) they give up, the value
// is zeroed and unmarshal decodes it the reflective way, so the result and
// any error are what encoding/json gives. FuzzFastDecode checks that a
// value the hand decoders accept is the one encoding/json decodes.

// decodeByHand decodes data into v, a pointer to a zero value of one of
// the types below, and reports whether it could; if not, v is zero again.
func decodeByHand(data []byte, v any) bool {
	d := &handDecoder{b: data}
	switch p := v.(type) {
	case *oaRequestIn:
		if d.oaRequestIn(p) && d.end() {
			return true
		}
		*p = oaRequestIn{}
	case *anRequestIn:
		if d.anRequestIn(p) && d.end() {
			return true
		}
		*p = anRequestIn{}
	case *[]oaPart:
		if d.oaParts(p) && d.end() {
			return true
		}
		*p = nil
	case *[]anBlockIn:
		if d.anBlocks(p) && d.end() {
			return true
		}
		*p = nil
	case *string:
		if d.stringInto(p) && d.end() {
			return true
		}
		*p = ""
	case *anResponse:
		if d.anResponse(p) && d.end() {
			return true
		}
		*p = anResponse{}
	case *oaResponse:
		if d.oaResponse(p) && d.end() {
			return true
		}
		*p = oaResponse{}
	}
	return false
}

// handDecoder reads one JSON document. Every method returns false where
// the hand decoders give up.
type handDecoder struct {
	b []byte
	i int
	// others counts the members of a request's top-level object that are
	// neither fields nor model, and not null (topLevelOther).
	others int
}

func (d *handDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, 0 at the end.
func (d *handDecoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// end reports whether nothing but whitespace is left.
func (d *handDecoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// null consumes a null if one is next.
func (d *handDecoder) null() bool {
	if d.peek() == 'n' && d.literal("null") {
		return true
	}
	return false
}

func (d *handDecoder) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// object reads an object, calling member for each key with the decoder
// at the key's value, which member must read.
func (d *handDecoder) object(member func(key []byte) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		key, ok := d.plainKey()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if !member(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// plainKey reads a key of printable ASCII without capitals or escapes:
// one that can match a field only by being its exact name.
func (d *handDecoder) plainKey() ([]byte, bool) {
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			return d.b[start:j], true
		case c < 0x20 || c >= 0x7f || c == '\\' || 'A' <= c && c <= 'Z':
			return nil, false
		}
	}
	return nil, false
}

// unknown reads the value of a key that is no field of the struct with
// the given field names, unless the key could be one of them to
// encoding/json by some rule of its matching (ignoring '_' and '-').
func (d *handDecoder) unknown(key []byte, names []string) bool {
	for _, n := range names {
		if sameIgnoringDelims(key, n) {
			return false
		}
	}
	return d.skip()
}

// topLevelOther reads the value of a member of a request's top-level
// object that is no field of names, counting it in others unless it is
// model (which the gateway reads itself) or null.
func (d *handDecoder) topLevelOther(key []byte, names []string) bool {
	d.space()
	start := d.i
	if !d.unknown(key, names) {
		return false
	}
	if string(key) != "model" && string(d.b[start:d.i]) != "null" {
		d.others++
	}
	return true
}

func sameIgnoringDelims(key []byte, name string) bool {
	i, j := 0, 0
	for {
		for i < len(key) && (key[i] == '_' || key[i] == '-') {
			i++
		}
		for j < len(name) && (name[j] == '_' || name[j] == '-') {
			j++
		}
		if i == len(key) || j == len(name) {
			return i == len(key) && j == len(name)
		}
		if key[i] != name[j] {
			return false
		}
		i++
		j++
	}
}

// once reports whether field (a bit) is met for the first time in an
// object: a repeated key is left to the reflective decoder.
func once(seen *uint32, field uint) bool {
	if *seen&(1<<field) != 0 {
		return false
	}
	*seen |= 1 << field
	return true
}

// array reads an array, calling elem with the decoder at each element,
// which elem must read.
func (d *handDecoder) array(elem func() bool) bool {
	if d.peek() != '[' {
		return false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// stringInto reads a string into s; null leaves s as it is.
func (d *handDecoder) stringInto(s *string) bool {
	if d.null() {
		return true
	}
	v, ok := d.str()
	*s = v
	return ok
}

// str reads a string. Escapes are undone; a string with invalid UTF-8 or
// an escaped lone surrogate (which encoding/json replaces) is given up.
func (d *handDecoder) str() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			raw := d.b[start:j]
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			d.i = j + 1
			if s, ok := commonValue(raw); ok {
				return s, true
			}
			return string(raw), true
		case c == '\\':
			return d.escapedStr(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// commonValue returns the string of raw without allocating one when raw
// is a role, a type or another value requests and answers repeat.
func commonValue(raw []byte) (string, bool) {
	if len(raw) > len("tool_result") {
		return "", false
	}
	switch string(raw) {
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "system":
		return "system", true
	case "developer":
		return "developer", true
	case "tool":
		return "tool", true
	case "text":
		return "text", true
	case "function":
		return "function", true
	case "image_url":
		return "image_url", true
	case "image":
		return "image", true
	case "file":
		return "file", true
	case "document":
		return "document", true
	case "base64":
		return "base64", true
	case "url":
		return "url", true
	case "tool_use":
		return "tool_use", true
	case "tool_result":
		return "tool_result", true
	case "thinking":
		return "thinking", true
	case "refusal":
		return "refusal", true
	case "end_turn":
		return "end_turn", true
	case "max_tokens":
		return "max_tokens", true
	case "stop":
		return "stop", true
	case "length":
		return "length", true
	case "tool_calls":
		return "tool_calls", true
	case "":
		return "", true
	}
	return "", false
}

func (d *handDecoder) escapedStr(start int) (string, bool) {
	out := make([]byte, 0, 64)
	last := start
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			out = append(out, d.b[last:j]...)
			if !utf8.Valid(out) {
				return "", false
			}
			d.i = j + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			continue
		}
		out = append(out, d.b[last:j]...)
		if j+1 >= len(d.b) {
			return "", false
		}
		j++
		switch d.b[j] {
		case '"', '\\', '/':
			out = append(out, d.b[j])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(d.b[j+1:])
			if !ok {
				return "", false
			}
			j += 4
			if utf16.IsSurrogate(r) {
				// Only a pair, \uD8xx\uDCxx, is a character.
				if len(d.b) < j+7 || d.b[j+1] != '\\' || d.b[j+2] != 'u' {
					return "", false
				}
				r2, ok := hex4(d.b[j+3:])
				if !ok {
					return "", false
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", false
				}
				j += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
		last = j + 1
	}
	return "", false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number, returning its text and whether it is written
// as an integer (no fraction, no exponent).
func (d *handDecoder) number() (lit []byte, integer, ok bool) {
	d.space()
	start, j := d.i, d.i
	b := d.b
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && '1' <= b[j] && b[j] <= '9':
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	default:
		return nil, false, false
	}
	integer = true
	if j < len(b) && b[j] == '.' {
		integer = false
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return nil, false, false
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		integer = false
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return nil, false, false
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	d.i = j
	return b[start:j], integer, true
}

// intVal reads an integer of at most 18 digits (larger ones, and numbers
// with a fraction or an exponent, which an int field refuses or may
// overflow on, are given up).
func (d *handDecoder) intVal() (int, bool) {
	lit, integer, ok := d.number()
	if !ok || !integer || len(lit) > 18 {
		return 0, false
	}
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	n := 0
	for _, c := range lit {
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// intInto reads an integer into n; null leaves n as it is.
func (d *handDecoder) intInto(n *int) bool {
	if d.null() {
		return true
	}
	v, ok := d.intVal()
	*n = v
	return ok
}

// intPtr reads an integer, or null (nil), into p.
func (d *handDecoder) intPtr(p **int) bool {
	if d.null() {
		*p = nil
		return true
	}
	v, ok := d.intVal()
	if !ok {
		return false
	}
	*p = &v
	return true
}

// floatPtr reads a number, or null (nil), into p.
func (d *handDecoder) floatPtr(p **float64) bool {
	if d.null() {
		*p = nil
		return true
	}
	lit, _, ok := d.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false
	}
	*p = &f
	return true
}

func (d *handDecoder) boolVal() (v, ok bool) {
	switch d.peek() {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	}
	return false, false
}

// boolInto reads a boolean into v; null leaves v as it is.
func (d *handDecoder) boolInto(v *bool) bool {
	if d.null() {
		return true
	}
	b, ok := d.boolVal()
	*v = b
	return ok
}

// boolPtr reads a boolean, or null (nil), into p.
func (d *handDecoder) boolPtr(p **bool) bool {
	if d.null() {
		*p = nil
		return true
	}
	b, ok := d.boolVal()
	if !ok {
		return false
	}
	*p = &b
	return true
}

// raw reads any value into r as its text (null as "null", which is what
// json.RawMessage is given). The text is a slice of the document.
func (d *handDecoder) raw(r *json.RawMessage) bool {
	d.space()
	start := d.i
	if !d.skip() {
		return false
	}
	*r = d.b[start:d.i]
	return true
}

// maxSkipDepth is how deeply skip follows nested values before it gives
// up, well inside encoding/json's own limit (10,000), which refuses a
// document nested deeper.
const maxSkipDepth = 1000

// skip reads and checks any value. Strings with invalid UTF-8 are given
// up, so that only what encoding/json keeps byte for byte is accepted.
func (d *handDecoder) skip() bool {
	var stack [16]byte
	nest := stack[:0] // the open '{' and '['
	for {
		// A value.
		switch d.peek() {
		case '{':
			d.i++
			if d.peek() == '}' {
				d.i++
				break
			}
			if !d.skipKey() {
				return false
			}
			if len(nest) == maxSkipDepth {
				return false
			}
			nest = append(nest, '{')
			continue
		case '[':
			d.i++
			if d.peek() == ']' {
				d.i++
				break
			}
			if len(nest) == maxSkipDepth {
				return false
			}
			nest = append(nest, '[')
			continue
		case '"':
			if !d.skipString() {
				return false
			}
		case 't':
			if !d.literal("true") {
				return false
			}
		case 'f':
			if !d.literal("false") {
				return false
			}
		case 'n':
			if !d.literal("null") {
				return false
			}
		default:
			if _, _, ok := d.number(); !ok {
				return false
			}
		}
		// After a value: close what ends here, or go on to the next.
		for {
			if len(nest) == 0 {
				return true
			}
			c, open := d.peek(), nest[len(nest)-1]
			if c == ',' {
				d.i++
				if open == '{' && !d.skipKey() {
					return false
				}
				break
			}
			if open == '{' && c == '}' || open == '[' && c == ']' {
				d.i++
				nest = nest[:len(nest)-1]
				continue
			}
			return false
		}
	}
}

// skipKey reads a member's key and its colon.
func (d *handDecoder) skipKey() bool {
	if d.peek() != '"' || !d.skipString() || d.peek() != ':' {
		return false
	}
	d.i++
	return true
}

// skipString reads and checks a string.
func (d *handDecoder) skipString() bool {
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(d.b[start:j]) {
				return false
			}
			d.i = j + 1
			return true
		case c == '\\':
			j++
			if j >= len(d.b) {
				return false
			}
			switch d.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(d.b[j+1:]); !ok {
					return false
				}
				j += 4
			default:
				return false
			}
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return false
}
