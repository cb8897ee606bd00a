package encryption

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// codec is a record batch's compression codec (attributes bits 0-2).
type codec uint8

const (
	codecNone codec = iota
	codecGzip
	codecSnappy
	codecLz4
	codecZstd
)

func (c codec) String() string {
	switch c {
	case codecNone:
		return "none"
	case codecGzip:
		return "gzip"
	case codecSnappy:
		return "snappy"
	case codecLz4:
		return "lz4"
	case codecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// Snappy comes in two framings. librdkafka and franz-go's one-shot path write
// a raw snappy block; the Java client writes the xerial (snappy-java stream)
// framing: an 8-byte magic, two big-endian int32s (version 1, compatible
// version 1), then blocks of a big-endian int32 length and a raw snappy
// block. A batch is re-encoded in the framing it arrived in.
var (
	xerialMagic  = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
)

// xerialBlock is the uncompressed size of one xerial block, as the Java
// client writes them.
const xerialBlock = 32 << 10

// isXerial reports whether a snappy payload uses the xerial framing.
func isXerial(src []byte) bool {
	return len(src) >= len(xerialHeader) && bytes.Equal(src[:len(xerialMagic)], xerialMagic)
}

// codecs compresses and decompresses record batches with bounded memory.
// One value serves a whole filter; every method is safe for concurrent use.
type codecs struct {
	max int // the most a batch may decompress to

	gzipR, gzipW, lz4R, lz4W sync.Pool

	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
}

func newCodecs(max int) *codecs {
	c := &codecs{max: max}
	c.gzipR.New = func() any { return new(gzip.Reader) }
	// The fastest level of each codec: on the produce path most of
	// what is compressed is ciphertext, which no level can shrink, and
	// trying harder only costs CPU.
	c.gzipW.New = func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w }
	c.lz4R.New = func() any { return lz4.NewReader(nil) }
	c.lz4W.New = func() any {
		// 64 KiB blocks and no content checksum, as the Java client
		// writes them: a small batch does not borrow a 4 MiB block
		// buffer, and the batch CRC already covers the bytes.
		w := lz4.NewWriter(nil)
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
		return w
	}
	return c
}

// zstdCodec makes the zstd encoder and decoder on first use: they hold
// sizeable tables, and most filters never see a zstd batch. Both are safe
// for concurrent EncodeAll and DecodeAll calls.
func (c *codecs) zstdCodec() (*zstd.Encoder, *zstd.Decoder, error) {
	c.zstdOnce.Do(func() {
		n := runtime.GOMAXPROCS(0)
		c.zstdEnc, c.zstdErr = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(n),
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(1<<20),
			zstd.WithZeroFrames(true))
		if c.zstdErr != nil {
			return
		}
		c.zstdDec, c.zstdErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(n),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(c.max)))
	})
	return c.zstdEnc, c.zstdDec, c.zstdErr
}

// decompress appends src, decompressed with k, to dst. It fails with
// errTooLarge rather than produce more than c.max bytes.
func (c *codecs) decompress(dst []byte, k codec, src []byte) ([]byte, error) {
	switch k {
	case codecNone:
		return append(dst, src...), nil
	case codecGzip:
		r := c.gzipR.Get().(*gzip.Reader)
		defer c.gzipR.Put(r)
		if err := r.Reset(bytes.NewReader(src)); err != nil {
			return dst, fmt.Errorf("%w: gzip: %w", errCodec, err)
		}
		return c.readAll(dst, r, "gzip")
	case codecLz4:
		r := c.lz4R.Get().(*lz4.Reader)
		defer c.lz4R.Put(r)
		r.Reset(bytes.NewReader(src))
		return c.readAll(dst, r, "lz4")
	case codecSnappy:
		if isXerial(src) {
			return c.unxerial(dst, src)
		}
		return c.unsnappy(dst, src)
	case codecZstd:
		_, dec, err := c.zstdCodec()
		if err != nil {
			return dst, err
		}
		out, err := dec.DecodeAll(src, dst)
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded):
			return dst, errTooLarge
		case err != nil:
			return dst, fmt.Errorf("%w: zstd: %w", errCodec, err)
		}
		return out, nil
	}
	return dst, errUnknownCodec
}

