package schema

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// MagicByte opens every payload in the Confluent wire format.
const MagicByte = 0

// PrefixLen is the length of the magic byte and the schema id.
const PrefixLen = 5

// Errors of the wire format; errors.Is matches them through the detail the
// parsers add.
var (
	// ErrNoPrefix is a payload that does not start with the magic byte, or
	// is too short to hold a schema id.
	ErrNoPrefix = errors.New("payload does not carry a schema id")
	// ErrMalformedIndexes is a Protobuf message-index list that cannot be
	// read.
	ErrMalformedIndexes = errors.New("malformed protobuf message indexes")
)

// ParsePrefix reads the magic byte and the schema id at the start of b and
// returns the id and the rest of b.
func ParsePrefix(b []byte) (id int, rest []byte, err error) {
	if len(b) < PrefixLen {
		return 0, nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrNoPrefix, len(b), PrefixLen)
	}
	if b[0] != MagicByte {
		return 0, nil, fmt.Errorf("%w: first byte is 0x%02x, want 0x00", ErrNoPrefix, b[0])
	}
	// Registries hand out ids as signed 32-bit integers; a negative id
	// names no schema but is the producer's to explain, so it parses and
	// simply is not found.
	return int(int32(binary.BigEndian.Uint32(b[1:5]))), b[5:], nil
}

// AppendPrefix appends the magic byte and id to dst.
func AppendPrefix(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, MagicByte), uint32(int32(id)))
}

// firstMessage is the index path [0]; returned shared, so callers must not
// modify what ParseMessageIndexes returns.
var firstMessage = []int{0}

// maxIndexes bounds the length of a message-index list: each index is a
// level of message nesting, and no real schema nests this deep.
const maxIndexes = 128

// ParseMessageIndexes reads the message-index list that follows the schema
// id of a Protobuf payload: a count and that many indexes, all zigzag
// varints, where a count of 0 alone stands for [0] (the first message of
// the file). It returns the path and the rest of b (the message). The
// returned slice must not be modified: [0] is shared.
func ParseMessageIndexes(b []byte) (indexes []int, rest []byte, err error) {
	count, n := consumeZigzag(b)
	if n < 0 {
		return nil, nil, fmt.Errorf("%w: count: %v", ErrMalformedIndexes, protowire.ParseError(n))
	}
	b = b[n:]
	switch {
	case count == 0:
		return firstMessage, b, nil
	case count < 0:
		return nil, nil, fmt.Errorf("%w: negative count %d", ErrMalformedIndexes, count)
	case count > maxIndexes || count > int64(len(b)):
		return nil, nil, fmt.Errorf("%w: count %d with %d bytes left", ErrMalformedIndexes, count, len(b))
	}
	if count == 1 && len(b) > 0 && b[0] == 0 {
		// [0] written out in full, as some serializers do.
		return firstMessage, b[1:], nil
	}
	indexes = make([]int, count)
	for i := range indexes {
		v, n := consumeZigzag(b)
		if n < 0 {
			return nil, nil, fmt.Errorf("%w: index %d: %v", ErrMalformedIndexes, i, protowire.ParseError(n))
		}
		if v < 0 || v > 1<<31-1 {
			return nil, nil, fmt.Errorf("%w: index %d is %d", ErrMalformedIndexes, i, v)
		}
		indexes[i] = int(v)
		b = b[n:]
	}
	return indexes, b, nil
}

// AppendMessageIndexes appends the message-index list of indexes to dst,
// writing [0] (and an empty list) as the single byte 0.
func AppendMessageIndexes(dst []byte, indexes []int) []byte {
	if len(indexes) == 0 || len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(len(indexes))))
	for _, i := range indexes {
		dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(i)))
	}
	return dst
}

func consumeZigzag(b []byte) (int64, int) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, n
	}
	return protowire.DecodeZigZag(v), n
}
