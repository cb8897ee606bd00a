// Package fieldpath names fields inside encoded records and rewrites their
// values in place. A Path ("customer.ssn", "cards[*].number") names a field;
// a format's locator (Avro and Protobuf in their codec packages, JSON here)
// walks an encoded record and reports where each named field's value lies,
// as Spans, and which length prefixes enclose them, as Frames; Splice then
// copies the record with those values replaced, rewriting every length
// prefix a new value's size changes. Bytes outside the spans and prefixes
// are copied as they are: key order, whitespace, number spelling and
// unknown fields survive.
//
// It is the engine of structured field encryption and imports nothing of
// ours.
package fieldpath

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Any is the Index of a step that selects every item: "[*]".
const Any = -1

// Step is one step of a path: a field by name, or an item by index.
type Step struct {
	// Name is the field's name; "" for an index step.
	Name string
	// Index is, for an index step, the item's position (from 0) or Any.
	Index int
}

// IsIndex reports whether the step selects items rather than a field.
func (s Step) IsIndex() bool { return s.Name == "" }

// Path names a field: field names joined by dots, each optionally followed
// by [*] (every item of an array, every value of a map) or [N] (the N-th
// item of an array).
type Path struct {
	// Text is the path as written.
	Text  string
	Steps []Step
}

func (p Path) String() string { return p.Text }

// ErrSyntax is a path that cannot be read.
var ErrSyntax = errors.New("malformed field path")

// maxSteps bounds a path's length; no record nests this deep.
const maxSteps = 64

// Parse reads a path: "ssn", "customer.ssn", "cards[*].number",
// "lines[0].sku", "matrix[*][*]". A field name is any run of characters
// other than '.', '[' and ']'; a name that contains them cannot be named.
func Parse(s string) (Path, error) {
	p := Path{Text: s}
	bad := func(why string) (Path, error) {
		return Path{}, fmt.Errorf("%w %q: %s (write fields as a.b, items as a[*] or a[0])", ErrSyntax, s, why)
	}
	if strings.TrimSpace(s) == "" {
		return bad("empty")
	}
	rest := s
	expectName := true
	for len(rest) > 0 {
		switch {
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return bad("a '[' without its ']'")
			}
			if len(p.Steps) == 0 {
				return bad("an index before any field name")
			}
			in := rest[1:end]
			idx := Any
			if in != "*" {
				n, err := strconv.Atoi(in)
				if err != nil || n < 0 || in != strconv.Itoa(n) {
					return bad(fmt.Sprintf("index %q is neither * nor a number from 0", in))
				}
				idx = n
			}
			p.Steps = append(p.Steps, Step{Index: idx})
			rest = rest[end+1:]
			expectName = false
		case rest[0] == '.':
			if expectName {
				return bad("an empty field name")
			}
			rest = rest[1:]
			expectName = true
			if rest == "" {
				return bad("ends with '.'")
			}
		case rest[0] == ']':
			return bad("a ']' without its '['")
		default:
			if !expectName {
				return bad("a field name must follow '.'")
			}
			end := strings.IndexAny(rest, ".[]")
			if end < 0 {
				end = len(rest)
			}
			name := rest[:end]
			if strings.TrimSpace(name) != name {
				return bad(fmt.Sprintf("field name %q has spaces around it", name))
			}
			p.Steps = append(p.Steps, Step{Name: name})
			rest = rest[end:]
			expectName = false
		}
		if len(p.Steps) > maxSteps {
			return bad(fmt.Sprintf("more than %d steps", maxSteps))
		}
	}
	return p, nil
}

// MustParse is Parse for paths known to be valid; it panics otherwise.
func MustParse(s string) Path {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Target is a field a plan looks for.
type Target struct {
	Path Path
	// Optional lets a record lack the field. It matters only where the
	// format can tell a missing field from a present one (JSON): Avro
	// fields are always there (null, for an optional one, is skipped), and
	// Protobuf cannot tell an absent field from its default.
	Optional bool
}

// LenKind is how a length prefix is encoded.
type LenKind uint8

const (
	// NoLen: the value has no length prefix (a JSON string's content,
	// delimited by its quotes).
	NoLen LenKind = iota
	// Uvarint: a base-128 varint (Protobuf).
	Uvarint
	// Zigzag: a zigzag base-128 varint, Avro's long.
	Zigzag
)

// Span is one value a locator found: the bytes Start..End of the record,
// with their length prefix at LenAt..Start (LenAt == Start for NoLen).
type Span struct {
	// Target is the index, in the plan's targets, of the path that named
	// the value.
	Target int
	LenAt  int
	Start  int
	End    int
	Len    LenKind
	// Bytes is true for a bytes field (raw bytes may replace the value),
	// false for a string (the replacement must be text of the format:
	// valid UTF-8, and for JSON, the content of a JSON string).
	Bytes bool
}

// Frame is a length prefix, at LenAt..Start, that measures Start..End, a
// stretch holding spans: a Protobuf message nested in the record, an Avro
// array or map block written with its byte size. Splice rewrites it when
// the spans inside change size.
type Frame struct {
	LenAt int
	Start int
	End   int
	Len   LenKind
}

// Found is what a locator reports for one record. Its slices are reused
// from record to record: Reset it, and keep one per goroutine.
type Found struct {
	// Spans and Frames are in the order their LenAt appears in the record.
	// A frame encloses the spans and frames between its Start and End.
	Spans  []Span
	Frames []Frame

	// Splice's working memory.
	repl   []byte
	replAt []int
	newLen []int
	acc    []int
	stack  []int
}

// Reset empties f for the next record, keeping its memory.
func (f *Found) Reset() {
	f.Spans, f.Frames = f.Spans[:0], f.Frames[:0]
}

// Error is a record in which a target cannot be located or replaced: the
// field is missing, has the wrong type, or the record does not parse. The
// message names the field, never its value.
type Error struct {
	// Field is the path of the field at fault, as the target names it
	// (or, for a record that does not parse, where the parse stopped);
	// empty when the fault is in no field.
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return "field " + strconv.Quote(e.Field) + ": " + e.Reason
}
