// Package jsonschema checks JSON syntax (optionally refusing duplicate
// object keys) and compiles JSON Schemas, drafts 4 to 2020-12, whose $ref
// may point at other registered schemas, to validate records against them.
// Compiled schemas never load anything from the network or the disk: a
// $ref resolves to the schema itself, a referenced schema, or a draft's
// meta-schema.
//
// It is a codec of the schema layer (internal/schema) and imports nothing
// of ours.
package jsonschema

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Reference is a schema the schema being compiled refers to with $ref.
type Reference struct {
	// Name is the reference's name: the URL a $ref uses for it, absolute
	// or relative to the referring schema's $id.
	Name string
	// Text is the referenced schema's JSON text.
	Text string
}

// Schema is a compiled JSON Schema.
type Schema struct {
	compiled *santhosh.Schema
	title    string
	// fast is the schema's fast-path form, nil if it uses keywords the
	// fast path does not support.
	fast *fastNode
	// doc is the schema's decoded text, for Tagged.
	doc any
}

// mainURL is where the schema being compiled is placed when it has no
// absolute $id; relative reference names resolve against it. The
// .invalid top-level domain (RFC 2606) can never be fetched.
const mainURL = "https://schemas.strait.invalid/schema.json"

// Compile compiles text with refs as the schemas its $refs may name. A
// schema without $schema is read as draft 7, which Confluent's serializers
// write by default.
func Compile(text string, refs []Reference) (*Schema, error) {
	doc, err := Decode([]byte(text), SyntaxOptions{})
	if err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	c := santhosh.NewCompiler()
	c.DefaultDraft(santhosh.Draft7)
	c.UseLoader(refuseLoader{})
	bases := []string{mainURL}
	loc := mainURL
	if id := schemaID(doc); id != "" {
		if u, err := url.Parse(id); err == nil && u.IsAbs() {
			u.Fragment = ""
			loc = u.String()
			bases = append(bases, loc)
		}
	}
	added := map[string]bool{}
	add := func(u string, d any) error {
		if added[u] {
			return nil
		}
		added[u] = true
		return c.AddResource(u, d)
	}
	if err := add(loc, doc); err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	for _, r := range refs {
		rdoc, err := Decode([]byte(r.Text), SyntaxOptions{})
		if err != nil {
			return nil, fmt.Errorf("json schema reference %q: %w", r.Name, err)
		}
		ref, err := url.Parse(r.Name)
		if err != nil {
			return nil, fmt.Errorf("json schema reference %q: name is not a URL: %w", r.Name, err)
		}
		for _, base := range bases {
			bu, _ := url.Parse(base)
			if err := add(bu.ResolveReference(ref).String(), rdoc); err != nil {
				return nil, fmt.Errorf("json schema reference %q: %w", r.Name, err)
			}
		}
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	s := &Schema{compiled: compiled, doc: doc}
	if m, ok := doc.(map[string]any); ok {
		s.title, _ = m["title"].(string)
	}
	if draft := draftOf(doc); draft != 0 {
		if fast, ok := compileFast(doc, draft, true); ok {
			s.fast = fast
			if fast == nil {
				s.fast = newFastNode()
			}
		}
	}
	return s, nil
}

func schemaID(doc any) string {
	m, ok := doc.(map[string]any)
	if !ok {
		return ""
	}
	if id, ok := m["$id"].(string); ok {
		return id
	}
	id, _ := m["id"].(string) // draft 4
	return id
}

// draftOf returns the draft a schema declares with $schema (4, 6, 7, 2019
// or 2020), 7 if it declares none, or 0 for a meta-schema the fast path
// does not know.
func draftOf(doc any) int {
	m, ok := doc.(map[string]any)
	if !ok {
		return 7
	}
	uri, ok := m["$schema"].(string)
	if !ok {
		return 7
	}
	switch strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(uri, "http://"), "https://"), "#") {
	case "json-schema.org/draft-04/schema":
		return 4
	case "json-schema.org/draft-06/schema":
		return 6
	case "json-schema.org/draft-07/schema":
		return 7
	case "json-schema.org/draft/2019-09/schema":
		return 2019
	case "json-schema.org/draft/2020-12/schema":
		return 2020
	}
	return 0
}

// refuseLoader keeps the compiler from opening files or URLs that a
// schema names: a schema from a registry must not make the gateway read
// its disk or call out.
type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is neither this schema nor one of its references", u)
}

// Compiled returns the compiled schema, for code that walks or validates
// decoded values itself.
func (s *Schema) Compiled() *santhosh.Schema { return s.compiled }

// Title returns the schema's top-level title, which Confluent's record-name
// strategies use as the record's name, or "".
func (s *Schema) Title() string { return s.title }

// Validate checks that b is JSON, as opts require, and that its value
// matches the schema.
func (s *Schema) Validate(b []byte, opts SyntaxOptions) error {
	if s.fast != nil {
		d := decoder{b: b, dupes: opts.RejectDuplicateKeys}
		d.space()
		if d.fast(s.fast) {
			if d.space(); d.pos == len(b) {
				return nil
			}
		}
	}
	v, err := Decode(b, opts)
	if err != nil {
		return err
	}
	return s.ValidateValue(v)
}

// ValidateValue checks a value decoded as Decode returns it.
func (s *Schema) ValidateValue(v any) error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var verr *santhosh.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	leaf := verr
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	return &Error{Field: fieldPath(leaf.InstanceLocation), Reason: reason(leaf.ErrorKind)}
}

// Error is a record that does not match its schema. The message names the
// field and the keyword that failed, never a string's value.
type Error struct {
	// Field is the path to the faulty value: keys joined with dots, [i]
	// for array items. Empty for the record itself.
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

func fieldPath(loc []string) string {
	var sb strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			sb.WriteString("[" + tok + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(tok)
	}
	return sb.String()
}

var printer = message.NewPrinter(language.English)

// reason describes a failed keyword. The library's own wording is used
// except where it quotes the value (pattern, format), which may be the
// very data a policy keeps out of logs.
func reason(k santhosh.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return "does not match pattern " + strconv.Quote(k.Want)
	case *kind.Format:
		return "is not a valid " + k.Want
	}
	return k.LocalizedString(printer)
}
