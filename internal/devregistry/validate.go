package devregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// maxSubjectBytes bounds a subject name. Confluent's registry sets no
// documented bound; this one only keeps the state and its file sane.
const maxSubjectBytes = 4096

// maxReferenceDepth bounds how deep references of references are followed.
// References can only point at schemas registered earlier, so there are no
// cycles; the bound keeps a long chain from costing a deep recursion.
const maxReferenceDepth = 64

// validSubject reports whether a subject name can be registered: non-empty
// UTF-8 without control characters, as Confluent's registry requires.
func validSubject(s string) bool {
	if s == "" || len(s) > maxSubjectBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// normalizeType returns the canonical name of a schemaType field: AVRO when
// it is empty, and the upper-case name otherwise.
func normalizeType(t string) (string, error) {
	switch u := strings.ToUpper(t); u {
	case "":
		return typeAvro, nil
	case typeAvro, typeJSON, typeProtobuf:
		return u, nil
	default:
		return "", errInvalidSchema("unknown schema type %q; supported types are AVRO, JSON and PROTOBUF", t)
	}
}

// canonicalText returns the text under which a schema is stored and
// compared. Avro and JSON schemas are JSON documents: they are stored without
// insignificant whitespace, so registering the same schema formatted another
// way finds the same id (Confluent's registry also stores a compact form).
// Protobuf text is kept as given.
func canonicalText(typ, text string) (string, error) {
	if typ == typeProtobuf {
		return text, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return "", errInvalidSchema("%s schema is not valid JSON: %v", strings.ToLower(typ), err)
	}
	return b.String(), nil
}

// resolveRefs checks that every reference names a registered version and
// returns the references with "latest" (-1) replaced by the version it means
// now, so that a stored schema never changes meaning.
func (st *state) resolveRefs(refs []reference) ([]reference, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	out := make([]reference, len(refs))
	for i, r := range refs {
		if r.Name == "" || r.Subject == "" {
			return nil, errInvalidSchema("reference %d needs a name and a subject", i)
		}
		if r.Version == 0 || r.Version < -1 {
			return nil, errInvalidSchema("reference %q has version %d; give a version from 1 or -1 for the latest", r.Name, r.Version)
		}
		// A soft-deleted version can be referenced by number, as its id
		// still decodes data; "latest" means the latest live version.
		j, ok := findVersion(st.subjects[r.Subject], r.Version, r.Version != -1)
		if !ok {
			if r.Version == -1 {
				return nil, errInvalidSchema("reference %q: subject %q has no live version", r.Name, r.Subject)
			}
			return nil, errInvalidSchema("reference %q: version %d of subject %q is not registered", r.Name, r.Version, r.Subject)
		}
		r.Version = st.subjects[r.Subject][j].Version
		out[i] = r
	}
	return out, nil
}

// check validates a schema of the given type whose references are resolved.
func (st *state) check(typ, canonical string, refs []reference) error {
	switch typ {
	case typeAvro:
		_, err := st.parseAvro(canonical, refs)
		return err
	case typeJSON:
		return checkJSONSchema(canonical)
	case typeProtobuf:
		if err := checkProto(canonical); err != nil {
			return errInvalidSchema("%v", err)
		}
	}
	return nil
}

// parseAvro parses an Avro schema after the schemas it references, so that
// the named types they define resolve. It uses a fresh cache: hamba/avro's
// default cache is process-wide and would let one registration's names leak
// into the next.
func (st *state) parseAvro(text string, refs []reference) (s avro.Schema, err error) {
	defer func() {
		// hamba/avro is a third-party parser fed with network input; a
		// panic in it must answer this request, not end the connection.
		if p := recover(); p != nil {
			s, err = nil, errInvalidSchema("avro schema could not be parsed: %v", p)
		}
	}()
	cache := &avro.SchemaCache{}
	seen := map[reference]bool{}
	if err := st.parseAvroRefs(refs, cache, seen, 0); err != nil {
		return nil, err
	}
	s, err = avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, errInvalidSchema("%v", err)
	}
	return s, nil
}

