package mockllm

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// Tool-call arguments are generated from the tool's JSON schema so that a
// client validating them against it accepts them. Supported: type (one or a
// list; null is avoided when another is allowed), enum, const, properties
// (every required one, then the others while maxProperties allows, in the
// schema's order), items and prefixItems (minItems items, at least one
// unless maxItems is 0), minLength and maxLength, format (date-time, date,
// time, email, uri, uuid, ipv4, ipv6, hostname), minimum, maximum, their
// exclusive forms (draft 4 booleans too), multipleOf, anyOf and oneOf (the
// first branch that is not null), allOf (merged), and local $ref (#,
// #/$defs/..., #/definitions/...). Not supported: pattern, if/then/else,
// not, dependent schemas.

// maxSchemaDepth bounds recursion through nested or self-referencing
// schemas; past deepSchema nesting levels only what is required is
// generated, which is what makes recursive schemas finite.
const (
	deepSchema     = 8
	maxSchemaDepth = 64
)

// toolArguments returns JSON arguments that satisfy schema.
func toolArguments(schema json.RawMessage) string {
	g := gen{root: schema}
	if len(bytes.TrimSpace(schema)) == 0 {
		return "{}"
	}
	g.value(schema, 0, "", 0, true)
	return string(g.b)
}

type gen struct {
	root json.RawMessage
	b    []byte
}

// value appends a value satisfying schema raw. name is the property it is
// for ("" if none), variant distinguishes array items so that uniqueItems
// holds, root marks the top level (an object when the schema says nothing).
func (g *gen) value(raw json.RawMessage, depth int, name string, variant int, root bool) {
	if depth > maxSchemaDepth {
		g.b = append(g.b, "null"...)
		return
	}
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true", "{}":
		if root {
			g.b = append(g.b, "{}"...) // arguments are an object
		} else {
			g.b = jsonscan.AppendString(g.b, "sample")
		}
		return
	case "false":
		g.b = append(g.b, "null"...)
		return
	}
	var s map[string]json.RawMessage
	if json.Unmarshal(raw, &s) != nil {
		g.b = append(g.b, "null"...)
		return
	}
	if ref, ok := s["$ref"]; ok {
		if target, ok := g.resolve(ref); ok {
			g.value(target, depth+1, name, variant, root)
			return
		}
	}
	if c, ok := s["const"]; ok {
		g.b = append(g.b, compact(c)...)
		return
	}
	if e, ok := s["enum"]; ok {
		var vals []json.RawMessage
		if json.Unmarshal(e, &vals) == nil && len(vals) > 0 {
			g.b = append(g.b, compact(vals[min(variant, len(vals)-1)])...)
			return
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		var branches []json.RawMessage
		if json.Unmarshal(s[key], &branches) != nil || len(branches) == 0 {
			continue
		}
		pick := branches[0]
		for _, br := range branches {
			if !isNullSchema(br) {
				pick = br
				break
			}
		}
		g.value(pick, depth+1, name, variant, root)
		return
	}
	if all, ok := s["allOf"]; ok {
		s = g.mergeAllOf(s, all)
	}

	switch schemaType(s, root) {
	case "object":
		g.object(s, depth, depth >= deepSchema)
	case "array":
		g.array(s, depth, depth >= deepSchema)
	case "integer":
		g.b = strconv.AppendInt(g.b, int64(number(s, float64(1+variant), true)), 10)
	case "number":
		g.b = strconv.AppendFloat(g.b, number(s, float64(1+variant), false), 'f', -1, 64)
	case "boolean":
		g.b = append(g.b, "true"...)
	case "null":
		g.b = append(g.b, "null"...)
	default:
		g.b = jsonscan.AppendString(g.b, stringValue(s, name, variant))
	}
}

