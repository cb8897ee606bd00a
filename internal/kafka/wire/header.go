package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DefaultMaxFrame is the default limit on one frame's size (100 MiB), as
// Kafka's socket.request.max.bytes.
const DefaultMaxFrame = 100 << 20

// Errors a peer's bytes can cause. Each ends only the connection concerned.
var (
	ErrShortHeader   = errors.New("frame too short for its header")
	ErrNegativeFrame = errors.New("negative frame size")
	ErrMalformed     = errors.New("malformed header")
)

// FrameTooLargeError says a frame's declared size is over the limit.
type FrameTooLargeError struct{ Size, Max int64 }

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes is over the %d-byte limit (is the peer speaking TLS or HTTP to a plaintext Kafka port?)", e.Size, e.Max)
}

// FrameSize decodes a 4-byte big-endian frame size and checks it against max.
func FrameSize(b [4]byte, max int64) (int, error) {
	n := int64(int32(binary.BigEndian.Uint32(b[:])))
	if n < 0 {
		return 0, ErrNegativeFrame
	}
	if n > max {
		return 0, &FrameTooLargeError{Size: n, Max: max}
	}
	return int(n), nil
}

// RequestHeader is the part of a request every hop must read.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID aliases the frame's bytes; copy it to keep it.
	ClientID []byte
	// ClientIDNull is set when the client sent a null client id.
	ClientIDNull bool
	// Len is the header's length in bytes: the body starts there.
	Len int
}

// ParseRequestHeader reads a request header from the start of b (the frame
// after its size). For keys or versions Strait does not know, Len covers
// the fields every header v1+ has (through the client id) but not tagged
// fields, whose presence depends on the version; the caller decides what to
// do with such frames (see Known).
func ParseRequestHeader(b []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(b) < 10 {
		return h, ErrShortHeader
	}
	h.Key = int16(binary.BigEndian.Uint16(b[0:]))
	h.Version = int16(binary.BigEndian.Uint16(b[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(b[4:]))
	// The client id (a nullable int16-length string) is in every header
	// version from v1; only ControlledShutdown v0 used header v0, and no
	// client speaks it any more, so Strait reads v1+ only.
	n := int(int16(binary.BigEndian.Uint16(b[8:])))
	off := 10
	switch {
	case n == -1:
		h.ClientIDNull = true
	case n < 0:
		return h, fmt.Errorf("%w: client id length %d", ErrMalformed, n)
	default:
		if len(b) < off+n {
			return h, ErrShortHeader
		}
		h.ClientID = b[off : off+n]
		off += n
	}
	if !Known(h.Key, h.Version) {
		h.Len = off
		return h, nil
	}
	if RequestHeaderFlexible(h.Key, h.Version) {
		m, err := SkipTags(b[off:])
		if err != nil {
			return h, err
		}
		off += m
	}
	h.Len = off
	return h, nil
}

// ResponseHeaderLen returns the length of the response header at the start of
// b for a response to key at version: 4 bytes of correlation id, then tagged
// fields for flexible responses. key and version must be Known.
func ResponseHeaderLen(b []byte, key, version int16) (int, error) {
	if len(b) < 4 {
		return 0, ErrShortHeader
	}
	if !ResponseHeaderFlexible(key, version) {
		return 4, nil
	}
	m, err := SkipTags(b[4:])
	if err != nil {
		return 0, err
	}
	return 4 + m, nil
}

// CorrelationID reads the correlation id at the start of a response frame.
func CorrelationID(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }

// Uvarint reads an unsigned varint as Kafka writes it, returning the value
// and the bytes read; n is 0 if b is too short or the varint is too long.
func Uvarint(b []byte) (v uint32, n int) {
	var s uint
	for i := 0; i < len(b) && i < 5; i++ {
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0
		}
		v |= uint32(c&0x7f) << s
		if c < 0x80 {
			return v, i + 1
		}
		s += 7
	}
	return 0, 0
}

// SkipTags returns the length of the tagged-field section at the start of b.
func SkipTags(b []byte) (int, error) {
	num, n := Uvarint(b)
	if n == 0 {
		return 0, ErrShortHeader
	}
	off := n
	for i := uint32(0); i < num; i++ {
		_, n := Uvarint(b[off:])
		if n == 0 {
			return 0, ErrShortHeader
		}
		off += n
		size, n := Uvarint(b[off:])
		if n == 0 {
			return 0, ErrShortHeader
		}
		off += n
		if uint64(size) > uint64(len(b)-off) {
			return 0, ErrShortHeader
		}
		off += int(size)
	}
	return off, nil
}

// ProduceAcks reads the acks field of a Produce request body. In v3+ a
// transactional id (nullable; compact from v9) precedes it. ok is false if b
// is too short to hold it.
func ProduceAcks(body []byte, version int16) (acks int16, ok bool) {
	off := 0
	switch {
	case version >= 9:
		l, n := Uvarint(body)
		if n == 0 {
			return 0, false
		}
		off = n
		// Compare in 64 bits: on a 32-bit platform int(l-1) can wrap.
		if l > 0 {
			if uint64(l-1) > uint64(len(body)-off) {
				return 0, false
			}
			off += int(l - 1)
		}
	case version >= 3:
		if len(body) < 2 {
			return 0, false
		}
		l := int(int16(binary.BigEndian.Uint16(body)))
		off = 2
		if l > 0 {
			off += l
		}
	}
	if len(body)-off < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(body[off:])), true
}

// ProduceAcksPrefix returns how many body bytes ProduceAcks needs for a
// transactional id of the longest legal length: callers peek this many (or
// the whole body, if shorter).
const ProduceAcksPrefix = 5 + 32767 + 2
