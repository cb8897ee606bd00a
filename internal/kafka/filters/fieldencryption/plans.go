package fieldencryption

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// locator finds the targeted fields of one part's body: a JSON plan, or an
// Avro or Protobuf plan compiled against one schema.
type locator interface {
	Targets() []fieldpath.Target
	Locate(body []byte, f *fieldpath.Found) error
}

// plan is how to find, and what to do with, the fields of one part of the
// records of one schema (or of plain JSON).
type plan struct {
	loc    locator
	format byte // wireJSON, wireAvro, wireProtobuf
	fields []planField
	err    error // the schema does not fit the config: every record is refused with it
}

// planField is what the config says of one target of a plan.
type planField struct {
	path          string
	pathBytes     []byte // path, for the marker
	kek           string // a KEK template
	deterministic bool
	// redact is the placeholder principals under others: redact get,
	// ready to splice (for JSON, escaped as a string's content).
	redact []byte
}

// errSchemaMismatch is a schema that does not hold what the config says
// to encrypt: a path it lacks, a field that cannot hold ciphertext.
var errSchemaMismatch = errors.New("the schema does not fit the field-encryption config")

// buildPlan compiles the plan of part for records of s (nil for plain
// JSON). Fields tagged in the schema with one of the part's tags join the
// configured ones, under the rule's KEK, in random mode.
func buildPlan(part *Part, ruleKEK string, s *schema.Schema, indexes []int) *plan {
	p := &plan{}
	var fields []planField
	var targets []fieldpath.Target
	add := func(f Field) {
		if slices.ContainsFunc(fields, func(x planField) bool { return x.path == f.Path }) {
			return
		}
		kek := f.KEK
		if kek == "" {
			kek = ruleKEK
		}
		fields = append(fields, planField{path: f.Path, pathBytes: []byte(f.Path), kek: kek, deterministic: f.Mode == modeDeterministic, redact: []byte(f.RedactWith)})
		targets = append(targets, fieldpath.Target{Path: fieldpath.MustParse(f.Path), Optional: f.Optional})
	}
	for _, f := range part.Fields {
		add(f)
	}
	fail := func(err error) *plan {
		p.err = fmt.Errorf("%w: %w", errSchemaMismatch, err)
		return p
	}
	var tagged func(tag string) []string
	switch {
	case s == nil:
		p.format = wireJSON
	case s.Format == schema.Avro:
		p.format = wireAvro
		tagged = s.Avro().Tagged
	case s.Format == schema.Protobuf:
		p.format = wireProtobuf
		m, err := s.Message(indexes)
		if err != nil {
			return fail(err)
		}
		tagged = m.Tagged
	case s.Format == schema.JSON:
		p.format = wireJSON
		if j := s.JSON(); j != nil {
			tagged = j.Tagged
		}
	}
	if tagged != nil {
		for _, tag := range part.Tags {
			for _, path := range tagged(tag) {
				add(Field{Path: path})
			}
		}
	}
	if len(targets) == 0 {
		return fail(fmt.Errorf("no field to encrypt: the schema tags none with %q and the config names none", part.Tags))
	}
	var err error
	switch p.format {
	case wireJSON:
		p.loc, err = fieldpath.CompileJSON(targets)
	case wireAvro:
		p.loc, err = s.Avro().Plan(targets)
	case wireProtobuf:
		m, _ := s.Message(indexes)
		p.loc, err = m.Plan(targets)
	}
	if err != nil {
		return fail(err)
	}
	if p.format == wireJSON {
		for i := range fields {
			fields[i].redact = jsonContent(fields[i].redact)
		}
	}
	p.fields = fields
	return p
}

// jsonContent escapes s as the content of a JSON string.
func jsonContent(s []byte) []byte {
	b, _ := json.Marshal(string(s))
	return b[1 : len(b)-1]
}

// planCache holds the plans of one part of one rule by schema id and
// Protobuf message, and the plans that decryption builds from markers.
// Bounded: when full, it starts over.
type planCache struct {
	mu sync.RWMutex
	m  map[string]*plan
}

const maxPlans = 4096

func (c *planCache) get(key []byte) *plan {
	c.mu.RLock()
	p := c.m[string(key)]
	c.mu.RUnlock()
	return p
}

func (c *planCache) put(key []byte, p *plan) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxPlans {
		c.m = map[string]*plan{}
	}
	c.m[string(key)] = p
	c.mu.Unlock()
}

// appendSchemaKey appends the cache key of a schema id and message path.
func appendSchemaKey(dst []byte, id int, indexes []int) []byte {
	dst = binary.AppendUvarint(dst, uint64(uint32(id)))
	dst = binary.AppendUvarint(dst, uint64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendUvarint(dst, uint64(i))
	}
	return dst
}
