package fieldencryption

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The marker. A record with encrypted fields carries a header, first among
// its headers, whose key is markerKey and whose value says once for the
// whole record what its fields' envelopes need (docs/field-encryption.md
// draws it):
//
//	version (1) | flags
//	uvarint KEK count, then per KEK:
//	    KEK name length (1 byte) | KEK name
//	    wrapped DEK length (1 byte, 0 when only deterministic fields use
//	        the KEK) | wrapped DEK
//	    uvarint first IV counter (only with a wrapped DEK)
//	uvarint field count, then per field:
//	    field flags (part, mode, format) | uvarint KEK index
//	    uvarint schema id (0: none) | uvarint number of values encrypted
//	    path length (1 byte) | path
//
// Carrying the KEK, the DEK and the IV counter here, once, is what keeps
// each encrypted value small: a random-mode value is its ciphertext and
// tag alone, its nonce being the record's first IV counter plus the
// value's position among the values under its KEK. Carrying the paths,
// formats and counts makes the record readable by any instance whatever
// its config says today, and lets decryption check that it found exactly
// the values that were encrypted. The whole marker is authenticated as
// additional data of every random-mode value.
const (
	markerKey     = "strait.fields"
	markerVersion = 1
)

// Marker flags.
const (
	flagTopic byte = 1 << iota // the topic is in the additional data

	knownFlags = flagTopic
)

// Field flags: which part the field is in, its mode and its format.
const (
	fieldKey           byte = 1 << 0
	fieldDeterministic byte = 1 << 1
	fieldFormatShift        = 2
	fieldFormatMask    byte = 3 << fieldFormatShift

	knownFieldFlags = fieldKey | fieldDeterministic | fieldFormatMask
)

// Formats as the marker writes them.
const (
	wireJSON     = 1
	wireAvro     = 2
	wireProtobuf = 3
)

// maxNameLen bounds a KEK name, a wrapped DEK and a path in the marker (one
// length byte each).
const maxNameLen = 255

// maxMarkerEntries bounds the KEKs and fields a marker may list.
const maxMarkerEntries = 2 * maxFields

var errBadMarker = errors.New("malformed field-encryption marker")

// markerKEK is a KEK entry of a marker.
type markerKEK struct {
	kek     string // name as a string, when sealing
	name    []byte
	wrapped []byte // empty: no DEK
	first   uint64
}

// markerField is a field entry of a marker.
type markerField struct {
	flags    byte
	kek      int
	schemaID int
	count    int
	path     []byte
}

// bound reports whether the topic is in the additional data.
func (m *marker) bound() bool { return m.flags&flagTopic != 0 }

func (f *markerField) isKey() bool         { return f.flags&fieldKey != 0 }
func (f *markerField) deterministic() bool { return f.flags&fieldDeterministic != 0 }
func (f *markerField) format() byte        { return (f.flags & fieldFormatMask) >> fieldFormatShift }

// marker is a parsed marker value; its slices alias the value. Its lists
// are reused from record to record.
type marker struct {
	raw    []byte
	flags  byte
	keks   []markerKEK
	fields []markerField
}

// appendMarker appends the marker of m's KEKs and fields to dst.
func appendMarker(dst []byte, flags byte, keks []markerKEK, fields []markerField) []byte {
	dst = append(dst, markerVersion, flags)
	dst = binary.AppendUvarint(dst, uint64(len(keks)))
	for i := range keks {
		k := &keks[i]
		dst = append(dst, byte(len(k.name)))
		dst = append(dst, k.name...)
		dst = append(dst, byte(len(k.wrapped)))
		dst = append(dst, k.wrapped...)
		if len(k.wrapped) > 0 {
			dst = binary.AppendUvarint(dst, k.first)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(fields)))
	for i := range fields {
		f := &fields[i]
		dst = append(dst, f.flags)
		dst = binary.AppendUvarint(dst, uint64(f.kek))
		dst = binary.AppendUvarint(dst, uint64(f.schemaID))
		dst = binary.AppendUvarint(dst, uint64(f.count))
		dst = append(dst, byte(len(f.path)))
		dst = append(dst, f.path...)
	}
	return dst
}

