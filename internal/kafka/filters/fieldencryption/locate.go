package fieldencryption

import (
	"context"
	"errors"
	"fmt"

	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// rulePart is a part (key or value) of a rule, compiled.
type rulePart struct {
	cfg     *Part
	ruleKEK string
	format  string
	// json is the plan of unprefixed JSON payloads (format json).
	json *plan
	// seal caches the plans of payloads with a schema, by schema id and
	// message; open caches the plans decryption builds from markers.
	seal, open planCache
}

// errFormat is a payload that is not in the part's format.
var errFormat = errors.New("payload is not in the configured format")

// locateForSeal finds the fields to encrypt in one part's payload, into
// found, and returns the part located. key is scratch for cache keys.
func (f *Filter) locateForSeal(ctx context.Context, rp *rulePart, payload []byte, found *fieldpath.Found, key *[]byte) (partState, error) {
	found.Reset()
	ps := partState{payload: payload, body: payload}
	if rp.format == formatJSON && (len(payload) == 0 || payload[0] != schema.MagicByte) {
		ps.plan = rp.json
	} else {
		if f.reg == nil {
			return ps, fmt.Errorf("%w: it carries a schema-id prefix, and no registry is configured to read it", errFormat)
		}
		rec, err := f.reg.Resolve(ctx, payload)
		if err != nil {
			return ps, err
		}
		if err := rp.allows(rec.Schema.Format); err != nil {
			return ps, fmt.Errorf("%w: schema id %d is %s: %w", errFormat, rec.ID, rec.Schema.Format, err)
		}
		*key = appendSchemaKey((*key)[:0], rec.ID, rec.Indexes)
		ps.plan = rp.seal.get(*key)
		if ps.plan == nil {
			ps.plan = buildPlan(rp.cfg, rp.ruleKEK, rec.Schema, rec.Indexes)
			rp.seal.put(*key, ps.plan)
		}
		ps.body, ps.schemaID = rec.Body, rec.ID
	}
	if ps.plan.err != nil {
		return ps, ps.plan.err
	}
	if err := ps.plan.loc.Locate(ps.body, found); err != nil {
		return ps, err
	}
	return ps, nil
}

// allows reports whether records of a schema of format fm are for this
// part.
func (rp *rulePart) allows(fm schema.Format) error {
	var want schema.Format
	switch rp.format {
	case formatAuto:
		return nil
	case formatJSON:
		want = schema.JSON
	case formatAvro:
		want = schema.Avro
	case formatProtobuf:
		want = schema.Protobuf
	}
	if want != fm {
		return fmt.Errorf("the rule says %s", rp.format)
	}
	return nil
}

// locateForOpen finds the encrypted values of one part, as its marker
// fields list them, into found.
func (f *Filter) locateForOpen(ctx context.Context, rp *rulePart, m *marker, first, n int, payload []byte, found *fieldpath.Found, key *[]byte) (partState, error) {
	found.Reset()
	mf := &m.fields[first]
	ps := partState{payload: payload, body: payload}
	*key = append((*key)[:0], mf.flags)
	var s *schema.Schema
	var indexes []int
	switch {
	case mf.format() == wireJSON && (len(payload) == 0 || payload[0] != schema.MagicByte):
		if mf.schemaID != 0 {
			return ps, fmt.Errorf("%w: the marker names schema id %d; the payload has no prefix", errBadMarker, mf.schemaID)
		}
	case mf.format() == wireJSON:
		// JSON is located without its schema: the prefix is skipped.
		id, rest, err := schema.ParsePrefix(payload)
		if err != nil {
			return ps, err
		}
		ps.body, ps.schemaID = rest, id
	default:
		if f.reg == nil {
			return ps, fmt.Errorf("%w: it carries a schema-id prefix, and no registry is configured to read it", errFormat)
		}
		rec, err := f.reg.Resolve(ctx, payload)
		if err != nil {
			return ps, err
		}
		want := schema.Avro
		if mf.format() == wireProtobuf {
			want = schema.Protobuf
		}
		if rec.Schema.Format != want {
			return ps, fmt.Errorf("%w: schema id %d is %s; the marker says otherwise", errBadMarker, rec.ID, rec.Schema.Format)
		}
		s, indexes = rec.Schema, rec.Indexes
		ps.body, ps.schemaID = rec.Body, rec.ID
	}
	*key = appendSchemaKey(*key, ps.schemaID, indexes)
	for i := first; i < first+n; i++ {
		fl := &m.fields[i]
		if fl.schemaID != ps.schemaID || fl.format() != mf.format() {
			return ps, fmt.Errorf("%w: the fields of one part disagree on the schema", errBadMarker)
		}
		*key = append(*key, byte(len(fl.path)))
		*key = append(*key, fl.path...)
	}
	ps.plan = rp.open.get(*key)
	if ps.plan == nil {
		ps.plan = buildOpenPlan(rp, m, first, n, s, indexes)
		rp.open.put(*key, ps.plan)
	}
	if ps.plan.err != nil {
		return ps, ps.plan.err
	}
	if err := ps.plan.loc.Locate(ps.body, found); err != nil {
		return ps, err
	}
	return ps, nil
}

// buildOpenPlan compiles the plan that finds the values a marker lists,
// with the redaction placeholders the part's config gives their paths.
func buildOpenPlan(rp *rulePart, m *marker, first, n int, s *schema.Schema, indexes []int) *plan {
	part := &Part{}
	for i := first; i < first+n; i++ {
		path := string(m.fields[i].path)
		fl := Field{Path: path, Optional: true}
		if _, err := fieldpath.Parse(path); err != nil {
			return &plan{err: fmt.Errorf("%w: field path: %w", errBadMarker, err)}
		}
		for _, prev := range part.Fields {
			if prev.Path == path {
				return &plan{err: fmt.Errorf("%w: field %q listed twice", errBadMarker, path)}
			}
		}
		if rp != nil {
			for _, c := range rp.cfg.Fields {
				if c.Path == path {
					fl.RedactWith = c.RedactWith
				}
			}
		}
		part.Fields = append(part.Fields, fl)
	}
	return buildPlan(part, "", s, indexes)
}