// schemaType picks the type to generate: the first non-null type listed,
// or one guessed from the keywords present.
func schemaType(s map[string]json.RawMessage, root bool) string {
	if t, ok := s["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			return one
		}
		var many []string
		if json.Unmarshal(t, &many) == nil && len(many) > 0 {
			for _, m := range many {
				if m != "null" {
					return m
				}
			}
			return "null"
		}
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := s[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case root || has("properties", "required", "additionalProperties", "minProperties", "maxProperties"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems"):
		return "array"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return "string"
}

func isNullSchema(raw json.RawMessage) bool {
	var s struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &s) == nil && s.Type == "null"
}

// resolve follows a local reference: "#", "#/$defs/name",
// "#/definitions/name" or any other JSON pointer into the root schema.
func (g *gen) resolve(ref json.RawMessage) (json.RawMessage, bool) {
	var p string
	if json.Unmarshal(ref, &p) != nil || !strings.HasPrefix(p, "#") {
		return nil, false
	}
	cur := g.root
	for tok := range strings.SplitSeq(strings.TrimPrefix(p[1:], "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var m map[string]json.RawMessage
		if json.Unmarshal(cur, &m) != nil {
			return nil, false
		}
		next, ok := m[tok]
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// mergeAllOf folds the branches of allOf into s: properties are merged,
// required lists joined, and other keywords taken from the first schema
// that has them.
func (g *gen) mergeAllOf(s map[string]json.RawMessage, all json.RawMessage) map[string]json.RawMessage {
	var branches []json.RawMessage
	if json.Unmarshal(all, &branches) != nil {
		return s
	}
	out := make(map[string]json.RawMessage, len(s))
	for k, v := range s {
		if k != "allOf" {
			out[k] = v
		}
	}
	var props []byte
	var required []string
	addProps := func(p json.RawMessage) {
		p = bytes.TrimSpace(p)
		if len(p) < 2 || p[0] != '{' {
			return
		}
		inner := bytes.TrimSpace(p[1 : len(p)-1])
		if len(inner) == 0 {
			return
		}
		if props == nil {
			props = []byte{'{'}
		} else {
			props = append(props, ',')
		}
		props = append(props, inner...)
	}
	addReq := func(r json.RawMessage) {
		var names []string
		if json.Unmarshal(r, &names) == nil {
			required = append(required, names...)
		}
	}
	addProps(s["properties"])
	addReq(s["required"])
	for _, br := range branches {
		var m map[string]json.RawMessage
		if json.Unmarshal(br, &m) != nil {
			continue
		}
		if ref, ok := m["$ref"]; ok {
			if target, ok := g.resolve(ref); ok && json.Unmarshal(target, &m) != nil {
				continue
			}
		}
		addProps(m["properties"])
		addReq(m["required"])
		for k, v := range m {
			if _, ok := out[k]; !ok && k != "properties" && k != "required" && k != "$ref" {
				out[k] = v
			}
		}
	}
	if props != nil {
		// Duplicate names keep their first schema: object() skips repeats.
		out["properties"] = append(props, '}')
	}
	if required != nil {
		out["required"], _ = json.Marshal(required)
	}
	return out
}

func (g *gen) object(s map[string]json.RawMessage, depth int, deep bool) {
	names, schemas := orderedProperties(s["properties"])
	var required []string
	_ = json.Unmarshal(s["required"], &required)
	limit := math.MaxInt
	if mp, ok := intKeyword(s, "maxProperties"); ok {
		limit = mp
	}
	isRequired := func(n string) bool {
		for _, r := range required {
			if r == n {
				return true
			}
		}
		return false
	}
	g.b = append(g.b, '{')
	written := map[string]bool{}
	emit := func(name string, schema json.RawMessage) {
		if written[name] {
			return
		}
		if len(written) > 0 {
			g.b = append(g.b, ',')
		}
		written[name] = true
		g.b = jsonscan.AppendString(g.b, name)
		g.b = append(g.b, ':')
		if schema == nil {
			g.b = jsonscan.AppendString(g.b, "sample")
			return
		}
		g.value(schema, depth+1, name, 0, false)
	}
	// Required properties first, in the order of properties, then any
	// required name that has no schema, then the optional ones.
	for i, n := range names {
		if isRequired(n) {
			emit(n, schemas[i])
		}
	}
	for _, r := range required {
		if !written[r] && !containsString(names, r) {
			emit(r, nil)
		}
	}
	if !deep {
		for i, n := range names {
			if len(written) >= limit {
				break
			}
			emit(n, schemas[i])
		}
	}
	g.b = append(g.b, '}')
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (g *gen) array(s map[string]json.RawMessage, depth int, deep bool) {
	n := 1
	if deep {
		n = 0
	}
	if mi, ok := intKeyword(s, "minItems"); ok {
		n = max(n, mi)
	}
	if ma, ok := intKeyword(s, "maxItems"); ok {
		n = min(n, ma)
	}
	var prefix []json.RawMessage
	_ = json.Unmarshal(s["prefixItems"], &prefix)
	items := s["items"]
	if len(bytes.TrimSpace(items)) > 0 && bytes.TrimSpace(items)[0] == '[' {
		// Draft 4 to 2019-09 tuples: items is the list.
		_ = json.Unmarshal(items, &prefix)
		items = s["additionalItems"]
	}
	g.b = append(g.b, '[')
	for i := range n {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		switch {
		case i < len(prefix):
			g.value(prefix[i], depth+1, "", i, false)
		case items != nil:
			g.value(items, depth+1, "", i, false)
		default:
			g.b = jsonscan.AppendString(g.b, "sample-"+strconv.Itoa(i+1))
		}
	}
	g.b = append(g.b, ']')
}

// orderedProperties returns the names and schemas of a properties object
// in the order written, so that arguments read like the schema.
func orderedProperties(raw json.RawMessage) (names []string, schemas []json.RawMessage) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return names, schemas
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return names, schemas
		}
		names = append(names, name)
		schemas = append(schemas, v)
	}
	return names, schemas
}

func intKeyword(s map[string]json.RawMessage, key string) (int, bool) {
	f, ok := floatKeyword(s, key)
	if !ok || f < 0 || f > 1<<20 {
		return 0, false
	}
	return int(f), true
}

func floatKeyword(s map[string]json.RawMessage, key string) (float64, bool) {
	raw, ok := s[key]
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	return f, true
}

// number returns want moved into the schema's bounds and onto its
// multipleOf, as an integer if integer is set.
func number(s map[string]json.RawMessage, want float64, integer bool) float64 {
	lo, hi := math.Inf(-1), math.Inf(1)
	loX, hiX := false, false
	if v, ok := floatKeyword(s, "minimum"); ok {
		lo = v
	}
	if v, ok := floatKeyword(s, "maximum"); ok {
		hi = v
	}
	if v, ok := floatKeyword(s, "exclusiveMinimum"); ok {
		lo, loX = v, true
	} else if string(bytes.TrimSpace(s["exclusiveMinimum"])) == "true" {
		loX = true // draft 4: minimum is exclusive
	}
	if v, ok := floatKeyword(s, "exclusiveMaximum"); ok {
		hi, hiX = v, true
	} else if string(bytes.TrimSpace(s["exclusiveMaximum"])) == "true" {
		hiX = true
	}
	step := 0.0
	if integer {
		step = 1
	}
	if m, ok := floatKeyword(s, "multipleOf"); ok && m > 0 {
		if integer && m != math.Trunc(m) {
			m = math.Ceil(m) // an integer multiple of a fractional step is rare; keep integer
		}
		step = m
	}
	fits := func(v float64) bool {
		return (v > lo || (!loX && v == lo)) && (v < hi || (!hiX && v == hi))
	}
	snap := func(v float64) float64 {
		if step > 0 {
			return math.Ceil(v/step) * step
		}
		return v
	}
	if v := snap(want); fits(v) {
		return v
	}
	// Out of range: the lowest allowed value, else the middle of the range.
	if !math.IsInf(lo, -1) {
		v := snap(lo)
		if v == lo && loX {
			if step > 0 {
				v += step
			} else if !math.IsInf(hi, 1) {
				v = (lo + hi) / 2
			} else {
				v = lo + 1
			}
		}
		if fits(v) {
			return v
		}
	}
	if !math.IsInf(hi, 1) {
		v := hi
		if step > 0 {
			v = math.Floor(hi/step) * step
		}
		if v == hi && hiX {
			if step > 0 {
				v -= step
			} else if !math.IsInf(lo, -1) {
				v = (lo + hi) / 2
			} else {
				v = hi - 1
			}
		}
		return v
	}
	return want
}

// stringValue returns a string satisfying format, minLength and maxLength.
func stringValue(s map[string]json.RawMessage, name string, variant int) string {
	var format string
	_ = json.Unmarshal(s["format"], &format)
	v := ""
	switch format {
	case "date-time":
		v = "2026-01-02T03:04:05Z"
	case "date":
		v = "2026-01-02"
	case "time":
		v = "03:04:05Z"
	case "email":
		v = "sample@example.com"
	case "uri", "url", "iri", "uri-reference":
		v = "https://example.com/sample"
	case "uuid":
		v = "00000000-0000-4000-8000-00000000000" + strconv.Itoa(variant%10)
	case "ipv4":
		v = "192.0.2." + strconv.Itoa(1+variant%250)
	case "ipv6":
		v = "2001:db8::" + strconv.Itoa(1+variant%9)
	case "hostname":
		v = "example.com"
	default:
		v = "sample"
		if name != "" {
			v = "sample " + name
		}
		if variant > 0 {
			v += " " + strconv.Itoa(variant+1)
		}
	}
	if minLen, ok := intKeyword(s, "minLength"); ok {
		for utf8.RuneCountInString(v) < minLen {
			v += "x"
		}
	}
	if maxLen, ok := intKeyword(s, "maxLength"); ok && utf8.RuneCountInString(v) > maxLen {
		r := []rune(v)
		v = string(r[:maxLen])
	}
	return v
}

// compact returns JSON raw without insignificant whitespace.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
