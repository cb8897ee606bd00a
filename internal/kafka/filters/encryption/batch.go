package encryption

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// The Kafka record batch (magic 2) as this filter reads and writes it. Only
// the fields the filter needs are decoded; everything else is copied as
// bytes, so that producer id, epoch, base sequence, timestamps, attributes
// and record prefixes reach the other side exactly as they were sent.
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
	batchHeaderLen = 61
	offLength      = 8
	offMagic       = 16
	offCRC         = 17
	offAttributes  = 21
	offCount       = 57
	// lengthOverhead is what a batch's or a legacy message's length field
	// does not count: the base offset (or message offset) and the field
	// itself. The length sits at offset 8 in every format.
	lengthOverhead = 12

	attrCodecMask = 0x07
	attrControl   = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch errors. Each names what is wrong; the filter maps them to Kafka
// error codes (errors.go).
var (
	errTruncated     = errors.New("record data ends inside a record batch")
	errOldFormat     = errors.New("record batch uses the legacy message format (magic 0 or 1), which cannot carry encryption headers")
	errBadCRC        = errors.New("record batch CRC does not match its contents")
	errBadBatch      = errors.New("malformed record batch")
	errBadRecord     = errors.New("malformed record")
	errUnknownCodec  = errors.New("record batch names an unknown compression codec")
	errCodec         = errors.New("record batch does not decompress")
	errTooLarge      = errors.New("record batch decompresses to more than the configured limit (max_batch_bytes)")
	errRatio         = errors.New("record batch decompresses to more than max_compression_ratio times its compressed size, as a decompression bomb does")
	errBusy          = errors.New("the gateway's decompression budget stayed spent")
	errTrailingBytes = errors.New("record batch holds bytes after its last record")
)

