package fieldencryption

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms/datakey"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// scratch is the working memory of one partition's worth of records. It is
// pooled; what goes to the proxy is always freshly allocated.
type scratch struct {
	in, out         []byte
	found           [2]fieldpath.Found
	m               marker
	keks            []markerKEK
	fields          []markerField
	deks            []*datakey.DEK
	base            []uint64
	fieldOf         [2][]int
	counts, occ     []int
	marker          []byte
	aad, ad, sealed []byte
	key, value      []byte
	cacheKey        []byte
	opened          []byte
	// aeads are the AEADs of the DEKs of the record at hand's marker,
	// by KEK index.
	aeads []cipher.AEAD
	// lastAEAD is the AEAD of the DEK whose opener key is lastDEK: the
	// last one the opener looked up.
	lastAEAD cipher.AEAD
	lastDEK  []byte
	// rec is the record at hand: here rather than on the stack, where
	// handing it to a recordFunc would move it to the heap.
	rec recordbatch.Record
	// nonce likewise: an interface call would move it to the heap.
	nonce [datakey.NonceLen]byte
	// left is how many records of the batch at hand are still to come,
	// the current one included.
	left int
	// held are IV counters reserved for the records still to come.
	held []heldIVs
}

// heldIVs are IV counters of a DEK of kek reserved ahead: taking them from
// the ring once per batch rather than once per record keeps the ring's
// lock out of the per-record path.
type heldIVs struct {
	kek  string
	d    *datakey.DEK
	next uint64
	left int
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// keepScratch is the largest buffer a scratch keeps when it goes back to
// the pool.
const keepScratch = 4 << 20

func getScratch() *scratch { return scratches.Get().(*scratch) }

func putScratch(s *scratch) {
	clear(s.held) // reserved counters are not carried over: each partition starts afresh
	s.held = s.held[:0]
	s.lastAEAD = nil
	clear(s.aeads) // no key is kept alive by the pool
	s.aeads = s.aeads[:0]
	for _, b := range []*[]byte{&s.in, &s.out, &s.marker, &s.aad, &s.ad, &s.sealed, &s.key, &s.value, &s.cacheKey, &s.opened, &s.lastDEK} {
		if cap(*b) > keepScratch {
			*b = nil
		} else {
			*b = (*b)[:0]
		}
	}
	scratches.Put(s)
}

// recordFunc appends r, transformed, to dst (raw is r as it came) and
// reports whether it changed it.
type recordFunc func(dst []byte, r *recordbatch.Record, raw []byte) ([]byte, bool, error)

// recordError says which record of a batch could not be processed.
type recordError struct {
	offset int64 // base offset + offset delta; in a Produce request, the delta alone
	err    error
}

func (e *recordError) Error() string { return fmt.Sprintf("record at offset %d: %v", e.offset, e.err) }
func (e *recordError) Unwrap() error { return e.err }

// rewrite appends the batches of in to dst with every record passed
// through fn. A batch none of whose records changed is appended exactly as
// it came; a changed one is re-framed (and recompressed with its codec).
// On error it returns what it appended before the failing batch.
// fetched is set for a fetched partition: a partial batch at the end, as a
// fetch may carry one, is dropped, and legacy messages (magic 0 and 1),
// which cannot carry the marker and so hold no encrypted field, are
// appended as they came.
func rewrite(ctx context.Context, codecs *recordbatch.Codecs, s *scratch, dst, in []byte, fetched bool, fn recordFunc) ([]byte, bool, error) {
	changed := false
	for rest := in; len(rest) > 0; {
		batch, next, err := recordbatch.Next(rest)
		if fetched && errors.Is(err, recordbatch.ErrTruncated) {
			break
		}
		if err != nil {
			return dst, changed, err
		}
		if fetched && recordbatch.Magic(batch) < 2 {
			dst = append(dst, batch...)
			rest = next
			continue
		}
		start := len(dst)
		var c bool
		if dst, c, err = rewriteBatch(ctx, codecs, s, dst, batch, fn); err != nil {
			return dst[:start], changed, err
		}
		changed = changed || c
		rest = next
	}
	return dst, changed, nil
}

func rewriteBatch(ctx context.Context, codecs *recordbatch.Codecs, s *scratch, dst, batch []byte, fn recordFunc) ([]byte, bool, error) {
	base := recordbatch.BaseOffset(batch)
	if err := recordbatch.Check(batch); err != nil {
		if errors.Is(err, recordbatch.ErrOldFormat) {
			err = fmt.Errorf("%w, which cannot carry the field-encryption marker", err)
		}
		return dst, false, &recordError{offset: base, err: err}
	}
	if recordbatch.IsControl(batch) {
		return append(dst, batch...), false, nil
	}
	k := recordbatch.CodecOf(batch)
	if k > recordbatch.Zstd {
		return dst, false, &recordError{offset: base, err: recordbatch.ErrUnknownCodec}
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
		dst, changed, err = eachRecord(dst, recs, n, base, s, fn)
	} else {
		var held int64
		if s.in, held, err = codecs.Decompress(ctx, s.in[:0], k, recs); err != nil {
			return dst[:start], false, &recordError{offset: base, err: err}
		}
		defer codecs.Release(held)
		s.out, changed, err = eachRecord(s.out[:0], s.in, n, base, s, fn)
		if err == nil && changed {
			dst, err = codecs.Compress(dst, k, s.out, k == recordbatch.Snappy && recordbatch.IsXerial(recs))
		}
	}
	if err != nil {
		return dst[:start], false, err
	}
	if !changed {
		return append(dst[:start], batch...), false, nil
	}
	recordbatch.Finish(dst, start)
	return dst, true, nil
}

// eachRecord appends the n records in recs, each through fn, to dst.
// s.left tells fn how many records of the batch are left, its own
// included.
func eachRecord(dst, recs []byte, n int, base int64, s *scratch, fn recordFunc) ([]byte, bool, error) {
	changed := false
	r := &s.rec
	for i := range n {
		s.left = n - i
		var (
			rest []byte
			err  error
		)
		*r, rest, err = recordbatch.ParseRecord(recs)
		if err != nil {
			return dst, false, &recordError{offset: base, err: err}
		}
		var c bool
		if dst, c, err = fn(dst, r, recs[:len(recs)-len(rest)]); err != nil {
			return dst, false, &recordError{offset: base + int64(r.OffsetDelta), err: err}
		}
		changed = changed || c
		recs = rest
	}
	if len(recs) != 0 {
		return dst, false, &recordError{offset: base, err: recordbatch.ErrTrailingBytes}
	}
	return dst, changed, nil
}
