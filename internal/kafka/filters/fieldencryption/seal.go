package fieldencryption

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms/datakey"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// b64 writes a string field's envelope: URL-safe, unpadded, so that the
// text needs no escaping in JSON and stays short. Strict, so that the
// bits of the last character that are not part of the envelope must be
// zero: with them free, up to 16 texts would open to one value.
var b64 = base64.RawURLEncoding.Strict()

// Parts of a record, as indexes of per-part arrays.
const (
	partKey   = 0
	partValue = 1
)

// partState is one part of one record, located.
type partState struct {
	plan     *plan
	payload  []byte
	body     []byte // payload after its wire prefix: what the plan reads
	schemaID int
}

// sealer encrypts the fields of the records of one partition of a Produce
// request.
type sealer struct {
	f     *Filter
	ctx   context.Context
	topic string
	pol   *topicPolicy
	s     *scratch
}

// record appends r, its fields encrypted, to dst; raw is r as it came. A
// record with no field to encrypt (null parts, no value at any path) is
// appended as it came, with no marker.
func (j *sealer) record(dst []byte, r *recordbatch.Record, raw []byte) ([]byte, bool, error) {
	if err := noMarker(r); err != nil {
		return dst, false, err
	}
	s := j.s
	var parts [2]partState
	any := false
	for pi, rp := range j.pol.rule.parts {
		// A part not located (null, or not configured) must not keep
		// the spans of the record before.
		s.found[pi].Reset()
		if rp == nil {
			continue
		}
		payload, null := r.Value, r.ValueNull
		if pi == partKey {
			payload, null = r.Key, r.KeyNull
		}
		if null {
			continue
		}
		ps, err := j.f.locateForSeal(j.ctx, rp, payload, &s.found[pi], &s.cacheKey)
		if err != nil {
			return dst, false, partError(pi, err)
		}
		parts[pi] = ps
		any = any || len(s.found[pi].Spans) > 0
	}
	if !any {
		return append(dst, raw...), false, nil
	}
	if err := j.plan(&parts); err != nil {
		return dst, false, err
	}
	s.marker = appendMarker(s.marker[:0], j.f.markerFlags, s.keks, s.fields)

	key := outField{raw: r.KeyField}
	if len(s.found[partKey].Spans) > 0 {
		s.aad = appendAAD(s.aad[:0], s.marker, j.topic, j.f.bind, outField{})
		var err error
		if s.key, err = j.splice(s.key[:0], &parts[partKey], partKey); err != nil {
			return dst, false, partError(partKey, err)
		}
		key = outField{contents: s.key, isNew: true}
	}
	value := outField{raw: valueFieldOf(r)}
	if len(s.found[partValue].Spans) > 0 {
		s.aad = appendAAD(s.aad[:0], s.marker, j.topic, j.f.bind, key)
		var err error
		if s.value, err = j.splice(s.value[:0], &parts[partValue], partValue); err != nil {
			return dst, false, partError(partValue, err)
		}
		value = outField{contents: s.value, isNew: true}
	}
	markerHeader := bytesFieldLen(len(markerKey)) + bytesFieldLen(len(s.marker))
	headers := r.HeaderCount + 1
	body := len(r.Prefix) + key.size() + value.size() + varintLen(int64(headers)) + markerHeader + len(r.Headers)
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.Prefix...)
	dst = key.appendTo(dst)
	dst = value.appendTo(dst)
	dst = binary.AppendVarint(dst, int64(headers))
	dst = binary.AppendVarint(dst, int64(len(markerKey)))
	dst = append(dst, markerKey...)
	dst = binary.AppendVarint(dst, int64(len(s.marker)))
	dst = append(dst, s.marker...)
	dst = append(dst, r.Headers...)
	return dst, true, nil
}

