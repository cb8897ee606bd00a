// Package jsonscan reads the top-level members of a JSON object without
// decoding it: it checks the syntax of the whole input, reports where each
// top-level value starts and ends, and decodes only the values asked for.
// The LLM gateway uses it to route a request on its "model" and "stream"
// fields and to splice a new model name into the body, leaving every other
// byte as the client sent it. It imports nothing of Strait's.
package jsonscan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted, as in
// encoding/json, so that a hostile body cannot exhaust the stack.
const MaxDepth = 10000

// SyntaxError is malformed JSON: what is wrong and at which byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// FieldError is a well-formed body whose routing fields are unusable: a
// missing or non-string model, a non-boolean stream, or a field given twice.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Msg }

// ErrNotObject is returned when the input is valid JSON but not an object.
var ErrNotObject = errors.New("the body must be a JSON object")

// Members checks that b is exactly one JSON object (surrounding whitespace
// allowed) and calls fn for each top-level member in order, with the key
// (escape sequences decoded) and the value's raw bytes. fn returning false
// stops the calls, but the rest of b is still checked. The slices alias b.
func Members(b []byte, fn func(key []byte, value []byte) bool) error {
	calling := true
	return each(b, func(rawKey []byte, escaped bool, start, end int) error {
		if !calling {
			return nil
		}
		key := rawKey
		if escaped {
			k, ok := unquote(rawKey)
			if !ok {
				return &SyntaxError{Offset: start, Msg: "bad escape in key"}
			}
			key = []byte(k)
		}
		calling = fn(key, b[start:end])
		return nil
	})
}

// Request is what routing needs from a chat or messages request body.
type Request struct {
	// Model is the decoded "model" string.
	Model string
	// ModelStart and ModelEnd delimit the model's JSON string in the body,
	// quotes included, for Splice.
	ModelStart, ModelEnd int
	// Stream is the "stream" boolean; absent or null means false.
	Stream bool
}

// ScanRequest checks that body is one JSON object and returns its "model"
// and "stream" members. A missing, empty or non-string model, a stream that
// is not a boolean or null, and either key given twice (under any spelling
// of its escapes) are *FieldError: the provider's parser might pick the
// other copy, so routing on one of two would be unsafe.
func ScanRequest(body []byte) (Request, error) {
	var req Request
	var sawModel, sawStream bool
	var fieldErr error
	err := each(body, func(rawKey []byte, escaped bool, start, end int) error {
		key := rawKey
		if escaped {
			k, ok := unquote(rawKey)
			if !ok {
				return &SyntaxError{Offset: start, Msg: "bad escape in key"}
			}
			key = []byte(k)
		}
		switch string(key) {
		case "model":
			if sawModel {
				fieldErr = cmp.Or(fieldErr, error(&FieldError{Field: "model", Msg: "is given twice: give it once"}))
				return nil
			}
			sawModel = true
			v := body[start:end]
			if v[0] != '"' {
				fieldErr = cmp.Or(fieldErr, error(&FieldError{Field: "model", Msg: "must be a string naming the model"}))
				return nil
			}
			req.ModelStart, req.ModelEnd = start, end
			if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
				req.Model = string(inner)
			} else if s, ok := unquote(v[1 : len(v)-1]); ok {
				req.Model = s
			}
		case "stream":
			if sawStream {
				fieldErr = cmp.Or(fieldErr, error(&FieldError{Field: "stream", Msg: "is given twice: give it once"}))
				return nil
			}
			sawStream = true
			switch string(body[start:end]) {
			case "true":
				req.Stream = true
			case "false", "null":
			default:
				fieldErr = cmp.Or(fieldErr, error(&FieldError{Field: "stream", Msg: "must be true or false"}))
			}
		}
		return nil
	})
	if err != nil {
		return Request{}, err
	}
	if fieldErr != nil {
		return Request{}, fieldErr
	}
	if !sawModel {
		return Request{}, &FieldError{Field: "model", Msg: "is required: name the model to use"}
	}
	if req.Model == "" {
		return Request{}, &FieldError{Field: "model", Msg: "must not be empty"}
	}
	return req, nil
}