func (st *state) parseAvroRefs(refs []reference, cache *avro.SchemaCache, seen map[reference]bool, depth int) error {
	if depth > maxReferenceDepth {
		return errInvalidSchema("references nest deeper than %d", maxReferenceDepth)
	}
	for _, r := range refs {
		key := reference{Subject: r.Subject, Version: r.Version}
		if seen[key] {
			continue
		}
		seen[key] = true
		j, ok := findVersion(st.subjects[r.Subject], r.Version, true)
		if !ok {
			return errInvalidSchema("reference %q: version %d of subject %q is not registered", r.Name, r.Version, r.Subject)
		}
		rec := st.schemas[st.subjects[r.Subject][j].ID]
		if rec.Type != typeAvro {
			return errInvalidSchema("reference %q: an Avro schema can only reference Avro schemas, and %s version %d is %s", r.Name, r.Subject, r.Version, rec.Type)
		}
		if err := st.parseAvroRefs(rec.References, cache, seen, depth+1); err != nil {
			return err
		}
		if _, err := avro.ParseWithCache(rec.Schema, "", cache); err != nil {
			return errInvalidSchema("reference %q: %v", r.Name, err)
		}
	}
	return nil
}

// checkJSONSchema checks that a JSON Schema is a JSON object or boolean, the
// two forms a schema can take. Keywords are not checked: this registry is a
// development tool, and the gateway's validation compiles the schema anyway.
func checkJSONSchema(text string) error {
	switch strings.TrimLeft(text, " \t\r\n")[:1] {
	case "{", "t", "f":
		return nil
	default:
		return errInvalidSchema("a JSON schema is an object or a boolean")
	}
}

// protoTopLevel are the keywords that can start a top-level statement of a
// .proto file.
var protoTopLevel = map[string]bool{
	"syntax": true, "edition": true, "package": true, "import": true, "option": true,
	"message": true, "enum": true, "service": true, "extend": true,
}

// checkProto is a light check of .proto text: comments and strings end,
// braces balance, every top-level statement starts with a keyword a .proto
// file allows there, and the file declares at least one message, enum,
// service or extension. It is not a compiler: it exists so that a mistake
// such as registering JSON as PROTOBUF is refused at once.
func checkProto(text string) error {
	lx := protoLexer{src: text}
	depth := 0
	atStart := true // the next token starts a top-level statement
	declares := false
	for {
		tok, err := lx.next()
		if err != nil {
			return err
		}
		if tok == "" {
			break
		}
		if depth == 0 && atStart && tok != ";" && tok != "}" {
			if !protoTopLevel[tok] {
				return fmt.Errorf("protobuf schema has %q where a top-level statement (syntax, package, import, option, message, enum, service, extend) should start", clip(tok))
			}
			switch tok {
			case "message", "enum", "service", "extend":
				declares = true
			}
		}
		switch tok {
		case "{":
			depth++
			atStart = false
			continue
		case "}":
			depth--
			if depth < 0 {
				return fmt.Errorf("protobuf schema has an unmatched } at byte %d", lx.pos-1)
			}
			atStart = depth == 0
			continue
		case ";":
			atStart = depth == 0
			continue
		}
		atStart = false
	}
	if depth != 0 {
		return fmt.Errorf("protobuf schema has %d unclosed {", depth)
	}
	if !declares {
		return fmt.Errorf("protobuf schema declares no message, enum, service or extension")
	}
	return nil
}

// protoLexer splits .proto text into tokens: identifiers (with dots),
// numbers, strings and single punctuation characters, skipping whitespace
// and comments.
type protoLexer struct {
	src string
	pos int
}

// next returns the next token, "" at the end of the text.
func (lx *protoLexer) next() (string, error) {
	for lx.pos < len(lx.src) {
		c := lx.src[lx.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.pos++
		case strings.HasPrefix(lx.src[lx.pos:], "//"):
			end := strings.IndexByte(lx.src[lx.pos:], '\n')
			if end < 0 {
				lx.pos = len(lx.src)
			} else {
				lx.pos += end + 1
			}
		case strings.HasPrefix(lx.src[lx.pos:], "/*"):
			end := strings.Index(lx.src[lx.pos+2:], "*/")
			if end < 0 {
				return "", fmt.Errorf("protobuf schema has an unterminated /* comment at byte %d", lx.pos)
			}
			lx.pos += 2 + end + 2
		case c == '"' || c == '\'':
			start := lx.pos
			lx.pos++
			for {
				if lx.pos >= len(lx.src) || lx.src[lx.pos] == '\n' {
					return "", fmt.Errorf("protobuf schema has an unterminated string at byte %d", start)
				}
				d := lx.src[lx.pos]
				lx.pos++
				if d == '\\' {
					lx.pos++ // the escaped character, whatever it is
					continue
				}
				if d == c {
					return lx.src[start:lx.pos], nil
				}
			}
		case isWordByte(c):
			start := lx.pos
			for lx.pos < len(lx.src) && isWordByte(lx.src[lx.pos]) {
				lx.pos++
			}
			return lx.src[start:lx.pos], nil
		default:
			lx.pos++
			return lx.src[lx.pos-1 : lx.pos], nil
		}
	}
	return "", nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// clip shortens text quoted in an error message.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
