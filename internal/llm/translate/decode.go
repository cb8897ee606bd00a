package translate

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// Decoding errors are told to clients in the API's terms: the JSON path of
// the field as the client wrote it (messages[2].content, with indices), what
// the API wants there and what was sent, never encoding/json's wording,
// which names the gateway's Go types.

// decodeField decodes raw, the value at path at of a request, into v. want
// is what the API says that value must be ("a string or an array of
// content parts"); a value of the wrong kind deeper inside is described
// from v's type.
func decodeField(raw []byte, v any, at, want string) error {
	if err := unmarshal(raw, v); err != nil {
		path, msg := explainDecode(raw, err, "the request body", at, want)
		return badRequest(path, "%s", msg)
	}
	return nil
}

// decodeContent is decodeField for the content of the message or block at
// at, whose path is spelled out only for an error.
func decodeContent(raw []byte, v any, at, want string) error {
	if decodeByHand(raw, v) {
		return nil
	}
	return decodeField(raw, v, at+".content", want)
}

// explainDecode restates err, returned by json.Unmarshal(doc, ...), as the
// path of the offending value and a sentence about it. base is doc's own
// path in the whole document ("" when doc is the whole document, which whole
// then names: "the request body"); want, if set, is what doc itself must
// be.
func explainDecode(doc []byte, err error, whole, base, want string) (path, msg string) {
	subject := func(path string) string {
		if path == "" {
			return whole
		}
		return path
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
		off, text := syntaxProblem(doc, err)
		return base, sprintf("%s is not valid JSON at byte %d: %s", subject(base), off, text)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		rel := typeErrorPath(doc, te)
		path = joinPath(base, rel)
		w := wantOf(te.Type)
		if rel == "" && want != "" {
			w = want
		}
		if num, ok := strings.CutPrefix(te.Value, "number "); ok {
			// A number refused by a number field is too large for it; by
			// an integer field, too large or not whole.
			switch {
			case w == "a number":
				return path, sprintf("%s is %s, which is out of range for a number", subject(path), num)
			case w == "an integer" && isWhole(num):
				return path, sprintf("%s is %s, which is out of range for an integer", subject(path), num)
			}
		}
		return path, sprintf("%s must be %s, not %s", subject(path), w, gotOf(te.Value))
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return joinPath(base, fe.field), fe.msg
	}
	return base, sprintf("%s could not be read: %s", subject(base), err.Error())
}

// fieldError is returned by custom unmarshalers for a field of the wrong
// shape; field is its path relative to the document being decoded.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.msg }

// syntaxProblem locates malformed JSON, in the gateway's own wording (the
// one the gateway uses before translation, so a client reads the same
// sentence whichever path its request took).
func syntaxProblem(doc []byte, err error) (offset int, text string) {
	var js *jsonscan.SyntaxError
	if errors.As(jsonscan.Members(doc, func(_, _ []byte) bool { return false }), &js) {
		return js.Offset, js.Msg
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return int(se.Offset), se.Error()
	}
	return len(doc), "the JSON ends early"
}

// typeErrorPath finds the path, relative to doc, of the value a type error
// is about. encoding/json reports the field path without array indices and
// a byte offset at (for a string, number or literal) the end of the value
// or (for an object or array) just past its opening bracket; the offset
// gives the indices, and the field path checks that the offset was read
// right.
func typeErrorPath(doc []byte, te *json.UnmarshalTypeError) string {
	for _, off := range []int{int(te.Offset) - 1, int(te.Offset)} {
		if p := jsonscan.PathAt(doc, off); sameField(p, te.Field) {
			return p
		}
	}
	return te.Field
}

// sameField reports whether path (with indices) is the struct field path
// field, or an entry of the map at field. Names compare without regard to
// case, as encoding/json matches them.
func sameField(path, field string) bool {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			for i < len(path) && path[i] != ']' {
				i++
			}
			continue
		}
		b.WriteByte(path[i])
	}
	p := strings.Join(strings.FieldsFunc(b.String(), func(r rune) bool { return r == '.' }), ".")
	return strings.EqualFold(p, field) ||
		field != "" && len(p) > len(field) && p[len(field)] == '.' && strings.EqualFold(p[:len(field)], field)
}

// joinPath appends rel, a path inside the value at base, to base.
func joinPath(base, rel string) string {
	switch {
	case base == "":
		return rel
	case rel == "":
		return base
	case rel[0] == '[':
		return base + rel
	}
	return base + "." + rel
}

// arrayNouns names the elements of the arrays of objects the dialects
// define, in their own documentation's words.
var arrayNouns = map[reflect.Type]string{
	reflect.TypeFor[oaMessage]():   "messages",
	reflect.TypeFor[oaPart]():      "content parts",
	reflect.TypeFor[oaToolCall]():  "tool calls",
	reflect.TypeFor[oaTool]():      "tools",
	reflect.TypeFor[oaChoice]():    "choices",
	reflect.TypeFor[anMessageIn](): "messages",
	reflect.TypeFor[anBlockIn]():   "content blocks",
	reflect.TypeFor[anToolIn]():    "tools",
	reflect.TypeFor[anRespBlock](): "content blocks",
}

// wantOf says what a value decoded into a t must be, in JSON's terms.
func wantOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		if n, ok := arrayNouns[e]; ok {
			return "an array of " + n
		}
		if e.Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	}
	return "another kind of value"
}

// gotOf describes the value encoding/json found ("string", "number 1.5",
// "bool"…).
func gotOf(value string) string {
	switch value {
	case "string", "number":
		return "a " + value
	case "bool":
		return "a boolean"
	case "object", "array":
		return "an " + value
	}
	if num, ok := strings.CutPrefix(value, "number "); ok {
		return num
	}
	return value
}

// kindOf describes the JSON value raw (valid JSON) as gotOf does.
func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// isWhole reports whether num, a JSON number, has no fractional part: an
// integer field refuses such a number only when it is out of range.
func isWhole(num string) bool {
	f, err := strconv.ParseFloat(num, 64)
	if math.IsInf(f, 0) {
		return true
	}
	return err == nil && f == math.Trunc(f)
}
