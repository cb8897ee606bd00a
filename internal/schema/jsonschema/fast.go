package jsonschema

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// The fast path validates a record straight from its bytes in one pass,
// without building a value, for schemas written in a common subset of JSON
// Schema (types, properties, required, additionalProperties, items, string
// lengths, patterns, string enums, number bounds, counts). It only ever
// says "valid" when the full validator would: on any doubt — an
// unsupported keyword, a number too close to a bound, a failure — the
// record goes through the general path (decode, then the library's
// validator), which also writes the error message. FuzzFastPath pins this
// with a differential test.

// fastNode is one (sub)schema in the fast path's form; nil means any value.
type fastNode struct {
	never bool // the false schema
	types uint8
	props map[string]fastProp
	// requiredN is the number of required properties, whose bits are set
	// in props.
	requiredN int
	addlFalse bool
	addl      *fastNode
	items     *fastNode
	minLen    int
	maxLen    int // -1: none
	pattern   *regexp.Regexp
	enum      []string
	hasEnum   bool
	min, max  float64 // bounds, or NaN for none
	exclMin   float64
	exclMax   float64
	minItems  int
	maxItems  int // -1: none
	minProps  int
	maxProps  int // -1: none
}

type fastProp struct {
	node    *fastNode
	inProps bool   // listed in properties (else only in required)
	reqBit  uint64 // 0 if not required
}

const (
	tNull uint8 = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger
	tString
)

var typeBits = map[string]uint8{
	"null": tNull, "boolean": tBoolean, "object": tObject, "array": tArray,
	"number": tNumber, "integer": tInteger, "string": tString,
}

// annotations are keywords that never affect validity here. $defs and
// definitions are only reachable through $ref, which the fast path does
// not support.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "title": true, "description": true, "$comment": true,
	"default": true, "examples": true, "readOnly": true, "writeOnly": true, "deprecated": true,
	"$defs": true, "definitions": true,
}

// compileFast returns the fast form of doc, or nil if doc uses anything the
// fast path does not support. draft is the draft's year or number (4, 6,
// 7, 2019, 2020).
func compileFast(doc any, draft int, root bool) (*fastNode, bool) {
	switch v := doc.(type) {
	case bool:
		if v {
			return nil, true
		}
		return &fastNode{never: true}, true
	case map[string]any:
		n := newFastNode()
		for k, val := range v {
			if annotations[k] || root && draft == 4 && k == "id" {
				continue
			}
			if !n.keyword(k, val, draft) {
				return nil, false
			}
		}
		return n, true
	}
	return nil, false
}

// newFastNode returns a node that constrains nothing.
func newFastNode() *fastNode {
	return &fastNode{maxLen: -1, min: math.NaN(), max: math.NaN(), exclMin: math.NaN(), exclMax: math.NaN(), maxItems: -1, maxProps: -1}
}