// nextBatch splits the first batch (or legacy message) off b. A b that ends
// inside the batch returns errTruncated: a Fetch response may legitimately
// end with a partial batch, a Produce request may not.
func nextBatch(b []byte) (batch, rest []byte, err error) {
	if len(b) < lengthOverhead+5 { // up to and including the magic byte
		return nil, nil, errTruncated
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	if n < 5 { // a length must at least cover epoch/crc and magic
		return nil, nil, fmt.Errorf("%w: batch length %d", errBadBatch, n)
	}
	total := n + lengthOverhead
	if total > int64(len(b)) {
		return nil, nil, errTruncated
	}
	return b[:total], b[total:], nil
}

// batchMagic is the magic byte of a batch returned by nextBatch.
func batchMagic(batch []byte) byte { return batch[offMagic] }

// checkBatch validates a magic 2 batch's header and CRC.
func checkBatch(batch []byte) error {
	if batchMagic(batch) != 2 {
		if batchMagic(batch) < 2 {
			return errOldFormat
		}
		return fmt.Errorf("%w: unknown magic %d", errBadBatch, batchMagic(batch))
	}
	if len(batch) < batchHeaderLen {
		return fmt.Errorf("%w: %d bytes, shorter than a batch header", errBadBatch, len(batch))
	}
	if crc32.Checksum(batch[offAttributes:], castagnoli) != binary.BigEndian.Uint32(batch[offCRC:]) {
		return errBadCRC
	}
	if binary.BigEndian.Uint32(batch[offCount:]) > math.MaxInt32 {
		return fmt.Errorf("%w: negative record count", errBadBatch)
	}
	return nil
}

func batchAttributes(batch []byte) uint16 { return binary.BigEndian.Uint16(batch[offAttributes:]) }
func batchCodec(batch []byte) codec       { return codec(batchAttributes(batch) & attrCodecMask) }
func batchIsControl(batch []byte) bool    { return batchAttributes(batch)&attrControl != 0 }
func batchCount(batch []byte) int         { return int(binary.BigEndian.Uint32(batch[offCount:])) }
func batchBaseOffset(batch []byte) int64  { return int64(binary.BigEndian.Uint64(batch)) }

// finishBatch fills in the length and CRC of the batch that starts at
// dst[start:] and runs to the end of dst.
func finishBatch(dst []byte, start int) {
	b := dst[start:]
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-lengthOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// record is one record of a batch, as slices of the bytes it was read from.
//
//	length varint, attributes int8, timestamp delta varlong, offset delta
//	varint, key length varint (-1: null), key, value length varint (-1:
//	null), value, header count varint, headers (key length varint, key,
//	value length varint (-1: null), value)
type record struct {
	prefix      []byte // attributes, timestamp delta and offset delta, as sent
	offsetDelta int32
	keyField    []byte // the key's length varint and bytes, as sent
	key         []byte // nil when null
	keyNull     bool
	tail        []byte // the value's length varint through the last header
	value       []byte
	valueNull   bool
	headerCount int
	headers     []byte // every header, after the count
}

// parseRecord reads the record at the start of b. It checks every length
// against the record's own length, so a malformed record never reads past
// itself.
func parseRecord(b []byte) (r record, rest []byte, err error) {
	n, w := binary.Varint(b)
	if w <= 0 || n < 0 || n > int64(len(b)-w) {
		return r, nil, fmt.Errorf("%w: bad length", errBadRecord)
	}
	body := b[w : w+int(n)]
	rest = b[w+int(n):]
	if len(body) < 1 {
		return r, nil, fmt.Errorf("%w: empty", errBadRecord)
	}
	p := 1 // attributes
	if _, w := binary.Varint(body[p:]); w <= 0 {
		return r, nil, fmt.Errorf("%w: bad timestamp delta", errBadRecord)
	} else {
		p += w
	}
	od, w := binary.Varint(body[p:])
	if w <= 0 || od < math.MinInt32 || od > math.MaxInt32 {
		return r, nil, fmt.Errorf("%w: bad offset delta", errBadRecord)
	}
	p += w
	r.prefix, r.offsetDelta = body[:p], int32(od)

	start := p
	r.key, r.keyNull, p, err = readBytes(body, p)
	if err != nil {
		return r, nil, fmt.Errorf("%w: key: %w", errBadRecord, err)
	}
	r.keyField = body[start:p]

	r.tail = body[p:]
	r.value, r.valueNull, p, err = readBytes(body, p)
	if err != nil {
		return r, nil, fmt.Errorf("%w: value: %w", errBadRecord, err)
	}
	hc, w := binary.Varint(body[p:])
	if w <= 0 || hc < 0 || hc > int64(len(body)) {
		return r, nil, fmt.Errorf("%w: bad header count", errBadRecord)
	}
	p += w
	r.headerCount, r.headers = int(hc), body[p:]
	hs := r.headers
	for range r.headerCount {
		if _, hs, err = nextHeader(hs); err != nil {
			return r, nil, err
		}
	}
	if len(hs) != 0 {
		return r, nil, fmt.Errorf("%w: %d bytes after the last header", errBadRecord, len(hs))
	}
	return r, rest, nil
}

// header is one record header.
type header struct {
	raw   []byte // the whole header as sent
	key   []byte
	value []byte
}

// nextHeader splits the first header off b.
func nextHeader(b []byte) (h header, rest []byte, err error) {
	key, null, p, err := readBytes(b, 0)
	if err != nil || null {
		return h, nil, fmt.Errorf("%w: bad header key", errBadRecord)
	}
	value, _, p, err := readBytes(b, p)
	if err != nil {
		return h, nil, fmt.Errorf("%w: bad header value", errBadRecord)
	}
	return header{raw: b[:p], key: key, value: value}, b[p:], nil
}

// readBytes reads a varint-length-prefixed field at b[p:], where -1 means
// null, and returns the position after it.
func readBytes(b []byte, p int) (v []byte, null bool, next int, err error) {
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

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return uvarintLen(u)
}

func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// bytesFieldLen is the size of a varint-length-prefixed field of n bytes.
func bytesFieldLen(n int) int { return varintLen(int64(n)) + n }

// grow extends b by n bytes and returns it with the position of the new
// bytes, whose contents are undefined.
func grow(b []byte, n int) ([]byte, int) {
	at := len(b)
	if cap(b)-at < n {
		nb := make([]byte, at, 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:at+n], at
}