// readAll appends everything r yields to dst, up to c.max bytes.
func (c *codecs) readAll(dst []byte, r io.Reader, name string) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, max(4<<10, len(dst)-start))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > c.max {
			return dst[:start], errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], fmt.Errorf("%w: %s: %w", errCodec, name, err)
		}
	}
}

func (c *codecs) unsnappy(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy: %w", errCodec, err)
	}
	if n > c.max {
		return dst, errTooLarge
	}
	if n == 0 {
		return dst, nil
	}
	dst, at := grow(dst, n)
	out, err := s2.Decode(dst[at:], src)
	if err != nil {
		return dst[:at], fmt.Errorf("%w: snappy: %w", errCodec, err)
	}
	if len(out) != n || &out[0] != &dst[at] {
		return dst[:at], fmt.Errorf("%w: snappy: block decodes to %d bytes, it declared %d", errCodec, len(out), n)
	}
	return dst, nil
}

func (c *codecs) unxerial(dst, src []byte) ([]byte, error) {
	start := len(dst)
	src = src[len(xerialHeader):]
	for len(src) > 0 {
		if len(src) < 4 {
			return dst[:start], fmt.Errorf("%w: snappy: xerial block length cut short", errCodec)
		}
		n := int64(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n > int64(len(src)) {
			return dst[:start], fmt.Errorf("%w: snappy: xerial block of %d bytes overruns the data", errCodec, n)
		}
		block := src[:n]
		src = src[n:]
		if len(block) == 0 {
			continue
		}
		l, err := s2.DecodedLen(block)
		if err != nil {
			return dst[:start], fmt.Errorf("%w: snappy: %w", errCodec, err)
		}
		if len(dst)-start+l > c.max {
			return dst[:start], errTooLarge
		}
		if dst, err = c.unsnappy(dst, block); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// appender is an io.Writer that appends to a slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// compress appends src, compressed with k, to dst. xerial chooses the
// snappy framing.
func (c *codecs) compress(dst []byte, k codec, src []byte, xerial bool) ([]byte, error) {
	switch k {
	case codecNone:
		return append(dst, src...), nil
	case codecGzip:
		w := c.gzipW.Get().(*gzip.Writer)
		defer c.gzipW.Put(w)
		a := appender{b: dst}
		w.Reset(&a)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("compressing with gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("compressing with gzip: %w", err)
		}
		w.Reset(io.Discard) // let go of dst
		return a.b, nil
	case codecLz4:
		w := c.lz4W.Get().(*lz4.Writer)
		defer c.lz4W.Put(w)
		a := appender{b: dst}
		w.Reset(&a)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("compressing with lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("compressing with lz4: %w", err)
		}
		w.Reset(io.Discard) // let go of dst
		return a.b, nil
	case codecSnappy:
		if !xerial {
			return appendSnappy(dst, src), nil
		}
		dst = append(dst, xerialHeader...)
		for len(src) > 0 {
			n := min(len(src), xerialBlock)
			var at int
			dst, at = grow(dst, 4)
			dst = appendSnappy(dst, src[:n])
			binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
			src = src[n:]
		}
		return dst, nil
	case codecZstd:
		enc, _, err := c.zstdCodec()
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, errUnknownCodec
}

// compressBound is room enough for n bytes compressed with k when they do
// not compress, as ciphertext does not: every codec then stores them with
// a small framing overhead, at most snappy's n/6 (its bound, which its
// encoder also needs as working room).
func compressBound(k codec, n int) int {
	if k == codecSnappy {
		return s2.MaxEncodedLen(n) + len(xerialHeader) + 4*(n/xerialBlock+1)
	}
	return n + n/128 + 256
}

// appendSnappy appends src as one raw snappy block.
func appendSnappy(dst, src []byte) []byte {
	dst, at := grow(dst, s2.MaxEncodedLen(len(src)))
	out := s2.EncodeSnappy(dst[at:], src)
	return dst[:at+len(out)]
}
