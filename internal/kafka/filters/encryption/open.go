package encryption

import (
	"bytes"
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms/datakey"
)

// Fetch-path errors.
var (
	errUnencrypted = errors.New("record carries no encryption marker, and unencrypted_on_fetch is reject")
	errAuth        = errors.New("ciphertext does not verify: the record was altered, copied from another topic or key, or sealed under another key")
)

// opener decrypts the records of one partition of a Fetch response.
type opener struct {
	f     *Filter
	ctx   context.Context
	topic string
	s     *scratch

	// The last DEK and key cipher used: records of a batch nearly always
	// share them, so most records skip the shared caches.
	lastAEAD cipher.AEAD // its opener key is in s.lastDEK
	lastKEK  string
	lastVer  int
	lastKC   *datakey.DeterministicCipher
}

// openRecords decrypts the batches of a fetched partition into a new slice.
// On error it returns the batches before the one that failed (perhaps none)
// with the error: the client gets what could be decrypted, and its next
// fetch starts at the failed batch and fails there. A partial batch at the
// end, which a broker may send when a fetch's byte limit cuts one, is
// dropped: the client would ignore it anyway, and it is not decrypted.
func (j *opener) openRecords(in []byte) ([]byte, error) {
	dst := make([]byte, 0, len(in))
	for rest := in; len(rest) > 0; {
		batch, next, err := recordbatch.Next(rest)
		if errors.Is(err, recordbatch.ErrTruncated) {
			break
		}
		if err != nil {
			return dst, err
		}
		start := len(dst)
		if dst, err = j.openBatch(dst, batch); err != nil {
			return dst[:start], err
		}
		rest = next
	}
	return dst, nil
}

// openBatch appends batch to dst, its records decrypted. A batch with no
// encrypted record is appended exactly as it came.
func (j *opener) openBatch(dst, batch []byte) ([]byte, error) {
	base := recordbatch.BaseOffset(batch)
	if err := recordbatch.Check(batch); err != nil {
		if errors.Is(err, recordbatch.ErrOldFormat) {
			// Legacy messages cannot carry the marker.
			if j.f.rejectUnencrypted {
				return dst, &recordError{offset: base, err: errUnencrypted}
			}
			return append(dst, batch...), nil
		}
		return dst, &recordError{offset: base, err: err}
	}
	if recordbatch.IsControl(batch) {
		return append(dst, batch...), nil
	}
	k := recordbatch.CodecOf(batch)
	if k > recordbatch.Zstd {
		return dst, &recordError{offset: base, err: recordbatch.ErrUnknownCodec}
	}
	n := recordbatch.Count(batch)
	start := len(dst)
	dst = append(dst, batch[:recordbatch.HeaderLen]...)
	recs := batch[recordbatch.HeaderLen:]
	var (
		changed bool
		err     error
	)
	if k == recordbatch.Uncompressed {
		dst, changed, err = j.openInto(dst, recs, n, base)
	} else {
		var held int64
		if j.s.in, held, err = j.f.codecs.Decompress(j.ctx, j.s.in[:0], k, recs); err != nil {
			return dst[:start], &recordError{offset: base, err: err}
		}
		defer j.f.codecs.Release(held) // once the batch is opened and compressed
		j.s.out, changed, err = j.openInto(j.s.out[:0], j.s.in, n, base)
		if err == nil && changed {
			dst, err = j.f.codecs.Compress(dst, k, j.s.out, k == recordbatch.Snappy && recordbatch.IsXerial(recs))
		}
	}
	if err != nil {
		return dst[:start], err
	}
	if !changed {
		return append(dst[:start], batch...), nil
	}
	recordbatch.Finish(dst, start)
	return dst, nil
}

// openInto appends the n records in recs, decrypted, to dst, and reports
// whether any was encrypted.
func (j *opener) openInto(dst, recs []byte, n int, base int64) (_ []byte, changed bool, _ error) {
	for range n {
		r, rest, err := recordbatch.ParseRecord(recs)
		if err != nil {
			return dst, false, &recordError{offset: base, err: err}
		}
		var opened bool
		if dst, opened, err = j.openRecord(dst, &r, recs[:len(recs)-len(rest)]); err != nil {
			return dst, false, &recordError{offset: base + int64(r.OffsetDelta), err: err}
		}
		changed = changed || opened
		recs = rest
	}
	if len(recs) != 0 {
		return dst, false, &recordError{offset: base, err: recordbatch.ErrTrailingBytes}
	}
	return dst, changed, nil
}

