package encryption

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/straitgw/strait/internal/kms/datakey"
)

// The envelope. Every record the filter writes to an encrypted topic carries
// a marker header, first among its headers, whose key is markerKey and whose
// value describes how the record was encrypted (docs/encryption.md draws
// it):
//
//	offset  size  field
//	0       1     version (1)
//	1       1     flags
//	2       1     KEK name length n (1..255)        \ when flagDEK or
//	3       n     KEK name                           / flagKey is set
//	        1     wrapped DEK length w (1..255)     \
//	        w     wrapped DEK, as the KMS returned it |  when flagDEK
//	        1-10  IV counter, uvarint                 /  is set
//	        rest  ciphertext and tag, when flagInMarker is set
//
// Everything before the ciphertext is "the fixed part": it is authenticated
// as additional data, so no bit of it can change without the record failing
// to decrypt.
//
// A header rather than a magic prefix of the value marks a record as
// encrypted: a value is arbitrary bytes, and a plaintext record that
// happened to start with some magic would be taken for an envelope and fail.
// The header key is out of band, and the broker keeps headers as they are.
const (
	markerKey       = "strait.enc"
	envelopeVersion = 1
)

// Flags of the marker.
const (
	// flagDEK: the record has ciphertext sealed under the DEK the marker
	// names (the value's, or the headers' with flagHeaders).
	flagDEK byte = 1 << iota
	// flagHeaders: the ciphertext holds the record's value and its
	// headers; the record keeps only the marker in clear.
	flagHeaders
	// flagTopic: the topic name is part of the additional data.
	flagTopic
	// flagKey: the record key is encrypted deterministically under a key
	// derived from the KEK the marker names.
	flagKey
	// flagInMarker: the value was null (a tombstone) and the headers were
	// encrypted, so the ciphertext sits at the end of the marker and the
	// value stays null for log compaction.
	flagInMarker

	knownFlags = flagDEK | flagHeaders | flagTopic | flagKey | flagInMarker
)

var errBadEnvelope = errors.New("malformed encryption marker")

// marker is a parsed marker header value.
type marker struct {
	flags   byte
	kek     []byte
	wrapped []byte
	iv      uint64
	fixed   []byte // the authenticated part: everything before sealed
	sealed  []byte // ciphertext and tag, with flagInMarker
}

// parseMarker reads a marker header value. It accepts only what
// appendMarker writes: known version and flags, consistent flag
// combinations, lengths inside the value, a canonical IV counter.
func parseMarker(v []byte) (m marker, err error) {
	if len(v) < 2 {
		return m, fmt.Errorf("%w: %d bytes", errBadEnvelope, len(v))
	}
	if v[0] != envelopeVersion {
		return m, fmt.Errorf("%w: unknown version %d (this gateway reads version %d)", errBadEnvelope, v[0], envelopeVersion)
	}
	m.flags = v[1]
	if m.flags&^knownFlags != 0 {
		return m, fmt.Errorf("%w: unknown flags %#x", errBadEnvelope, m.flags&^knownFlags)
	}
	dek := m.flags&flagDEK != 0
	if (m.flags&flagHeaders != 0 && !dek) || (m.flags&flagInMarker != 0 && m.flags&flagHeaders == 0) {
		return m, fmt.Errorf("%w: inconsistent flags %#x", errBadEnvelope, m.flags)
	}
	p := 2
	if dek || m.flags&flagKey != 0 {
		if m.kek, p, err = readShort(v, p); err != nil {
			return m, fmt.Errorf("%w: KEK name: %w", errBadEnvelope, err)
		}
	}
	if dek {
		if m.wrapped, p, err = readShort(v, p); err != nil {
			return m, fmt.Errorf("%w: wrapped DEK: %w", errBadEnvelope, err)
		}
		iv, n := binary.Uvarint(v[p:])
		if n <= 0 || n != uvarintLen(iv) {
			return m, fmt.Errorf("%w: IV counter", errBadEnvelope)
		}
		m.iv = iv
		p += n
	}
	m.fixed = v[:p]
	switch {
	case m.flags&flagInMarker != 0:
		if len(v)-p < datakey.TagLen {
			return m, fmt.Errorf("%w: ciphertext shorter than a tag", errBadEnvelope)
		}
		m.sealed = v[p:]
	case p != len(v):
		return m, fmt.Errorf("%w: %d bytes after its fields", errBadEnvelope, len(v)-p)
	}
	return m, nil
}

// readShort reads a field of 1 to 255 bytes behind a one-byte length.
func readShort(v []byte, p int) ([]byte, int, error) {
	if p >= len(v) {
		return nil, 0, errors.New("missing")
	}
	n := int(v[p])
	p++
	if n == 0 || n > len(v)-p {
		return nil, 0, fmt.Errorf("length %d out of range", n)
	}
	return v[p : p+n], p + n, nil
}

// appendMarker appends the fixed part of a marker.
func appendMarker(dst []byte, flags byte, kek string, wrapped []byte, iv uint64) []byte {
	dst = append(dst, envelopeVersion, flags)
	if flags&(flagDEK|flagKey) != 0 {
		dst = append(dst, byte(len(kek)))
		dst = append(dst, kek...)
	}
	if flags&flagDEK != 0 {
		dst = append(dst, byte(len(wrapped)))
		dst = append(dst, wrapped...)
		dst = binary.AppendUvarint(dst, iv)
	}
	return dst
}

// appendAAD appends the additional data that binds a record's ciphertext:
// the marker's fixed part, the topic when bound, and the record key as
// stored (its length varint and bytes: a null key and an empty one differ).
// Moving a value to another record key, another topic, or changing any
// marker bit makes it fail to decrypt.
func appendAAD(dst, fixed []byte, topic string, bind bool, keyField []byte) []byte {
	dst = append(dst, fixed...)
	if bind {
		dst = binary.AppendUvarint(dst, uint64(len(topic)))
		dst = append(dst, topic...)
	}
	return append(dst, keyField...)
}

// keyLabel is what record keys' deterministic encryption keys are derived
// under (datakey.Deterministic). It must never change: keys already in a
// topic would no longer open, and compaction would keep an old and a new
// copy of each (keyvector_test pins it).
const keyLabel = "strait/record-encryption/record-key/v1"

// keyAD is the additional data of a record key: the topic, length first,
// when bound, or a single zero byte (no topic is empty) when not. Either
// form is self-delimiting, so the MAC input ad || key is unambiguous and a
// nonce never repeats for two different keys, whether or not bind_topic
// changed in between.
func keyAD(dst []byte, topic string, bind bool) []byte {
	if !bind {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(topic)))
	return append(dst, topic...)
}
