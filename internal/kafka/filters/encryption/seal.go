package encryption

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms/datakey"
)

// scratch is the working memory of one partition's worth of records:
// decompressed input, records before compression, and small per-record
// buffers. It is pooled, and never leaves the filter: what goes to the
// proxy is always freshly allocated, because the proxy encodes it after the
// hook returns and keeps the request until its response.
type scratch struct {
	in, out  []byte
	aad      []byte
	fixed    []byte
	key      []byte
	keyField []byte
	ad       []byte
	cacheKey []byte
	lastDEK  []byte
	nonce    [datakey.NonceLen]byte // here rather than on the stack: an interface call would move it to the heap
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// keepScratch is the largest buffer a scratch keeps when it goes back to
// the pool; a rare huge batch does not pin its memory.
const keepScratch = 4 << 20

func getScratch() *scratch { return scratches.Get().(*scratch) }

func putScratch(s *scratch) {
	for _, b := range []*[]byte{&s.in, &s.out, &s.aad, &s.fixed, &s.key, &s.keyField, &s.ad, &s.cacheKey, &s.lastDEK} {
		if cap(*b) > keepScratch {
			*b = nil
		} else {
			*b = (*b)[:0]
		}
	}
	scratches.Put(s)
}

// sealer encrypts the records of one partition of a Produce request.
type sealer struct {
	f     *Filter
	ctx   context.Context
	topic string
	kek   string
	s     *scratch
	keyc  *datakey.DeterministicCipher // nil unless keys are encrypted

	// The DEK in use and the IV counters reserved from it.
	d      *datakey.DEK
	iv     uint64
	ivLeft int
}

// recordError says which record of a batch could not be processed.
type recordError struct {
	offset int64 // base offset + offset delta; in a Produce request, the delta alone
	err    error
}

func (e *recordError) Error() string { return fmt.Sprintf("record at offset %d: %v", e.offset, e.err) }
func (e *recordError) Unwrap() error { return e.err }

// sealRecords encrypts the records of a partition (one or more batches) and
// returns them in a new slice.
func (j *sealer) sealRecords(in []byte) ([]byte, error) {
	n, err := countRecords(in)
	if err != nil {
		return nil, err
	}
	if j.f.cfg.EncryptKey {
		if j.keyc, err = j.f.keys.Newest(j.ctx, j.kek); err != nil {
			return nil, err
		}
	}
	j.s.ad = keyAD(j.s.ad[:0], j.topic, j.f.bind)
	// The output is allocated once, at its final size where it can be
	// known: for uncompressed batches from the record count (as far as
	// the bytes could hold that many records: counts come from the
	// client), for compressed ones in sealBatch, once the sealed records
	// are there to be compressed.
	var dst []byte
	if !anyCompressed(in) {
		n = min(n, len(in)/minRecordLen)
		dst = make([]byte, 0, len(in)+n*j.f.maxOverhead(j.kek))
	}
	for rest := in; len(rest) > 0; {
		var batch []byte
		if batch, rest, err = recordbatch.Next(rest); err != nil {
			return nil, err
		}
		if dst, err = j.sealBatch(dst, batch); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// anyCompressed reports whether a batch of b (framed by countRecords
// already) is compressed.
func anyCompressed(b []byte) bool {
	for len(b) > 0 {
		batch, rest, err := recordbatch.Next(b)
		if err != nil {
			return false
		}
		if recordbatch.Magic(batch) == 2 && len(batch) >= recordbatch.HeaderLen && recordbatch.CodecOf(batch) != recordbatch.Uncompressed {
			return true
		}
		b = rest
	}
	return false
}

// minRecordLen is the smallest a record can be: one byte each for its
// length, attributes, timestamp delta, offset delta, key, value and header
// count.
const minRecordLen = 7

// countRecords adds up the record counts of the batches in b, checking
// their framing (not yet their contents).
func countRecords(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		batch, rest, err := recordbatch.Next(b)
		if err != nil {
			return 0, err
		}
		if recordbatch.Magic(batch) == 2 && len(batch) >= recordbatch.HeaderLen {
			n += recordbatch.Count(batch)
		}
		b = rest
	}
	return n, nil
}

// sealBatch appends batch, its records encrypted, to dst.
func (j *sealer) sealBatch(dst, batch []byte) ([]byte, error) {
	if err := recordbatch.Check(batch); err != nil {
		if errors.Is(err, recordbatch.ErrOldFormat) {
			err = fmt.Errorf("%w, which cannot carry encryption headers", err)
		}
		return dst, err
	}
	if recordbatch.IsControl(batch) {
		return append(dst, batch...), nil
	}
	k := recordbatch.CodecOf(batch)
	if k > recordbatch.Zstd {
		return dst, recordbatch.ErrUnknownCodec
	}
	n := recordbatch.Count(batch)
	start := len(dst)
	dst = append(dst, batch[:recordbatch.HeaderLen]...)
	recs := batch[recordbatch.HeaderLen:]
	var err error
	if k == recordbatch.Uncompressed {
		dst, err = j.sealInto(dst, recs, n)
	} else {
		var held int64
		j.s.in, held, err = j.f.codecs.Decompress(j.ctx, j.s.in[:0], k, recs)
		if err != nil {
			return dst, err
		}
		defer j.f.codecs.Release(held) // once the batch is sealed and compressed
		j.s.out, err = j.sealInto(j.s.out[:0], j.s.in, n)
		if err == nil {
			dst = slices.Grow(dst, recordbatch.CompressBound(k, len(j.s.out)))
			dst, err = j.f.codecs.Compress(dst, k, j.s.out, k == recordbatch.Snappy && recordbatch.IsXerial(recs))
		}
	}
	if err != nil {
		return dst, err
	}
	recordbatch.Finish(dst, start)
	return dst, nil
}

// sealInto appends the n records in recs, encrypted, to dst.
func (j *sealer) sealInto(dst, recs []byte, n int) ([]byte, error) {
	// IVs are reserved for the records still to come in one go, as many
	// as the bytes can hold: a count that lies cannot use up a DEK.
	most := min(n, len(recs)/minRecordLen)
	for i := range n {
		r, rest, err := recordbatch.ParseRecord(recs)
		if err != nil {
			return dst, err
		}
		if dst, err = j.sealRecord(dst, &r, most-i); err != nil {
			return dst, &recordError{offset: int64(r.OffsetDelta), err: err}
		}
		recs = rest
	}
	if len(recs) != 0 {
		return dst, recordbatch.ErrTrailingBytes
	}
	return dst, nil
}

// nextIV returns the DEK and IV counter for the next record, reserving IVs
// for the want records still to come.
func (j *sealer) nextIV(want int) (*datakey.DEK, uint64, error) {
	if j.ivLeft == 0 {
		d, first, got, err := j.f.ring.ReserveBound(j.ctx, j.kek, j.f.binding(j.topic, j.f.bind), max(want, 1))
		if err != nil {
			return nil, 0, err
		}
		j.d, j.iv, j.ivLeft = d, first, got
	}
	iv := j.iv
	j.iv++
	j.ivLeft--
	return j.d, iv, nil
}

// sealRecord appends r, encrypted, to dst. The output record is laid out
// and sized first, then sealed in place: no per-record allocation.
//
// Without encrypt_headers the value becomes ciphertext and the marker is
// put before the record's own headers. With it, the plaintext is the
// record's whole tail (value length, value, header count, headers), so the
// decrypted bytes are the original record's tail again; the record keeps
// only the marker as its header.
func (j *sealer) sealRecord(dst []byte, r *recordbatch.Record, want int) ([]byte, error) {
	f, s := j.f, j.s
	var flags byte
	if f.bind {
		flags |= flagTopic
	}
	keyField := r.KeyField
	if j.keyc != nil && !r.KeyNull {
		flags |= flagKey
		s.key = j.keyc.Seal(s.key[:0], s.ad, r.Key)
		s.keyField = binary.AppendVarint(s.keyField[:0], int64(len(s.key)))
		s.keyField = append(s.keyField, s.key...)
		keyField = s.keyField
	}
	sealHeaders := f.cfg.EncryptHeaders && r.HeaderCount > 0
	var (
		d     *datakey.DEK
		iv    uint64
		plain []byte
		ctLen int
	)
	if !r.ValueNull || sealHeaders {
		var err error
		if d, iv, err = j.nextIV(want); err != nil {
			return dst, err
		}
		flags |= flagDEK
		plain = r.Value
		if sealHeaders {
			flags |= flagHeaders
			plain = r.Tail
			if r.ValueNull {
				flags |= flagInMarker
			}
		}
		ctLen = len(plain) + datakey.TagLen
	}
	var wrapped []byte
	if d != nil {
		wrapped = d.Wrapped()
	}
	s.fixed = appendMarker(s.fixed[:0], flags, j.kek, wrapped, iv)

	markerLen := len(s.fixed)
	if flags&flagInMarker != 0 {
		markerLen += ctLen
	}
	markerHeader := bytesFieldLen(len(markerKey)) + bytesFieldLen(markerLen)
	headerCount := r.HeaderCount + 1
	otherHeaders := r.Headers
	if sealHeaders {
		headerCount, otherHeaders = 1, nil
	}
	valueField := 1 // a null value's -1
	if !r.ValueNull {
		valueField = bytesFieldLen(ctLen)
	}
	body := len(r.Prefix) + len(keyField) + valueField + varintLen(int64(headerCount)) + markerHeader + len(otherHeaders)

	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.Prefix...)
	dst = append(dst, keyField...)
	ctAt := -1
	if r.ValueNull {
		dst = binary.AppendVarint(dst, -1)
	} else {
		dst = binary.AppendVarint(dst, int64(ctLen))
		dst, ctAt = recordbatch.Grow(dst, ctLen)
	}
	dst = binary.AppendVarint(dst, int64(headerCount))
	dst = binary.AppendVarint(dst, int64(len(markerKey)))
	dst = append(dst, markerKey...)
	dst = binary.AppendVarint(dst, int64(markerLen))
	dst = append(dst, s.fixed...)
	if flags&flagInMarker != 0 {
		dst, ctAt = recordbatch.Grow(dst, ctLen)
	}
	dst = append(dst, otherHeaders...)

	if d != nil {
		s.aad = appendAAD(s.aad[:0], s.fixed, j.topic, f.bind, keyField)
		s.nonce = datakey.Nonce(iv)
		d.AEAD().Seal(dst[ctAt:ctAt], s.nonce[:], plain, s.aad)
	}
	return dst, nil
}
