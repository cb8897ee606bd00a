package protobuf

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Error is a record that does not match its message type. The message
// names the field and the fault, never the field's value.
type Error struct {
	// Field is the path to the faulty field: names joined with dots, or
	// the number of a field the schema does not know. Empty when the fault
	// is in no field.
	Field string
	// Reason says what is wrong.
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return "field " + strconv.Quote(e.Field) + ": " + e.Reason
}

// maxDepth bounds nesting (messages in messages, groups in groups), as
// Protobuf's own parsers do, so hostile data cannot exhaust the stack.
const maxDepth = 100

// Validate reports whether b is a well-formed record of m: every tag,
// length and varint well-formed; each known field written with the wire
// type of its kind (a repeated scalar either packed or not); nested
// messages valid in turn; strings valid UTF-8 where the file's syntax
// requires it. Fields m does not know only need to be well-formed.
func (m *Message) Validate(b []byte) error {
	if _, perr := m.walk(b, 0, 0); perr != nil {
		return perr.err()
	}
	return nil
}

type pathErr struct {
	rev    []string
	reason string
}

func (p *pathErr) at(elem string) *pathErr {
	p.rev = append(p.rev, elem)
	return p
}

func (p *pathErr) err() *Error {
	var sb strings.Builder
	for i := len(p.rev) - 1; i >= 0; i-- {
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(p.rev[i])
	}
	return &Error{Field: sb.String(), Reason: p.reason}
}

func fault(format string, args ...any) *pathErr {
	return &pathErr{reason: fmt.Sprintf(format, args...)}
}

// walk checks the fields in b. With group set, b holds a group's fields and
// the walk ends at the group's end tag, returning the bytes consumed
// including it; otherwise it consumes all of b.
func (m *Message) walk(b []byte, group protowire.Number, depth int) (int, *pathErr) {
	if depth > maxDepth {
		return 0, fault("nested deeper than %d levels", maxDepth)
	}
	off := 0
	for off < len(b) {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return 0, fault("malformed tag at byte %d: %v", off, wireErr(n))
		}
		if num > protowire.MaxValidNumber {
			return 0, fault("malformed tag at byte %d: field number %d is above %d", off, num, protowire.MaxValidNumber)
		}
		off += n
		if typ == protowire.EndGroupType {
			if group == 0 || num != group {
				return 0, fault("unexpected end-group tag for field %d", num)
			}
			return off, nil
		}
		f := m.field(num)
		if f == nil {
			n = protowire.ConsumeFieldValue(num, typ, b[off:])
			if n < 0 {
				return 0, fault("malformed value: %v", wireErr(n)).at(strconv.Itoa(int(num)))
			}
			off += n
			continue
		}
		n, perr := f.value(typ, num, b[off:], depth)
		if perr != nil {
			return 0, perr.at(f.name)
		}
		off += n
	}
	if group != 0 {
		return 0, fault("group ends without its end-group tag")
	}
	return off, nil
}

// value checks one value of field f, written with wire type typ, at the
// start of b, and returns its length.
func (f *field) value(typ protowire.Type, num protowire.Number, b []byte, depth int) (int, *pathErr) {
	if typ != f.wire && (typ != protowire.BytesType || f.packed < 0) {
		return 0, fault("%s written as wire type %s, want %s", f.kind, wireName(typ), wireName(f.wire))
	}
	switch typ {
	case protowire.StartGroupType:
		return f.msg.walk(b, num, depth+1)
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, fault("malformed %s: %v", f.kind, wireErr(n))
		}
		switch {
		case f.msg != nil:
			if _, perr := f.msg.walk(v, 0, depth+1); perr != nil {
				return 0, perr
			}
		case f.utf8:
			if !utf8.Valid(v) {
				return 0, fault("string is not valid UTF-8")
			}
		case f.packed >= 0:
			if perr := packed(f, v); perr != nil {
				return 0, perr
			}
		}
		return n, nil
	}
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return 0, fault("malformed %s: %v", f.kind, wireErr(n))
	}
	return n, nil
}

// packed checks a packed run of scalars.
func packed(f *field, v []byte) *pathErr {
	switch f.packed {
	case protowire.Fixed32Type:
		if len(v)%4 != 0 {
			return fault("packed %s run of %d bytes is not a multiple of 4", f.kind, len(v))
		}
	case protowire.Fixed64Type:
		if len(v)%8 != 0 {
			return fault("packed %s run of %d bytes is not a multiple of 8", f.kind, len(v))
		}
	default:
		for len(v) > 0 {
			_, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return fault("malformed varint in packed %s run: %v", f.kind, wireErr(n))
			}
			v = v[n:]
		}
	}
	return nil
}

func wireName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint (0)"
	case protowire.Fixed64Type:
		return "fixed64 (1)"
	case protowire.BytesType:
		return "length-delimited (2)"
	case protowire.StartGroupType:
		return "start-group (3)"
	case protowire.EndGroupType:
		return "end-group (4)"
	case protowire.Fixed32Type:
		return "fixed32 (5)"
	}
	return strconv.Itoa(int(t))
}

// wireErr describes a protowire parse failure. protowire's own errors vary
// their spacing on purpose, so that nobody compares them; messages that
// producers read should be stable. The codes are protowire's.
func wireErr(n int) string {
	switch n {
	case -1:
		return "unexpected end of data"
	case -2:
		return "invalid field number"
	case -3:
		return "varint overflows 64 bits"
	case -4:
		return "reserved wire type"
	case -5:
		return "mismatched end-group tag"
	case -6:
		return "groups nested too deep"
	}
	return "malformed"
}