func (n *fastNode) keyword(k string, val any, draft int) bool {
	switch k {
	case "type":
		switch t := val.(type) {
		case string:
			n.types = typeBits[t]
			return n.types != 0
		case []any:
			for _, e := range t {
				s, _ := e.(string)
				if typeBits[s] == 0 {
					return false
				}
				n.types |= typeBits[s]
			}
			return len(t) > 0
		}
		return false
	case "properties":
		m, ok := val.(map[string]any)
		if !ok {
			return false
		}
		if n.props == nil {
			n.props = map[string]fastProp{}
		}
		for name, sub := range m {
			sn, ok := compileFast(sub, draft, false)
			if !ok {
				return false
			}
			p := n.props[name]
			p.node, p.inProps = sn, true
			n.props[name] = p
		}
		return true
	case "required":
		list, ok := val.([]any)
		if !ok || len(list) > 64 {
			return false
		}
		if n.props == nil {
			n.props = map[string]fastProp{}
		}
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return false
			}
			p := n.props[s]
			if p.reqBit != 0 {
				continue
			}
			p.reqBit = 1 << n.requiredN
			n.requiredN++
			n.props[s] = p
		}
		return true
	case "additionalProperties":
		if b, ok := val.(bool); ok {
			n.addlFalse = !b
			return true
		}
		sn, ok := compileFast(val, draft, false)
		n.addl = sn
		return ok
	case "items":
		if _, isArray := val.([]any); isArray {
			return false // tuple form (drafts before 2020-12)
		}
		sn, ok := compileFast(val, draft, false)
		n.items = sn
		return ok
	case "minLength":
		return setCount(&n.minLen, val)
	case "maxLength":
		return setCount(&n.maxLen, val)
	case "minItems":
		return setCount(&n.minItems, val)
	case "maxItems":
		return setCount(&n.maxItems, val)
	case "minProperties":
		return setCount(&n.minProps, val)
	case "maxProperties":
		return setCount(&n.maxProps, val)
	case "pattern":
		s, ok := val.(string)
		if !ok {
			return false
		}
		// The library compiles patterns with Go's regexp by default too,
		// so both paths match alike.
		re, err := regexp.Compile(s)
		n.pattern = re
		return err == nil
	case "enum", "const":
		list := []any{val}
		if k == "enum" {
			l, ok := val.([]any)
			if !ok {
				return false
			}
			list = l
		}
		n.hasEnum = true
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return false
			}
			n.enum = append(n.enum, s)
		}
		return true
	case "minimum":
		return setBound(&n.min, val)
	case "maximum":
		return setBound(&n.max, val)
	case "exclusiveMinimum":
		// In draft 4 a boolean modifying minimum (and exclusiveMaximum
		// maximum).
		return draft != 4 && setBound(&n.exclMin, val)
	case "exclusiveMaximum":
		return draft != 4 && setBound(&n.exclMax, val)
	case "format":
		// An annotation from 2019-09 on; before, the library asserts it.
		return draft >= 2019
	}
	return false
}

// setCount sets *dst to v, a non-negative integer, and reports whether v
// is one.
func setCount(dst *int, v any) bool {
	f, ok := float(v)
	if !ok || f < 0 || f != math.Trunc(f) || f > 1<<31 {
		return false
	}
	*dst = int(f)
	return true
}

// setBound sets *dst to v, a finite number, and reports whether v is one.
func setBound(dst *float64, v any) bool {
	f, ok := float(v)
	if ok {
		*dst = f
	}
	return ok
}