// plan lists, in s.keks and s.fields, the KEKs and fields of the record's
// marker: every target with at least one value, key part first. It
// reserves the IV counters of the random-mode values under each KEK, and
// sets each field's first counter (s.base) and its marker index per
// target (s.fieldOf).
func (j *sealer) plan(parts *[2]partState) error {
	s := j.s
	s.keks, s.fields, s.deks = s.keks[:0], s.fields[:0], s.deks[:0]
	s.base = s.base[:0]
	for pi := range parts {
		ps := &parts[pi]
		s.fieldOf[pi] = s.fieldOf[pi][:0]
		if ps.plan == nil {
			continue
		}
		n := len(ps.plan.fields)
		s.counts = growInts(s.counts, n)
		clear(s.counts)
		for _, sp := range s.found[pi].Spans {
			s.counts[sp.Target]++
		}
		for t := range n {
			s.fieldOf[pi] = append(s.fieldOf[pi], -1)
			if s.counts[t] == 0 {
				continue
			}
			pf := &ps.plan.fields[t]
			kek, err := j.pol.kek(pf.kek)
			if err != nil {
				return err
			}
			ki := -1
			for i := range s.keks {
				if s.keks[i].kek == kek.name {
					ki = i
					break
				}
			}
			if ki < 0 {
				ki = len(s.keks)
				s.keks = append(s.keks, markerKEK{kek: kek.name, name: kek.bytes})
				s.deks = append(s.deks, nil)
			}
			flags := ps.plan.format << fieldFormatShift
			if pi == partKey {
				flags |= fieldKey
			}
			if pf.deterministic {
				flags |= fieldDeterministic
			}
			s.fieldOf[pi][t] = len(s.fields)
			s.fields = append(s.fields, markerField{flags: flags, kek: ki, schemaID: ps.schemaID, count: s.counts[t], path: pf.pathBytes})
			s.base = append(s.base, 0)
		}
	}
	// Random-mode values take consecutive IV counters under their KEK's
	// DEK, field by field in marker order.
	for ki := range s.keks {
		n := uint64(0)
		for fi := range s.fields {
			if f := &s.fields[fi]; f.kek == ki && !f.deterministic() {
				s.base[fi] = n
				n += uint64(f.count)
			}
		}
		if n == 0 {
			continue
		}
		d, first, err := j.reserve(s.keks[ki].kek, n)
		if err != nil {
			return err
		}
		s.deks[ki] = d
		s.keks[ki].wrapped, s.keks[ki].first = d.Wrapped(), first
	}
	return nil
}

// reserve takes n IV counters in a row under kek: from those held for
// this batch, or from the ring, which then hands out enough for the
// batch's remaining records if they need as many (at most maxHeld).
func (j *sealer) reserve(kek string, n uint64) (*datakey.DEK, uint64, error) {
	if n > j.f.maxValues {
		return nil, 0, fmt.Errorf("%w: %d values under KEK %q, and dek.max_records lets one data key seal %d", errTooManyValues, n, kek, j.f.maxValues)
	}
	s := j.s
	hi := -1
	for i := range s.held {
		if s.held[i].kek == kek {
			hi = i
			break
		}
	}
	if hi >= 0 && uint64(s.held[hi].left) >= n {
		h := &s.held[hi]
		first := h.next
		h.next += n
		h.left -= int(n)
		return h.d, first, nil
	}
	want := n * uint64(max(1, min(s.left, maxHeld)))
	d, first, got, err := j.f.ring.Reserve(j.ctx, kek, int(want))
	if err != nil {
		return nil, 0, err
	}
	if uint64(got) < n {
		// The DEK ran out part way: its last counters go unused and
		// a new DEK serves the record.
		return j.f.reserve(j.ctx, kek, n)
	}
	h := heldIVs{kek: kek, d: d, next: first + n, left: got - int(n)}
	if hi >= 0 {
		s.held[hi] = h
	} else {
		s.held = append(s.held, h)
	}
	return d, first, nil
}

// errTooManyValues is a record with more values under one KEK than one
// DEK may seal: no retry would fit them.
var errTooManyValues = errors.New("the record holds more values to encrypt than one data key may seal")

// maxHeld bounds the records whose IV counters are reserved ahead.
const maxHeld = 256

