package avro

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is a record that does not match its schema. The message names the
// field and the fault, never the field's value.
type Error struct {
	// Field is the path to the faulty value: field names joined with dots,
	// [i] for the i-th item of an array or entry of a map. Empty when the
	// fault is in no field (bytes after the record, say).
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

// maxDepth bounds nesting, so that a recursive schema and hostile data
// cannot exhaust the stack.
const maxDepth = 256

// maxZeroSizeItems bounds the item count of an array or map whose items may
// take no bytes (nulls, empty records): nothing else bounds it.
const maxZeroSizeItems = 1 << 20

// Validate reports whether b is exactly one datum of the schema in Avro's
// binary encoding: every length, count, union branch and enum index within
// bounds, booleans 0 or 1, strings valid UTF-8 and no bytes left over.
func (s *Schema) Validate(b []byte) error {
	rest, perr := walk(s.root, b, 0)
	if perr != nil {
		return perr.err()
	}
	if len(rest) != 0 {
		return &Error{Reason: fmt.Sprintf("%d bytes after the end of the record", len(rest))}
	}
	return nil
}

// pathErr collects the path of a fault while the walk unwinds; the path is
// built innermost first and reversed once.
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
		e := p.rev[i]
		if sb.Len() > 0 && e[0] != '[' {
			sb.WriteByte('.')
		}
		sb.WriteString(e)
	}
	return &Error{Field: sb.String(), Reason: p.reason}
}

func fault(format string, args ...any) *pathErr {
	return &pathErr{reason: fmt.Sprintf(format, args...)}
}

var errTruncated = "truncated"

// walk checks one datum of n at the start of b and returns the bytes after
// it.
func walk(n *node, b []byte, depth int) ([]byte, *pathErr) {
	if depth > maxDepth {
		return nil, fault("nested deeper than %d levels", maxDepth)
	}
	switch n.kind {
	case kNull:
		return b, nil
	case kBoolean:
		if len(b) == 0 {
			return nil, fault("boolean: %s", errTruncated)
		}
		if b[0] > 1 {
			return nil, fault("boolean byte is %d, want 0 or 1", b[0])
		}
		return b[1:], nil
	case kInt:
		v, k := readLong(b)
		if k <= 0 {
			return nil, fault("int: %s", varintFault(k))
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fault("int: value out of the 32-bit range")
		}
		return b[k:], nil
	case kLong:
		_, k := readLong(b)
		if k <= 0 {
			return nil, fault("long: %s", varintFault(k))
		}
		return b[k:], nil
	case kFloat:
		if len(b) < 4 {
			return nil, fault("float: %s", errTruncated)
		}
		return b[4:], nil
	case kDouble:
		if len(b) < 8 {
			return nil, fault("double: %s", errTruncated)
		}
		return b[8:], nil
	case kBytes, kString:
		l, k := readLong(b)
		if k <= 0 {
			return nil, fault("%s length: %s", kindName(n.kind), varintFault(k))
		}
		b = b[k:]
		if l < 0 {
			return nil, fault("%s length is negative", kindName(n.kind))
		}
		if l > int64(len(b)) {
			return nil, fault("%s of %d bytes but only %d bytes left", kindName(n.kind), l, len(b))
		}
		if n.kind == kString && !utf8.Valid(b[:l]) {
			return nil, fault("string is not valid UTF-8")
		}
		return b[l:], nil
	case kFixed:
		if len(b) < n.size {
			return nil, fault("fixed %s of %d bytes but only %d bytes left", n.name, n.size, len(b))
		}
		return b[n.size:], nil
	case kEnum:
		v, k := readLong(b)
		if k <= 0 {
			return nil, fault("enum %s: %s", n.name, varintFault(k))
		}
		if v < 0 || v >= int64(n.size) {
			return nil, fault("enum %s: symbol index %d out of range [0, %d)", n.name, v, n.size)
		}
		return b[k:], nil
	case kRecord:
		for i := range n.fields {
			f := &n.fields[i]
			var perr *pathErr
			if b, perr = walk(f.node, b, depth+1); perr != nil {
				return nil, perr.at(f.name)
			}
		}
		return b, nil
	case kUnion:
		v, k := readLong(b)
		if k <= 0 {
			return nil, fault("union branch: %s", varintFault(k))
		}
		if v < 0 || v >= int64(len(n.branches)) {
			return nil, fault("union branch %d out of range [0, %d)", v, len(n.branches))
		}
		return walk(n.branches[v], b[k:], depth+1)
	case kArray, kMap:
		return walkBlocks(n, b, depth)
	}
	return nil, fault("unknown node kind %d", n.kind)
}

// walkBlocks checks the blocks of an array or map: each a count, then (if
// the count is negative) a byte size, then that many items; a zero count
// ends the value.
func walkBlocks(n *node, b []byte, depth int) ([]byte, *pathErr) {
	what := "array"
	if n.kind == kMap {
		what = "map"
	}
	item := 0
	for {
		count, k := readLong(b)
		if k <= 0 {
			return nil, fault("%s block count: %s", what, varintFault(k))
		}
		b = b[k:]
		if count == 0 {
			return b, nil
		}
		if count < 0 {
			if count == math.MinInt64 {
				return nil, fault("%s block count out of range", what)
			}
			count = -count
			size, k := readLong(b)
			if k <= 0 {
				return nil, fault("%s block size: %s", what, varintFault(k))
			}
			if size < 0 || size > int64(len(b)-k) {
				return nil, fault("%s block of %d bytes but only %d bytes left", what, size, len(b)-k)
			}
			b = b[k:]
		}
		per := n.items.minSize
		if n.kind == kMap {
			per++ // the key's length
		}
		if per > 0 && count > int64(len(b)/per) {
			return nil, fault("%s block of %d items cannot fit in the %d bytes left", what, count, len(b))
		}
		if per == 0 && int64(item)+count > maxZeroSizeItems {
			return nil, fault("%s of more than %d empty items", what, maxZeroSizeItems)
		}
		for range count {
			var perr *pathErr
			if n.kind == kMap {
				l, k := readLong(b)
				switch {
				case k <= 0:
					return nil, fault("map key length: %s", varintFault(k)).at(index(item))
				case l < 0 || l > int64(len(b)-k):
					return nil, fault("map key of %d bytes but only %d bytes left", l, len(b)-k).at(index(item))
				case !utf8.Valid(b[k : k+int(l)]):
					return nil, fault("map key is not valid UTF-8").at(index(item))
				}
				b = b[k+int(l):]
			}
			if b, perr = walk(n.items, b, depth+1); perr != nil {
				return nil, perr.at(index(item))
			}
			item++
		}
	}
}

func index(i int) string { return "[" + strconv.Itoa(i) + "]" }

func kindName(k kind) string {
	if k == kString {
		return "string"
	}
	return "bytes"
}

// readLong reads a zigzag varint of at most 10 bytes. It returns the number
// of bytes read, 0 if b ends first, or -1 if the varint is longer than 10
// bytes or overflows 64 bits.
func readLong(b []byte) (int64, int) {
	var u uint64
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
		if i == 9 {
			return 0, -1
		}
	}
	return 0, 0
}

func varintFault(k int) string {
	if k == 0 {
		return errTruncated
	}
	return "varint longer than 10 bytes"
}