// parse reads a marker value into m. It accepts only what appendMarker
// writes: the known version and flags, lengths and indexes in range,
// canonical varints, nothing after the last field.
func (m *marker) parse(v []byte) error {
	m.raw, m.keks, m.fields = v, m.keks[:0], m.fields[:0]
	if len(v) < 2 {
		return fmt.Errorf("%w: %d bytes", errBadMarker, len(v))
	}
	if v[0] != markerVersion {
		return fmt.Errorf("%w: unknown version %d (this gateway reads version %d)", errBadMarker, v[0], markerVersion)
	}
	m.flags = v[1]
	if m.flags&^knownFlags != 0 {
		return fmt.Errorf("%w: unknown flags %#x", errBadMarker, m.flags&^knownFlags)
	}
	p := 2
	nk, p, err := readCount(v, p, "KEK count")
	if err != nil {
		return err
	}
	for range nk {
		var k markerKEK
		if k.name, p, err = readShort(v, p, 1); err != nil {
			return fmt.Errorf("%w: KEK name: %w", errBadMarker, err)
		}
		if k.wrapped, p, err = readShort(v, p, 0); err != nil {
			return fmt.Errorf("%w: wrapped DEK: %w", errBadMarker, err)
		}
		if len(k.wrapped) > 0 {
			if k.first, p, err = readUvarint(v, p); err != nil {
				return fmt.Errorf("%w: IV counter: %w", errBadMarker, err)
			}
		}
		m.keks = append(m.keks, k)
	}
	nf, p, err := readCount(v, p, "field count")
	if err != nil {
		return err
	}
	if nf == 0 {
		return fmt.Errorf("%w: no fields", errBadMarker)
	}
	for range nf {
		var f markerField
		if p >= len(v) {
			return fmt.Errorf("%w: field entry truncated", errBadMarker)
		}
		f.flags = v[p]
		p++
		if f.flags&^knownFieldFlags != 0 || f.format() == 0 {
			return fmt.Errorf("%w: field flags %#x", errBadMarker, f.flags)
		}
		var u uint64
		if u, p, err = readUvarint(v, p); err != nil || u >= uint64(len(m.keks)) {
			return fmt.Errorf("%w: field's KEK index", errBadMarker)
		}
		f.kek = int(u)
		if u, p, err = readUvarint(v, p); err != nil || u > 1<<31-1 {
			return fmt.Errorf("%w: field's schema id", errBadMarker)
		}
		f.schemaID = int(u)
		if u, p, err = readUvarint(v, p); err != nil || u == 0 || u > uint64(len(v))<<20 {
			return fmt.Errorf("%w: field's value count", errBadMarker)
		}
		f.count = int(u)
		if f.path, p, err = readShort(v, p, 1); err != nil {
			return fmt.Errorf("%w: field path: %w", errBadMarker, err)
		}
		if !f.deterministic() && len(m.keks[f.kek].wrapped) == 0 {
			return fmt.Errorf("%w: a random-mode field under a KEK with no data key", errBadMarker)
		}
		m.fields = append(m.fields, f)
	}
	if p != len(v) {
		return fmt.Errorf("%w: %d bytes after its fields", errBadMarker, len(v)-p)
	}
	return nil
}

func readCount(v []byte, p int, what string) (int, int, error) {
	u, p, err := readUvarint(v, p)
	if err != nil || u > maxMarkerEntries {
		return 0, 0, fmt.Errorf("%w: %s", errBadMarker, what)
	}
	return int(u), p, nil
}

// readShort reads a field of min to 255 bytes behind a one-byte length.
func readShort(v []byte, p, min int) ([]byte, int, error) {
	if p >= len(v) {
		return nil, 0, errors.New("missing")
	}
	n := int(v[p])
	p++
	if n < min || n > len(v)-p {
		return nil, 0, fmt.Errorf("length %d out of range", n)
	}
	return v[p : p+n], p + n, nil
}

// readUvarint reads a canonical (shortest-form) uvarint.
func readUvarint(v []byte, p int) (uint64, int, error) {
	if p > len(v) {
		return 0, 0, errors.New("missing")
	}
	u, n := binary.Uvarint(v[p:])
	if n <= 0 || n != uvarintLen(u) {
		return 0, 0, errors.New("not a canonical varint")
	}
	return u, p + n, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