func float(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// fast checks one value at d.pos against n, consuming it. It returns true
// only if the value is certainly valid.
func (d *decoder) fast(n *fastNode) bool {
	if n == nil {
		return d.value(false) == nil
	}
	if n.never || d.pos >= len(d.b) {
		return false
	}
	switch c := d.b[d.pos]; {
	case c == '{':
		return n.allows(tObject) && !n.hasEnum && d.fastObject(n)
	case c == '[':
		return n.allows(tArray) && !n.hasEnum && d.fastArray(n)
	case c == '"':
		if !n.allows(tString) {
			return false
		}
		s, err := d.str()
		return err == nil && n.fastString(s)
	case c == '-' || c >= '0' && c <= '9':
		start := d.pos
		if !n.allows(tNumber|tInteger) || d.number(false) != nil || n.hasEnum {
			return false
		}
		return n.fastNumber(d.b[start:d.pos])
	case c == 't' || c == 'f':
		return n.allows(tBoolean) && !n.hasEnum && d.value(false) == nil
	case c == 'n':
		return n.allows(tNull) && !n.hasEnum && d.value(false) == nil
	}
	return false
}

func (n *fastNode) allows(t uint8) bool { return n.types == 0 || n.types&t != 0 }

func (n *fastNode) fastString(s []byte) bool {
	if n.minLen > 0 || n.maxLen >= 0 {
		l := utf8.RuneCount(s)
		if l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.Match(s) {
		return false
	}
	if n.hasEnum {
		for _, e := range n.enum {
			if e == string(s) {
				return true
			}
		}
		return false
	}
	return true
}

func (n *fastNode) fastNumber(lit []byte) bool {
	if n.types != 0 && n.types&tNumber == 0 {
		// Only integers allowed: certain for a literal without fraction
		// or exponent; 1.0 is an integer too, but that is for the general
		// path to decide.
		for _, c := range lit {
			if c == '.' || c == 'e' || c == 'E' {
				return false
			}
		}
	}
	if math.IsNaN(n.min) && math.IsNaN(n.max) && math.IsNaN(n.exclMin) && math.IsNaN(n.exclMax) {
		return true
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(v, 0) {
		return false
	}
	// Each comparison must hold by a margin larger than float64 rounding;
	// near a bound the exact comparison is the general path's.
	return above(v, n.min) && below(v, n.max) && above(v, n.exclMin) && below(v, n.exclMax)
}

func margin(a, b float64) float64 {
	return 1e-9 * math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// above and below leave a value equal to (or within rounding of) a bound to
// the general path, which compares exactly; so inclusive and exclusive
// bounds are decided alike here.
func above(v, bound float64) bool {
	if math.IsNaN(bound) {
		return true
	}
	return v-bound > margin(v, bound)
}

func below(v, bound float64) bool {
	if math.IsNaN(bound) {
		return true
	}
	return bound-v > margin(v, bound)
}

func (d *decoder) fastArray(n *fastNode) bool {
	if d.enter() != nil {
		return false
	}
	d.pos++
	items := 0
	d.space()
	if d.pos < len(d.b) && d.b[d.pos] == ']' {
		d.pos++
		d.depth--
		return items >= n.minItems
	}
	for {
		d.space()
		if !d.fast(n.items) {
			return false
		}
		items++
		d.space()
		if d.pos >= len(d.b) {
			return false
		}
		switch d.b[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return items >= n.minItems && (n.maxItems < 0 || items <= n.maxItems)
		default:
			return false
		}
	}
}

func (d *decoder) fastObject(n *fastNode) bool {
	if d.enter() != nil {
		return false
	}
	d.pos++
	keysAt := len(d.keys)
	defer func() { d.keys = d.keys[:keysAt] }()
	var seen map[string]struct{}
	var required uint64
	props := 0
	d.space()
	if d.pos < len(d.b) && d.b[d.pos] == '}' {
		d.pos++
		d.depth--
		return n.requiredN == 0 && n.minProps == 0
	}
	for {
		d.space()
		if d.pos >= len(d.b) || d.b[d.pos] != '"' {
			return false
		}
		k, err := d.str()
		if err != nil {
			return false
		}
		if d.dupes && d.seenKey(k, keysAt, &seen) {
			return false
		}
		// k may alias the scratch buffer: look it up before the value
		// reuses it. Map lookups with string(k) do not allocate.
		p, known := n.props[string(k)]
		props++
		d.space()
		if d.pos >= len(d.b) || d.b[d.pos] != ':' {
			return false
		}
		d.pos++
		d.space()
		switch {
		case known && p.inProps:
			required |= p.reqBit
			if !d.fast(p.node) {
				return false
			}
		case n.addlFalse:
			return false
		default:
			required |= p.reqBit
			if !d.fast(n.addl) {
				return false
			}
		}
		d.space()
		if d.pos >= len(d.b) {
			return false
		}
		switch d.b[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			// Duplicate keys count once in the decoded object; with
			// duplicates allowed, leave the counts to the general path.
			if (n.minProps > 0 || n.maxProps >= 0) && !d.dupes {
				return false
			}
			return required == 1<<n.requiredN-1 && props >= n.minProps && (n.maxProps < 0 || props <= n.maxProps)
		default:
			return false
		}
	}
}