// PathAt returns the path of the innermost value of the JSON text b that
// holds the byte at offset off: member names joined by dots, array indices
// in brackets, as in messages[2].content[0].text; "" for the top-level value.
// It is for error messages, so that a decoder's byte offset can be told to
// a client as the field it is about. Scanning stops, returning the path so
// far, where b is not valid JSON.
func PathAt(b []byte, off int) string {
	var path []byte
	s := scanner{b: b}
	s.space()
	for depth := 1; s.i < len(b) && (b[s.i] == '{' || b[s.i] == '['); depth++ {
		obj := b[s.i] == '{'
		s.i++
		for n := 0; ; n++ {
			s.space()
			if s.i >= len(b) || b[s.i] == '}' || b[s.i] == ']' {
				return string(path)
			}
			var key []byte
			if obj {
				ks := s.i
				if b[s.i] != '"' || s.str() != nil {
					return string(path)
				}
				key = b[ks+1 : s.i-1]
				if s.escaped {
					k, ok := unquote(key)
					if !ok {
						return string(path)
					}
					key = []byte(k)
				}
				s.space()
				if s.i >= len(b) || b[s.i] != ':' {
					return string(path)
				}
				s.i++
				s.space()
			}
			start := s.i
			if s.value(depth) != nil {
				return string(path)
			}
			if off >= start && off < s.i {
				if !obj {
					path = append(strconv.AppendInt(append(path, '['), int64(n), 10), ']')
				} else {
					if len(path) > 0 {
						path = append(path, '.')
					}
					path = append(path, key...)
				}
				s.i = start
				break
			}
			s.space()
			if s.i >= len(b) || b[s.i] != ',' {
				return string(path)
			}
			s.i++
		}
	}
	return string(path)
}

// Splice returns body with the bytes from start to end (a JSON value, as
// ScanRequest reports for the model) replaced by s as a JSON string. The
// result is a new slice; body is not changed.
func Splice(body []byte, start, end int, s string) []byte {
	out := make([]byte, 0, len(body)-(end-start)+len(s)+2)
	out = append(out, body[:start]...)
	out = AppendString(out, s)
	return append(out, body[end:]...)
}

// AppendString appends s as a JSON string, byte for byte as encoding/json
// writes it without HTML escaping (\b and \f have their short escapes,
// other control bytes \u00XX; invalid UTF-8 becomes U+FFFD; U+2028 and
// U+2029 are escaped so the output is safe to embed anywhere), without
// allocating.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// unquote decodes the inside of a JSON string (no quotes) with escapes.
func unquote(inner []byte) (string, bool) {
	q := make([]byte, 0, len(inner)+2)
	q = append(q, '"')
	q = append(q, inner...)
	q = append(q, '"')
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", false
	}
	return s, true
}

// each is the scanner behind Members and ScanRequest: it walks the top-level
// object of b, checking everything, and calls fn with each member's raw key
// (inside the quotes), whether that key has escapes, and its value's span.
// An error from fn stops the scan and is returned.
func each(b []byte, fn func(rawKey []byte, escaped bool, start, end int) error) error {
	s := scanner{b: b}
	s.space()
	if s.i >= len(b) {
		return &SyntaxError{Offset: s.i, Msg: "the body is empty: send a JSON object"}
	}
	if b[s.i] != '{' {
		if err := s.value(0); err != nil {
			return err
		}
		s.space()
		if s.i < len(b) {
			return s.errf("unexpected %s after the top-level value", s.what())
		}
		return ErrNotObject
	}
	s.i++
	s.space()
	if s.i < len(b) && b[s.i] == '}' {
		s.i++
		return s.end()
	}
	for {
		s.space()
		if s.i >= len(b) || b[s.i] != '"' {
			return s.errf("expected a member name in quotes, found %s", s.what())
		}
		ks := s.i
		if err := s.str(); err != nil {
			return err
		}
		key, escaped := b[ks+1:s.i-1], s.escaped
		s.space()
		if s.i >= len(b) || b[s.i] != ':' {
			return s.errf("expected ':' after a member name, found %s", s.what())
		}
		s.i++
		s.space()
		vs := s.i
		if err := s.value(1); err != nil {
			return err
		}
		if err := fn(key, escaped, vs, s.i); err != nil {
			return err
		}
		s.space()
		if s.i >= len(b) {
			return s.errf("the object is not closed: expected ',' or '}'")
		}
		switch b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return s.end()
		default:
			return s.errf("expected ',' or '}' after a member, found %s", s.what())
		}
	}
}

type scanner struct {
	b       []byte
	i       int
	escaped bool // the last string scanned had an escape sequence
}

func (s *scanner) errf(format string, args ...any) error {
	return &SyntaxError{Offset: s.i, Msg: fmt.Sprintf(format, args...)}
}

// what describes the byte at the current offset for an error message.
func (s *scanner) what() string {
	if s.i >= len(s.b) {
		return "the end of the body"
	}
	c := s.b[s.i]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (s *scanner) end() error {
	s.space()
	if s.i < len(s.b) {
		return s.errf("unexpected %s after the top-level object", s.what())
	}
	return nil
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value skips one JSON value starting at s.i (no leading whitespace),
// checking it. depth is the nesting of the value's container.
func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.errf("expected a value, found the end of the body")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		return s.container(depth + 1)
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.errf("expected a value, found %s", s.what())
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.errf("expected %s", lit)
	}
	s.i += len(lit)
	return nil
}

