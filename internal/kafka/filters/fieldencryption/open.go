package fieldencryption

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms/datakey"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// errAuth is an encrypted value that does not verify.
var errAuth = errors.New("encrypted field does not verify: the record was altered, copied from another topic, field or record, or sealed under another key")

// opener restores the fields of the records of one partition of a Fetch
// response: decrypted, or redacted, as the principal's outcome says.
type opener struct {
	f      *Filter
	ctx    context.Context
	topic  string
	rule   *compiledRule
	redact bool
	s      *scratch
}

// record appends r, its fields restored, to dst. A record without a marker
// is appended as it came.
func (j *opener) record(dst []byte, r *recordbatch.Record, raw []byte) ([]byte, bool, error) {
	if r.HeaderCount == 0 {
		return append(dst, raw...), false, nil
	}
	h, others, err := recordbatch.NextHeader(r.Headers)
	if err != nil {
		return dst, false, err
	}
	if string(h.Key) != markerKey {
		return append(dst, raw...), false, nil
	}
	s := j.s
	m := &s.m
	if err := m.parse(h.Value); err != nil {
		return dst, false, err
	}
	// The key's fields come first in the marker, then the value's.
	nKey := 0
	for nKey < len(m.fields) && m.fields[nKey].isKey() {
		nKey++
	}
	for _, fl := range m.fields[nKey:] {
		if fl.isKey() {
			return dst, false, fmt.Errorf("%w: key fields after value fields", errBadMarker)
		}
	}
	if !j.redact {
		if err := j.keys(m); err != nil {
			return dst, false, err
		}
	}
	key, value := outField{raw: r.KeyField}, outField{raw: valueFieldOf(r)}
	// The value first: its additional data holds the key as stored.
	if n := len(m.fields) - nKey; n > 0 {
		if r.ValueNull {
			return dst, false, fmt.Errorf("%w: fields of a null value", errBadMarker)
		}
		s.aad = appendAAD(s.aad[:0], m.raw, j.topic, m.bound(), key)
		if s.value, err = j.part(s.value[:0], partValue, nKey, n, r.Value); err != nil {
			return dst, false, partError(partValue, err)
		}
		value = outField{contents: s.value, isNew: true}
	}
	if nKey > 0 {
		if r.KeyNull {
			return dst, false, fmt.Errorf("%w: fields of a null key", errBadMarker)
		}
		s.aad = appendAAD(s.aad[:0], m.raw, j.topic, m.bound(), outField{})
		if s.key, err = j.part(s.key[:0], partKey, 0, nKey, r.Key); err != nil {
			return dst, false, partError(partKey, err)
		}
		key = outField{contents: s.key, isNew: true}
	}
	headers := r.HeaderCount - 1
	body := len(r.Prefix) + key.size() + value.size() + varintLen(int64(headers)) + len(others)
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.Prefix...)
	dst = key.appendTo(dst)
	dst = value.appendTo(dst)
	dst = binary.AppendVarint(dst, int64(headers))
	dst = append(dst, others...)
	return dst, true, nil
}

// keys finds the AEAD of every DEK the marker names.
func (j *opener) keys(m *marker) error {
	s := j.s
	s.aeads = s.aeads[:0]
	for i := range m.keks {
		k := &m.keks[i]
		if len(k.wrapped) == 0 {
			s.aeads = append(s.aeads, nil)
			continue
		}
		s.cacheKey = datakey.AppendOpenerKey(s.cacheKey[:0], k.name, k.wrapped)
		// Records of a batch nearly always share their DEK: the last
		// one found skips the shared cache and its lock.
		if s.lastAEAD != nil && bytes.Equal(s.cacheKey, s.lastDEK) {
			s.aeads = append(s.aeads, s.lastAEAD)
			continue
		}
		a, err := j.f.opens.Get(j.ctx, s.cacheKey, k.name, k.wrapped)
		if err != nil {
			return err
		}
		s.lastDEK, s.lastAEAD = append(s.lastDEK[:0], s.cacheKey...), a
		s.aeads = append(s.aeads, a)
	}
	return nil
}

// part appends a part's payload to dst with the values of its n marker
// fields, from first, restored.
func (j *opener) part(dst []byte, pi, first, n int, payload []byte) ([]byte, error) {
	s := j.s
	m := &s.m
	found := &s.found[pi]
	ps, err := j.f.locateForOpen(j.ctx, j.rule.open[pi], m, first, n, payload, found, &s.cacheKey)
	if err != nil {
		return dst, err
	}
	s.counts = growInts(s.counts, n)
	clear(s.counts)
	for _, sp := range found.Spans {
		s.counts[sp.Target]++
	}
	for t := range n {
		if s.counts[t] != m.fields[first+t].count {
			return dst, fmt.Errorf("%w: field %q has %d encrypted values, the marker says %d", errAuth, m.fields[first+t].path, s.counts[t], m.fields[first+t].count)
		}
	}
	// Each field's first IV counter: values take counters under their
	// KEK field by field, in marker order.
	s.base = s.base[:0]
	for fi := range m.fields {
		s.base = append(s.base, 0)
		if m.fields[fi].deterministic() {
			continue
		}
		for prev := range fi {
			if pf := &m.fields[prev]; pf.kek == m.fields[fi].kek && !pf.deterministic() {
				s.base[fi] += uint64(pf.count)
			}
		}
	}
	s.occ = growInts(s.occ, n)
	clear(s.occ)
	dst = append(dst, payload[:len(payload)-len(ps.body)]...)
	return fieldpath.Splice(dst, ps.body, found, func(dst []byte, sp *fieldpath.Span, val []byte) ([]byte, error) {
		if j.redact {
			return append(dst, ps.plan.fields[sp.Target].redact...), nil
		}
		fi := first + sp.Target
		fl := &m.fields[fi]
		occ := s.occ[sp.Target]
		s.occ[sp.Target]++
		sealed := val
		if !sp.Bytes {
			var err error
			// Only the text sealing wrote opens: the decoder skips
			// line breaks, which the length check catches.
			if s.sealed, err = b64.AppendDecode(s.sealed[:0], val); err != nil || b64.EncodedLen(len(s.sealed)) != len(val) {
				return dst, fmt.Errorf("%w: field %q is not an envelope", errAuth, fl.path)
			}
			sealed = s.sealed
		}
		if fl.deterministic() {
			version, rest, err := datakey.ReadVersion(sealed)
			if err != nil {
				return dst, fmt.Errorf("%w: field %q: %w", errAuth, fl.path, err)
			}
			kc, err := j.f.det.Version(j.ctx, m.keks[fl.kek].name, version)
			if err != nil {
				return dst, err
			}
			s.ad = appendDetAD(s.ad[:0], j.topic, m.bound(), fl)
			out, err := kc.Open(dst, rest, s.ad)
			if err != nil {
				return dst, fmt.Errorf("%w (field %q)", errAuth, fl.path)
			}
			return out, nil
		}
		if len(sealed) < datakey.TagLen {
			return dst, fmt.Errorf("%w: field %q is shorter than a tag", errAuth, fl.path)
		}
		s.nonce = datakey.Nonce(m.keks[fl.kek].first + s.base[fi] + uint64(occ))
		s.aad = appendFieldAAD(s.aad, fi)
		out, err := s.aeads[fl.kek].Open(dst, s.nonce[:], sealed, s.aad)
		s.aad = s.aad[:len(s.aad)-fieldAADLen]
		if err != nil {
			return dst, fmt.Errorf("%w (field %q)", errAuth, fl.path)
		}
		return out, nil
	})
}
