// Package recordbatch reads Kafka record batches (magic 2) as they travel in
// Produce requests and Fetch responses, and compresses and decompresses
// their records with bounded memory. It is what every filter that looks at
// records shares: the record-encryption and record-validation filters.
//
// Only the fields a filter needs are decoded; everything else stays bytes,
// so that producer id, epoch, base sequence, timestamps, attributes and
// record prefixes reach the other side exactly as they were sent.
//
// It imports only internal/kafka/membudget (and franz-go's error codes).
package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The record batch (magic 2):
//
//	offset  size  field
//	0       8     base offset
//	8       4     batch length (bytes after this field)
//	12      4     partition leader epoch
//	16      1     magic (2)
//	17      4     CRC-32C of bytes 21..end
//	21      2     attributes (bits 0-2 codec, 4 transactional, 5 control)
//	23      4     last offset delta
//	27      8     base timestamp
//	35      8     max timestamp
//	43      8     producer id
//	51      2     producer epoch
//	53      4     base sequence
//	57      4     record count
//	61      ...   records, compressed as a whole when the codec is not none
const (
	// HeaderLen is the size of a batch's header, before its records.
	HeaderLen     = 61
	offLength     = 8
	offMagic      = 16
	offCRC        = 17
	offAttributes = 21
	offCount      = 57
	// lengthOverhead is what a batch's or a legacy message's length field
	// does not count: the base offset (or message offset) and the field
	// itself. The length sits at offset 8 in every format.
	lengthOverhead = 12

	attrCodecMask = 0x07
	attrControl   = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch errors. Each names what is wrong; each filter maps them to the
// Kafka error codes its clients get.
var (
	ErrTruncated     = errors.New("record data ends inside a record batch")
	ErrOldFormat     = errors.New("record batch uses the legacy message format (magic 0 or 1)")
	ErrBadCRC        = errors.New("record batch CRC does not match its contents")
	ErrBadBatch      = errors.New("malformed record batch")
	ErrBadRecord     = errors.New("malformed record")
	ErrUnknownCodec  = errors.New("record batch names an unknown compression codec")
	ErrCodec         = errors.New("record batch does not decompress")
	ErrTooLarge      = errors.New("record batch decompresses to more than the configured limit (max_batch_bytes)")
	ErrRatio         = errors.New("record batch decompresses to more than max_compression_ratio times its compressed size, as a decompression bomb does")
	ErrBusy          = errors.New("the gateway's decompression budget stayed spent")
	ErrTrailingBytes = errors.New("record batch holds bytes after its last record")
)

// ProduceCode is the error code a producer gets for a batch refused with
// one of the errors above, as a broker would answer it; nil for any other
// error:
//
//	legacy message format (magic 0/1)   UNSUPPORTED_FOR_MESSAGE_FORMAT
//	decompresses over max_batch_bytes   MESSAGE_TOO_LARGE
//	batch CRC mismatch                  CORRUPT_MESSAGE (retriable, as from a broker)
//	decompression budget stays spent    KAFKA_STORAGE_ERROR (retriable)
//	a malformed batch or record, an unknown codec, data that does not
//	decompress, a batch over max_compression_ratio (a retry would send
//	the same bomb)                      INVALID_RECORD
func ProduceCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, ErrOldFormat):
		return kerr.UnsupportedForMessageFormat
	case errors.Is(err, ErrTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, ErrBadCRC):
		return kerr.CorruptMessage
	case errors.Is(err, ErrBusy):
		return kerr.KafkaStorageError
	case errors.Is(err, ErrBadBatch), errors.Is(err, ErrBadRecord), errors.Is(err, ErrTruncated),
		errors.Is(err, ErrTrailingBytes), errors.Is(err, ErrUnknownCodec), errors.Is(err, ErrCodec),
		errors.Is(err, ErrRatio):
		return kerr.InvalidRecord
	}
	return nil
}

// Next splits the first batch (or legacy message) off b. A b that ends
// inside the batch returns ErrTruncated: a Fetch response may legitimately
// end with a partial batch, a Produce request may not.
func Next(b []byte) (batch, rest []byte, err error) {
	if len(b) < lengthOverhead+5 { // up to and including the magic byte
		return nil, nil, ErrTruncated
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	if n < 5 { // a length must at least cover epoch/crc and magic
		return nil, nil, fmt.Errorf("%w: batch length %d", ErrBadBatch, n)
	}
	total := n + lengthOverhead
	if total > int64(len(b)) {
		return nil, nil, ErrTruncated
	}
	return b[:total], b[total:], nil
}

// Magic is the magic byte of a batch returned by Next.
func Magic(batch []byte) byte { return batch[offMagic] }

// Check validates a magic 2 batch's header and CRC.
func Check(batch []byte) error {
	if err := CheckHeader(batch); err != nil {
		return err
	}
	return CheckCRC(batch)
}

// CheckCRC reports ErrBadCRC if the batch's CRC-32C does not match its
// contents. The batch must have passed CheckHeader.
func CheckCRC(batch []byte) error {
	if crc32.Checksum(batch[offAttributes:], castagnoli) != binary.BigEndian.Uint32(batch[offCRC:]) {
		return ErrBadCRC
	}
	return nil
}

// CheckHeader validates a magic 2 batch's header but not its CRC: for a
// filter that forwards the batch unchanged, whose CRC the broker checks, and
// that needs the CRC only to tell corruption from a bad record.
func CheckHeader(batch []byte) error {
	if Magic(batch) != 2 {
		if Magic(batch) < 2 {
			return ErrOldFormat
		}
		return fmt.Errorf("%w: unknown magic %d", ErrBadBatch, Magic(batch))
	}
	if len(batch) < HeaderLen {
		return fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrBadBatch, len(batch))
	}
	if binary.BigEndian.Uint32(batch[offCount:]) > math.MaxInt32 {
		return fmt.Errorf("%w: negative record count", ErrBadBatch)
	}
	return nil
}

