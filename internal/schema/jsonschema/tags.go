package jsonschema

import (
	"slices"
	"strings"
)

// TagsKeyword is the keyword a JSON Schema tags a property with, as
// Confluent's data contracts write it: "confluent:tags": ["PII"].
const TagsKeyword = "confluent:tags"

// maxTagDepth bounds how deep Tagged looks into nested schemas.
const maxTagDepth = 32

// Tagged returns the paths ("ssn", "customer.ssn", "cards[*].number") of
// the properties whose TagsKeyword lists tag and whose type allows a
// string. It follows "properties" and "items" of the schema's own text;
// properties reached only through $ref are not seen.
func (s *Schema) Tagged(tag string) []string {
	var out []string
	tagged(s.doc, "", tag, 0, &out)
	return out
}

func tagged(node any, at, tag string, depth int, out *[]string) {
	m, ok := node.(map[string]any)
	if !ok || depth > maxTagDepth {
		return
	}
	if at != "" && hasTag(m, tag) && allowsString(m) {
		*out = append(*out, at)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names) // a stable order: map order is random
		for _, name := range names {
			if strings.ContainsAny(name, ".[]") {
				continue // a path cannot name it
			}
			p := name
			if at != "" {
				p = at + "." + name
			}
			tagged(props[name], p, tag, depth+1, out)
		}
	}
	if items, ok := m["items"]; ok && at != "" {
		tagged(items, at+"[*]", tag, depth+1, out)
	}
}

func hasTag(m map[string]any, tag string) bool {
	tags, _ := m[TagsKeyword].([]any)
	for _, t := range tags {
		if t == tag {
			return true
		}
	}
	return false
}

// allowsString reports whether a schema's "type" lets the value be a
// string (no "type" allows anything).
func allowsString(m map[string]any) bool {
	switch t := m["type"].(type) {
	case nil:
		return true
	case string:
		return t == "string"
	case []any:
		return slices.Contains(t, any("string"))
	}
	return false
}