// container skips an object or array, and all it holds; depth counts
// this one. The containers still open are kept on a bit stack instead of
// in recursive calls: a request's goroutine scans bodies with a few KiB
// of stack, and each level of recursion took about 250 bytes of it (a
// response's usage, four levels down, was where that stack outgrew its
// first size and was copied), and a body nested thousands deep took
// megabytes.
func (s *scanner) container(depth int) error {
	if depth > MaxDepth {
		return s.errf("nested deeper than %d levels", MaxDepth)
	}
	var open bitStack
	obj := s.b[s.i] == '{'
	open.push(obj)
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == closerOf(obj) {
		s.i++
		return nil
	}
	for {
		// An element of the innermost container: for an object, a member.
		s.space()
		if obj {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return s.errf("expected a member name in quotes, found %s", s.what())
			}
			if err := s.str(); err != nil {
				return err
			}
			s.space()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return s.errf("expected ':' after a member name, found %s", s.what())
			}
			s.i++
			s.space()
		}
		if s.i < len(s.b) && (s.b[s.i] == '{' || s.b[s.i] == '[') {
			if depth+1 > MaxDepth {
				return s.errf("nested deeper than %d levels", MaxDepth)
			}
			depth++
			obj = s.b[s.i] == '{'
			open.push(obj)
			s.i++
			s.space()
			if s.i >= len(s.b) || s.b[s.i] != closerOf(obj) {
				continue // to its first element
			}
			s.i++ // empty: a whole value
			open.pop()
			depth--
			obj = open.top()
		} else if err := s.value(depth); err != nil {
			return err
		}
		// After an element: a comma, or the end of its container, and
		// perhaps of the containers around that.
		for {
			s.space()
			closer := closerOf(obj)
			if s.i >= len(s.b) {
				return s.errf("expected ',' or %q, found the end of the body", closer)
			}
			if s.b[s.i] == ',' {
				s.i++
				break
			}
			if s.b[s.i] != closer {
				return s.errf("expected ',' or %q, found %s", closer, s.what())
			}
			s.i++
			open.pop()
			if open.n == 0 {
				return nil
			}
			depth--
			obj = open.top()
		}
	}
}

func closerOf(obj bool) byte {
	if obj {
		return '}'
	}
	return ']'
}

// bitStack is a stack of booleans (is this open container an object?),
// in a word for the first 64 levels.
type bitStack struct {
	n    int
	bits uint64
	more []uint64
}

func (b *bitStack) push(v bool) {
	i := b.n
	b.n++
	if i < 64 {
		b.bits = b.bits&^(1<<i) | bit(v)<<i
		return
	}
	i -= 64
	if i/64 == len(b.more) {
		b.more = append(b.more, 0)
	}
	w := &b.more[i/64]
	*w = *w&^(1<<(i%64)) | bit(v)<<(i%64)
}

func (b *bitStack) pop() { b.n-- }

// top is the innermost; false when the stack is empty.
func (b *bitStack) top() bool {
	i := b.n - 1
	switch {
	case i < 0:
		return false
	case i < 64:
		return b.bits&(1<<i) != 0
	}
	i -= 64
	return b.more[i/64]&(1<<(i%64)) != 0
}

func bit(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func (s *scanner) str() error {
	s.escaped = false
	s.i++ // opening quote
	for {
		// The common case: a run of plain bytes.
		j := s.i
		for j < len(s.b) {
			c := s.b[j]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			j++
		}
		s.i = j
		if s.i >= len(s.b) {
			return s.errf("a string is not closed")
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return nil
		case c < 0x20:
			return s.errf("control character 0x%02x in a string: escape it", c)
		}
		// A backslash.
		s.escaped = true
		if s.i+1 >= len(s.b) {
			s.i++
			return s.errf("a string is not closed")
		}
		switch s.b[s.i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.i += 2
		case 'u':
			if s.i+6 > len(s.b) {
				return s.errf(`incomplete \u escape`)
			}
			for _, h := range s.b[s.i+2 : s.i+6] {
				if !isHex(h) {
					return s.errf(`bad \u escape: want four hex digits`)
				}
			}
			s.i += 6
		default:
			return s.errf("bad escape \\%c in a string", s.b[s.i+1])
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return s.errf("bad number: expected a digit, found %s", s.what())
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return s.errf("bad number: expected a digit after '.', found %s", s.what())
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return s.errf("bad number: expected a digit in the exponent, found %s", s.what())
		}
	}
	return nil
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// WholeNumber parses a JSON value that is a non-negative integer or null
// (as 0), of at most 15 digits; it reports false for anything else.
func WholeNumber(v []byte) (int, bool) {
	if string(v) == "null" {
		return 0, true
	}
	if len(v) == 0 || len(v) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