// The accessors below read a header field of a batch that Check accepted.

// Attributes is the batch's attributes field.
func Attributes(batch []byte) uint16 { return binary.BigEndian.Uint16(batch[offAttributes:]) }

// CodecOf is the codec the batch's records are compressed with.
func CodecOf(batch []byte) Codec { return Codec(Attributes(batch) & attrCodecMask) }

// IsControl reports a control batch (a transaction marker).
func IsControl(batch []byte) bool { return Attributes(batch)&attrControl != 0 }

// Count is the record count the header states; it comes from the client,
// so it bounds nothing until the records are read.
func Count(batch []byte) int { return int(binary.BigEndian.Uint32(batch[offCount:])) }

// BaseOffset is the batch's base offset (0 in a Produce request).
func BaseOffset(batch []byte) int64 { return int64(binary.BigEndian.Uint64(batch)) }

// Finish fills in the length and CRC of the batch that starts at
// dst[start:] and runs to the end of dst.
func Finish(dst []byte, start int) {
	b := dst[start:]
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-lengthOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// Record is one record of a batch, as slices of the bytes it was read from.
//
//	length varint, attributes int8, timestamp delta varlong, offset delta
//	varint, key length varint (-1: null), key, value length varint (-1:
//	null), value, header count varint, headers (key length varint, key,
//	value length varint (-1: null), value)
type Record struct {
	Prefix      []byte // attributes, timestamp delta and offset delta, as sent
	OffsetDelta int32
	KeyField    []byte // the key's length varint and bytes, as sent
	Key         []byte // nil when null
	KeyNull     bool
	Tail        []byte // the value's length varint through the last header
	Value       []byte
	ValueNull   bool
	HeaderCount int
	Headers     []byte // every header, after the count
}

// ParseRecord reads the record at the start of b. It checks every length
// against the record's own length, so a malformed record never reads past
// itself.
func ParseRecord(b []byte) (r Record, rest []byte, err error) {
	n, w := binary.Varint(b)
	if w <= 0 || n < 0 || n > int64(len(b)-w) {
		return r, nil, fmt.Errorf("%w: bad length", ErrBadRecord)
	}
	body := b[w : w+int(n)]
	rest = b[w+int(n):]
	if len(body) < 1 {
		return r, nil, fmt.Errorf("%w: empty", ErrBadRecord)
	}
	p := 1 // attributes
	if _, w := binary.Varint(body[p:]); w <= 0 {
		return r, nil, fmt.Errorf("%w: bad timestamp delta", ErrBadRecord)
	} else {
		p += w
	}
	od, w := binary.Varint(body[p:])
	if w <= 0 || od < math.MinInt32 || od > math.MaxInt32 {
		return r, nil, fmt.Errorf("%w: bad offset delta", ErrBadRecord)
	}
	p += w
	r.Prefix, r.OffsetDelta = body[:p], int32(od)

	start := p
	r.Key, r.KeyNull, p, err = ReadBytes(body, p)
	if err != nil {
		return r, nil, fmt.Errorf("%w: key: %w", ErrBadRecord, err)
	}
	r.KeyField = body[start:p]

	r.Tail = body[p:]
	r.Value, r.ValueNull, p, err = ReadBytes(body, p)
	if err != nil {
		return r, nil, fmt.Errorf("%w: value: %w", ErrBadRecord, err)
	}
	hc, w := binary.Varint(body[p:])
	if w <= 0 || hc < 0 || hc > int64(len(body)) {
		return r, nil, fmt.Errorf("%w: bad header count", ErrBadRecord)
	}
	p += w
	r.HeaderCount, r.Headers = int(hc), body[p:]
	hs := r.Headers
	for range r.HeaderCount {
		if _, hs, err = NextHeader(hs); err != nil {
			return r, nil, err
		}
	}
	if len(hs) != 0 {
		return r, nil, fmt.Errorf("%w: %d bytes after the last header", ErrBadRecord, len(hs))
	}
	return r, rest, nil
}

// Header is one record header.
type Header struct {
	Raw   []byte // the whole header as sent
	Key   []byte
	Value []byte
}

// NextHeader splits the first header off b.
func NextHeader(b []byte) (h Header, rest []byte, err error) {
	key, null, p, err := ReadBytes(b, 0)
	if err != nil || null {
		return h, nil, fmt.Errorf("%w: bad header key", ErrBadRecord)
	}
	value, _, p, err := ReadBytes(b, p)
	if err != nil {
		return h, nil, fmt.Errorf("%w: bad header value", ErrBadRecord)
	}
	return Header{Raw: b[:p], Key: key, Value: value}, b[p:], nil
}

// ReadBytes reads a varint-length-prefixed field at b[p:], where -1 means
// null, and returns the position after it.
func ReadBytes(b []byte, p int) (v []byte, null bool, next int, err error) {
	n, w := binary.Varint(b[p:])
	switch {
	case w <= 0:
		return nil, false, 0, errors.New("bad length")
	case n == -1:
		return nil, true, p + w, nil
	case n < 0 || n > int64(len(b)-p-w):
		return nil, false, 0, fmt.Errorf("length %d out of range", n)
	}
	p += w
	return b[p : p+int(n)], false, p + int(n), nil
}