// openRecord appends r, decrypted, to dst; raw is the record as it came.
// It reports whether r was encrypted.
func (j *opener) openRecord(dst []byte, r *recordbatch.Record, raw []byte) ([]byte, bool, error) {
	if r.HeaderCount == 0 {
		return j.unencrypted(dst, raw)
	}
	h, others, err := recordbatch.NextHeader(r.Headers)
	if err != nil {
		return dst, false, err
	}
	if string(h.Key) != markerKey {
		return j.unencrypted(dst, raw)
	}
	m, err := parseMarker(h.Value)
	if err != nil {
		return dst, false, err
	}
	hasDEK := m.flags&flagDEK != 0
	sealedHeaders := m.flags&flagHeaders != 0
	inMarker := m.flags&flagInMarker != 0
	switch {
	case inMarker && !r.ValueNull:
		return dst, false, fmt.Errorf("%w: ciphertext in the marker of a record with a value", errBadEnvelope)
	case !hasDEK && !r.ValueNull:
		return dst, false, fmt.Errorf("%w: a value but no data key", errBadEnvelope)
	case hasDEK && r.ValueNull && !inMarker:
		return dst, false, fmt.Errorf("%w: a data key but nothing sealed", errBadEnvelope)
	case sealedHeaders && r.HeaderCount != 1:
		return dst, false, fmt.Errorf("%w: headers sealed, yet %d in clear", errBadEnvelope, r.HeaderCount-1)
	case m.flags&flagKey != 0 && r.KeyNull:
		return dst, false, fmt.Errorf("%w: an encrypted null key", errBadEnvelope)
	}
	bound := m.flags&flagTopic != 0
	s := j.s

	keyField := r.KeyField
	if m.flags&flagKey != 0 {
		version, sealedKey, err := datakey.ReadVersion(r.Key)
		if err != nil {
			return dst, false, fmt.Errorf("%w: encrypted key %w", errBadEnvelope, err)
		}
		kc := j.lastKC
		if kc == nil || j.lastVer != version || j.lastKEK != string(m.kek) {
			if kc, err = j.f.keys.Version(j.ctx, m.kek, version); err != nil {
				return dst, false, err
			}
			j.lastKC, j.lastVer, j.lastKEK = kc, version, string(m.kek)
		}
		s.ad = keyAD(s.ad[:0], j.topic, bound)
		if s.key, err = kc.Open(s.key[:0], sealedKey, s.ad); err != nil {
			return dst, false, fmt.Errorf("record key: %w", errAuth)
		}
		s.keyField = binary.AppendVarint(s.keyField[:0], int64(len(s.key)))
		s.keyField = append(s.keyField, s.key...)
		keyField = s.keyField
	}

	var sealed []byte
	switch {
	case inMarker:
		sealed = m.sealed
	case hasDEK:
		sealed = r.Value
		if len(sealed) < datakey.TagLen {
			return dst, false, fmt.Errorf("%w: value shorter than a tag", errBadEnvelope)
		}
	}
	ptLen := len(sealed) - datakey.TagLen

	var body int
	headerCount := r.HeaderCount - 1
	switch {
	case sealedHeaders:
		body = len(r.Prefix) + len(keyField) + ptLen
	case r.ValueNull:
		body = len(r.Prefix) + len(keyField) + 1 + varintLen(int64(headerCount)) + len(others)
	default:
		body = len(r.Prefix) + len(keyField) + bytesFieldLen(ptLen) + varintLen(int64(headerCount)) + len(others)
	}
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.Prefix...)
	dst = append(dst, keyField...)
	ptAt := -1
	switch {
	case sealedHeaders:
		dst, ptAt = recordbatch.Grow(dst, ptLen)
	case r.ValueNull:
		dst = binary.AppendVarint(dst, -1)
	default:
		dst = binary.AppendVarint(dst, int64(ptLen))
		dst, ptAt = recordbatch.Grow(dst, ptLen)
	}
	if !sealedHeaders {
		dst = binary.AppendVarint(dst, int64(headerCount))
		dst = append(dst, others...)
	}
	if !hasDEK {
		return dst, true, nil
	}
	aead, err := j.aead(m.kek, m.wrapped, bound)
	if err != nil {
		return dst, false, err
	}
	s.aad = appendAAD(s.aad[:0], m.fixed, j.topic, bound, r.KeyField)
	s.nonce = datakey.Nonce(m.iv)
	if _, err := aead.Open(dst[ptAt:ptAt], s.nonce[:], sealed, s.aad); err != nil {
		return dst, false, errAuth
	}
	if sealedHeaders {
		if err := checkTail(dst[ptAt:]); err != nil {
			return dst, false, err
		}
	}
	return dst, true, nil
}

// aead returns the AEAD of a record's DEK.
// bound says the record was sealed bound to its topic, and so was its DEK
// wrapped.
func (j *opener) aead(kek, wrapped []byte, bound bool) (cipher.AEAD, error) {
	s := j.s
	s.cacheKey = datakey.AppendOpenerKey(s.cacheKey[:0], kek, wrapped)
	if j.lastAEAD != nil && bytes.Equal(s.cacheKey, s.lastDEK) {
		return j.lastAEAD, nil
	}
	a, err := j.f.opens.GetBound(j.ctx, s.cacheKey, kek, wrapped, j.f.binding(j.topic, bound))
	if err != nil {
		return nil, err
	}
	s.lastDEK = append(s.lastDEK[:0], s.cacheKey...)
	j.lastAEAD = a
	return a, nil
}

// unencrypted handles a record without a marker: as it came, or an error,
// as unencrypted_on_fetch says.
func (j *opener) unencrypted(dst, raw []byte) ([]byte, bool, error) {
	if j.f.rejectUnencrypted {
		return dst, false, errUnencrypted
	}
	return append(dst, raw...), false, nil
}

// checkTail checks that decrypted bytes are a well-formed record tail:
// value, header count, headers, and nothing after. They were authenticated,
// so only a sealer with the key could have made them otherwise; still,
// nothing malformed is handed on.
func checkTail(b []byte) error {
	_, _, p, err := recordbatch.ReadBytes(b, 0)
	if err != nil {
		return fmt.Errorf("%w: sealed value: %w", recordbatch.ErrBadRecord, err)
	}
	hc, w := binary.Varint(b[p:])
	if w <= 0 || hc < 0 || hc > int64(len(b)) {
		return fmt.Errorf("%w: sealed header count", recordbatch.ErrBadRecord)
	}
	hs := b[p+w:]
	for range hc {
		if _, hs, err = recordbatch.NextHeader(hs); err != nil {
			return err
		}
	}
	if len(hs) != 0 {
		return fmt.Errorf("%w: bytes after the sealed headers", recordbatch.ErrBadRecord)
	}
	return nil
}