// splice appends the part's payload, its located values encrypted, to dst.
func (j *sealer) splice(dst []byte, ps *partState, pi int) ([]byte, error) {
	s := j.s
	s.occ = growInts(s.occ, len(ps.plan.fields))
	clear(s.occ)
	dst = append(dst, ps.payload[:len(ps.payload)-len(ps.body)]...)
	return fieldpath.Splice(dst, ps.body, &s.found[pi], func(dst []byte, sp *fieldpath.Span, val []byte) ([]byte, error) {
		fi := s.fieldOf[pi][sp.Target]
		f := &s.fields[fi]
		occ := s.occ[sp.Target]
		s.occ[sp.Target]++
		var sealed []byte
		if f.deterministic() {
			kc, err := j.f.det.Newest(j.ctx, s.keks[f.kek].kek)
			if err != nil {
				return dst, err
			}
			s.ad = appendDetAD(s.ad[:0], j.topic, j.f.bind, f)
			sealed = kc.Seal(s.sealed[:0], s.ad, val)
		} else {
			d := s.deks[f.kek]
			s.nonce = datakey.Nonce(s.keks[f.kek].first + s.base[fi] + uint64(occ))
			s.aad = appendFieldAAD(s.aad, fi)
			sealed = d.AEAD().Seal(s.sealed[:0], s.nonce[:], val, s.aad)
			s.aad = s.aad[:len(s.aad)-fieldAADLen]
		}
		s.sealed = sealed[:0]
		if sp.Bytes {
			return append(dst, sealed...), nil
		}
		return b64.AppendEncode(dst, sealed), nil
	})
}

// fieldAADLen is what appendFieldAAD adds to a record's additional data.
const fieldAADLen = 1

// appendFieldAAD appends the marker index of the field a value belongs to:
// a value moved to another field of the record does not decrypt.
func appendFieldAAD(dst []byte, field int) []byte { return append(dst, byte(field)) }

// outField is a record's key or value on its way out: as it came (raw,
// its length varint included), or new contents. Written straight into the
// output, new contents are copied once.
type outField struct {
	raw      []byte
	contents []byte
	isNew    bool
}

func (o outField) size() int {
	if o.isNew {
		return bytesFieldLen(len(o.contents))
	}
	return len(o.raw)
}

func (o outField) appendTo(dst []byte) []byte {
	if !o.isNew {
		return append(dst, o.raw...)
	}
	dst = binary.AppendVarint(dst, int64(len(o.contents)))
	return append(dst, o.contents...)
}

// appendAAD appends the additional data every random-mode value of a
// record shares: the whole marker, the topic when bound, and for the
// value's fields the record key as stored (its length varint and bytes;
// none for the key's own fields).
func appendAAD(dst, marker []byte, topic string, bind bool, key outField) []byte {
	dst = append(dst, marker...)
	if bind {
		dst = binary.AppendUvarint(dst, uint64(len(topic)))
		dst = append(dst, topic...)
	}
	return key.appendTo(dst)
}

// appendDetAD appends the additional data of a deterministic value: the
// topic when bound, the part and the path. Nothing of the record is in it,
// or equal values in two records would not give equal ciphertexts.
func appendDetAD(dst []byte, topic string, bind bool, fl *markerField) []byte {
	if bind {
		dst = binary.AppendUvarint(dst, uint64(len(topic)))
		dst = append(dst, topic...)
	} else {
		dst = append(dst, 0)
	}
	dst = append(dst, fl.flags&fieldKey)
	return append(dst, fl.path...)
}

// errForgedMarker is a produced record that carries the filter's marker
// header. Only the gateway writes it: a record passed on with a marker of
// the producer's making (and no field to encrypt) would fail every fetch
// of its partition, for every consumer.
var errForgedMarker = errors.New("record carries the header " + markerKey + ", which only the gateway may write")

// noMarker refuses a produced record with a marker header.
func noMarker(r *recordbatch.Record) error {
	hs := r.Headers
	for range r.HeaderCount {
		h, rest, err := recordbatch.NextHeader(hs)
		if err != nil {
			return err
		}
		if string(h.Key) == markerKey {
			return errForgedMarker
		}
		hs = rest
	}
	return nil
}

// valueFieldOf returns the record's value field as written: its length
// varint and bytes. Read again rather than worked out from the header
// count's width, which a producer may have written longer than needed.
func valueFieldOf(r *recordbatch.Record) []byte {
	_, _, end, err := recordbatch.ReadBytes(r.Tail, 0)
	if err != nil { // ParseRecord read it already
		return r.Tail[:0]
	}
	return r.Tail[:end]
}

// partError says which part of the record a fault is in.
func partError(pi int, err error) error {
	if pi == partKey {
		return fmt.Errorf("key: %w", err)
	}
	return fmt.Errorf("value: %w", err)
}

func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

func varintLen(v int64) int { return uvarintLen(uint64(v<<1) ^ uint64(v>>63)) }

// bytesFieldLen is the size of a length-prefixed field of n bytes.
func bytesFieldLen(n int) int { return varintLen(int64(n)) + n }
