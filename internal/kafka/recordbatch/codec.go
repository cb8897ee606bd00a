package recordbatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/straitgw/strait/internal/kafka/membudget"
)

// Codec is a record batch's compression codec (attributes bits 0-2).
type Codec uint8

// The codecs, by their attribute values.
const (
	Uncompressed Codec = iota
	Gzip
	Snappy
	LZ4
	Zstd
)

func (c Codec) String() string {
	switch c {
	case Uncompressed:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
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

// IsXerial reports whether a snappy payload uses the xerial framing.
func IsXerial(src []byte) bool {
	return len(src) >= len(xerialHeader) && bytes.Equal(src[:len(xerialMagic)], xerialMagic)
}

// Codecs compresses and decompresses record batches with bounded memory.
// One value serves a whole filter; every method is safe for concurrent use.
//
// Decompression is where a small request turns into a lot of memory, so it
// is bounded three ways: no batch decompresses to more than max (its
// max_batch_bytes), nor to more than ratio times its compressed size (past
// a floor); and the bytes every batch of the process holds decompressed at
// once come out of budget, shared by all connections and all filters. Each
// limit is checked as the output grows, so a bomb is stopped at the limit
// rather than after it has been inflated whole.
type Codecs struct {
	max    int // the most a batch may decompress to
	ratio  int // the most a batch may grow by, past ratioFloor
	budget *membudget.Budget
	wait   time.Duration // how long a batch waits for budget before it is refused

	gzipR, gzipW, lz4R, lz4W sync.Pool

	// zstdStream keeps a few streaming decoders, for frames that do not
	// state their size (the Java client writes such frames). Each holds a
	// window-sized ring buffer, so only decoders whose ring is small are
	// kept, and only zstdStreamKeep of them.
	zstdStream chan *zstd.Decoder

	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
}

// Decompression limits and the working memory of each decoder, which a
// batch reserves from the budget with its output.
const (
	// ratioFloor is what any batch may decompress to whatever its
	// ratio: a batch of at most 1 MiB is no bomb, and a small batch of
	// repetitive records (a run of equal values, say) legitimately
	// compresses past any ratio.
	ratioFloor = 1 << 20
	// gzipState is a gzip decoder's working memory: its 32 KiB window
	// and Huffman tables.
	gzipState = 64 << 10
	// MaxDecoderState is the most working memory a decoder reserves
	// besides its output, an lz4 decoder's: a block buffer and a block
	// of compressed input, each up to the format's largest block, 4 MiB.
	// A frame's header says its own block size. A decompression budget
	// must have room for it and the largest batch.
	MaxDecoderState = 2 * (4 << 20)
	// zstdStreamState is a streaming zstd decoder's besides its window:
	// the blocks around the ring and the block decoder's buffers.
	zstdStreamState = 512 << 10
	// zstdKeepWindow and zstdStreamKeep bound what the pool of
	// streaming zstd decoders retains: the default levels of Kafka
	// clients write windows of 2 MiB or less.
	zstdKeepWindow = 4 << 20
	zstdStreamKeep = 4
)

// gatewayBudget is the decompression budget of the process, which every
// filter and connection draws on: the memory it bounds
// is the process's, however many virtual clusters share it.
var gatewayBudget = newGatewayBudget()

// After a burst of big batches the process keeps the heap the burst grew
// for minutes: the GC's goal stays at the burst's size until its next
// cycle, which a quiet gateway starts only when the runtime forces one
// every 2 minutes, and memory goes back to the OS only down to that goal
// (16 batches of 64 MiB left 1.4 GB resident for 4 minutes). So once the
// budget has held at least reclaimMin and then nothing for reclaimDelay,
// the freed memory goes back at once: a forced collection, cheap when
// little is live, at most once per reclaimEvery, so that a steady stream
// of big batches does not pay for one each.
const (
	reclaimMin   = 16 << 20
	reclaimDelay = time.Second
	reclaimEvery = 30 * time.Second
)

// reclaim hands freed memory back to the OS; tests replace it.
var reclaim = debug.FreeOSMemory

func newGatewayBudget() *membudget.Budget {
	b := membudget.New(0)
	b.OnIdle(reclaimMin, reclaimDelay, reclaimEvery, func() { reclaim() })
	return b
}

// ProcessBudget sizes the process's budget for a filter configured with
// size: the budget is the largest any filter asks for.
func ProcessBudget(size int) *membudget.Budget {
	gatewayBudget.GrowTo(int64(size))
	return gatewayBudget
}

// BudgetWait is how long a batch waits for its share of the budget before
// it is refused. A batch takes milliseconds to process, so a budget spent
// for this long means the gateway is overloaded; well under the 30 s
// request timeout of Kafka clients, the refusal reaches the client while
// it still waits, and it retries.
const BudgetWait = 5 * time.Second

// NewCodecs returns codecs that decompress a batch to at most max bytes,
// and to at most ratio times its compressed size past 1 MiB, holding the
// decompressed bytes against budget and waiting up to wait for them.
func NewCodecs(max, ratio int, budget *membudget.Budget, wait time.Duration) *Codecs {
	c := &Codecs{max: max, ratio: ratio, budget: budget, wait: wait, zstdStream: make(chan *zstd.Decoder, zstdStreamKeep)}
	c.gzipR.New = func() any { return new(gzip.Reader) }
	// The fastest level of each codec: what filters compress again is
	// mostly ciphertext, which no level can shrink, and trying harder
	// only costs CPU.
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
// for concurrent EncodeAll and DecodeAll calls. The decoder serves frames
// that state their size, which is checked before they are decoded; it
// decodes straight into the output, with no window of its own.
func (c *Codecs) zstdCodec() (*zstd.Encoder, *zstd.Decoder, error) {
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

// Limit is the most src may decompress to, and whether the ratio rather
// than max_batch_bytes sets it.
func (c *Codecs) Limit(src int) (n int, byRatio bool) {
	r := max(int64(c.ratio)*int64(src), ratioFloor)
	if r < int64(c.max) {
		return int(r), true
	}
	return c.max, false
}

// overLimit is the error of a batch of src compressed bytes that
// decompresses to more than limit.
func (c *Codecs) overLimit(k Codec, src, limit int, byRatio bool) error {
	if byRatio {
		return fmt.Errorf("%w: %s: %d compressed bytes decompress to more than %d, over %d times their size",
			ErrRatio, k, src, limit, c.ratio)
	}
	return ErrTooLarge
}

// Decompress appends src, decompressed with k, to dst. It first reserves,
// from the budget, the most the batch may decompress to and its decoder's
// working memory, waiting up to c.wait; once done it keeps only what it
// produced. It returns how many bytes of the budget it holds: the caller
// hands them to Release once done with the decompressed bytes. On error
// it holds nothing.
//
// It fails with ErrTooLarge past max_batch_bytes, ErrRatio past
// max_compression_ratio, and ErrBusy (wrapping context.DeadlineExceeded) when the budget
// stays spent.
func (c *Codecs) Decompress(ctx context.Context, dst []byte, k Codec, src []byte) (out []byte, held int64, err error) {
	if k == Uncompressed {
		return append(dst, src...), 0, nil
	}
	if k > Zstd {
		return dst, 0, ErrUnknownCodec
	}
	limit, byRatio := c.Limit(len(src))
	over := func() error { return c.overLimit(k, len(src), limit, byRatio) }

	// What the decoder needs besides its output, and for snappy, whose
	// blocks state their size, the exact output.
	var (
		state  int
		exact  = -1
		frames []zstdFrame
	)
	switch k {
	case Gzip:
		state = gzipState
	case LZ4:
		block, err := lz4Frame(src)
		if err != nil {
			return dst, 0, err
		}
		state = 2 * block
	case Snappy:
		if exact, err = snappyLen(src); err != nil {
			return dst, 0, err
		}
		if exact > limit {
			return dst, 0, over()
		}
	case Zstd:
		// Kafka clients write one frame per batch: room for it here
		// keeps the frame list off the heap.
		var room [2]zstdFrame
		if frames, err = zstdFrames(room[:0], src, c.max); err != nil {
			return dst, 0, err
		}
		for _, f := range frames {
			if f.size < 0 {
				state = max(state, f.window+zstdStreamState)
			}
		}
	}
	reserve := int64(limit + state)
	if exact >= 0 {
		reserve = int64(exact)
	}
	if err := c.acquire(ctx, reserve); err != nil {
		return dst, 0, err
	}
	start := len(dst)
	switch k {
	case Gzip:
		out, err = c.gunzip(dst, src, limit, over)
	case LZ4:
		r := c.lz4R.Get().(*lz4.Reader)
		r.Reset(bytes.NewReader(src))
		out, err = readAll(dst, r, limit, k, over)
		r.Reset(nil)
		c.lz4R.Put(r)
	case Snappy:
		if IsXerial(src) {
			out, err = c.unxerial(dst, src)
		} else {
			out, err = c.unsnappy(dst, src)
		}
	case Zstd:
		out, err = c.unzstd(dst, frames, limit, over)
	}
	if err != nil {
		c.Release(reserve)
		return dst[:start], 0, err
	}
	held = min(reserve, int64(len(out)-start))
	c.Release(reserve - held)
	return out, held, nil
}

// acquire reserves n bytes of the budget, waiting up to c.wait.
func (c *Codecs) acquire(ctx context.Context, n int64) error {
	if c.budget.TryAcquire(n) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	err := c.budget.Acquire(wctx, n)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, membudget.ErrOverSize):
		return fmt.Errorf("%w: with its decoder it needs %d bytes, more than the whole decompression_budget of %d: raise decompression_budget",
			ErrTooLarge, n, c.budget.Size())
	case ctx.Err() != nil:
		return ctx.Err() // the connection ended
	}
	// Wrapping DeadlineExceeded lets filters answer with a retriable
	// error: the same batch goes through once the budget frees up.
	return fmt.Errorf("%w: waited %s for %d bytes of the %d-byte decompression_budget, which every connection shares: %w",
		ErrBusy, c.wait, n, c.budget.Size(), context.DeadlineExceeded)
}

// Release gives back bytes Decompress held.
func (c *Codecs) Release(n int64) { c.budget.Release(n) }

// Budget is the budget the codecs draw on.
func (c *Codecs) Budget() *membudget.Budget { return c.budget }

func (c *Codecs) gunzip(dst, src []byte, limit int, over func() error) ([]byte, error) {
	r := c.gzipR.Get().(*gzip.Reader)
	defer c.gzipR.Put(r)
	if err := r.Reset(bytes.NewReader(src)); err != nil {
		return dst, fmt.Errorf("%w: gzip: %w", ErrCodec, err)
	}
	// A gzip stream ends with its size (modulo 4 GiB): room for that,
	// within the limit, saves growing the output as it is read. A false
	// size costs nothing more, since readAll checks the limit anyway.
	if len(src) >= 18 {
		if n := int(binary.LittleEndian.Uint32(src[len(src)-4:])); n <= limit {
			dst = slices.Grow(dst, n+1)
		}
	}
	return readAll(dst, r, limit, Gzip, over)
}

// readAll appends everything r yields to dst, failing with over() as soon
// as that is more than limit bytes. The output grows by doubling up to one
// byte past the limit, the byte that shows a batch is over it.
func readAll(dst []byte, r io.Reader, limit int, k Codec, over func() error) ([]byte, error) {
	start := len(dst)
	end := start + limit + 1
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(4<<10, len(dst)-start), end-len(dst)))
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), end)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], over()
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], fmt.Errorf("%w: %s: %w", ErrCodec, k, err)
		}
	}
}

// lz4Frame checks that src is one lz4 frame, as every Kafka client writes
// a batch and as brokers read one, reading only its headers, and returns
// the frame's block size. One frame, not the several a general lz4 reader
// would go on to, so that the decoder's memory is what this frame's header
// says.
func lz4Frame(src []byte) (block int, err error) {
	const magic = 0x184D2204
	bad := func(why string) error { return fmt.Errorf("%w: lz4: %s", ErrCodec, why) }
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != magic {
		return 0, bad("not an lz4 frame")
	}
	flags, bd := src[4], src[5]
	id := int(bd>>4) & 7
	if id < 4 {
		return 0, bad(fmt.Sprintf("block size id %d is not one of 4 to 7", id))
	}
	block = 1 << (8 + 2*id) // 64 KiB, 256 KiB, 1 MiB or 4 MiB
	p := 6
	if flags&0x08 != 0 { // content size
		p += 8
	}
	if flags&0x01 != 0 { // dictionary id
		p += 4
	}
	p++ // header checksum
	for {
		if len(src)-p < 4 {
			return 0, bad("frame cut short")
		}
		n := int64(binary.LittleEndian.Uint32(src[p:]))
		p += 4
		if n == 0 { // end mark
			break
		}
		n &= 0x7fffffff
		if flags&0x10 != 0 { // block checksums
			n += 4
		}
		if n > int64(len(src)-p) {
			return 0, bad("block overruns the data")
		}
		p += int(n)
	}
	if flags&0x04 != 0 { // content checksum
		p += 4
	}
	switch {
	case p > len(src):
		return 0, bad("frame cut short")
	case p < len(src):
		return 0, bad(fmt.Sprintf("%d bytes after the frame", len(src)-p))
	}
	return block, nil
}

// snappyLen is what a snappy payload decompresses to, in either framing,
// from the sizes its blocks state; it checks the framing on the way.
func snappyLen(src []byte) (int, error) {
	if !IsXerial(src) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return 0, fmt.Errorf("%w: snappy: %w", ErrCodec, err)
		}
		return n, nil
	}
	total := 0
	for b := src[len(xerialHeader):]; len(b) > 0; {
		if len(b) < 4 {
			return 0, fmt.Errorf("%w: snappy: xerial block length cut short", ErrCodec)
		}
		n := int64(binary.BigEndian.Uint32(b))
		b = b[4:]
		if n > int64(len(b)) {
			return 0, fmt.Errorf("%w: snappy: xerial block of %d bytes overruns the data", ErrCodec, n)
		}
		if n > 0 {
			l, err := s2.DecodedLen(b[:n])
			if err != nil {
				return 0, fmt.Errorf("%w: snappy: %w", ErrCodec, err)
			}
			if total += l; total < 0 || total > math.MaxInt32 {
				return 0, fmt.Errorf("%w: snappy: xerial blocks state more than 2 GiB", ErrCodec)
			}
		}
		b = b[n:]
	}
	return total, nil
}

// unsnappy decodes a raw snappy block, whose stated size snappyLen has
// checked against the limits.
func (c *Codecs) unsnappy(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy: %w", ErrCodec, err)
	}
	if n == 0 {
		return dst, nil
	}
	dst, at := Grow(dst, n)
	out, err := s2.Decode(dst[at:], src)
	if err != nil {
		return dst[:at], fmt.Errorf("%w: snappy: %w", ErrCodec, err)
	}
	if len(out) != n || &out[0] != &dst[at] {
		return dst[:at], fmt.Errorf("%w: snappy: block decodes to %d bytes, it declared %d", ErrCodec, len(out), n)
	}
	return dst, nil
}

// unxerial decodes xerial-framed snappy, whose framing and stated size
// snappyLen has checked.
func (c *Codecs) unxerial(dst, src []byte) ([]byte, error) {
	start := len(dst)
	src = src[len(xerialHeader):]
	for len(src) > 0 {
		n := binary.BigEndian.Uint32(src)
		block := src[4 : 4+n]
		src = src[4+n:]
		if n == 0 {
			continue
		}
		var err error
		if dst, err = c.unsnappy(dst, block); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// zstdFrame is one frame of a zstd payload, as zstdFrames reads it from
// its headers without decoding it.
type zstdFrame struct {
	b      []byte // the whole frame
	size   int    // the content size it states; -1 when it states none
	window int    // the history a streaming decoder keeps for it
}

// zstdFrames appends the frames of a zstd payload to frames, reading their headers and
// block headers only, and drops skippable frames. A frame whose window or
// stated size is over max is refused here, before anything is allocated
// for it.
func zstdFrames(frames []zstdFrame, src []byte, max int) ([]zstdFrame, error) {
	for len(src) > 0 {
		var h zstd.Header
		rest, err := h.DecodeAndStrip(src)
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCodec, err)
		}
		if h.Skippable {
			if int64(h.SkippableSize) > int64(len(rest)) {
				return nil, fmt.Errorf("%w: zstd: skippable frame overruns the data", ErrCodec)
			}
			src = rest[h.SkippableSize:]
			continue
		}
		p := len(src) - len(rest)
		for last := false; !last; {
			if len(src)-p < 3 {
				return nil, fmt.Errorf("%w: zstd: frame cut short", ErrCodec)
			}
			bh := int(src[p]) | int(src[p+1])<<8 | int(src[p+2])<<16
			p += 3
			last = bh&1 != 0
			n := bh >> 3
			switch (bh >> 1) & 3 {
			case 1: // RLE: one byte, repeated
				n = 1
			case 3:
				return nil, fmt.Errorf("%w: zstd: reserved block type", ErrCodec)
			}
			if n > len(src)-p {
				return nil, fmt.Errorf("%w: zstd: block overruns the data", ErrCodec)
			}
			p += n
		}
		if h.HasCheckSum {
			if len(src)-p < 4 {
				return nil, fmt.Errorf("%w: zstd: frame checksum cut short", ErrCodec)
			}
			p += 4
		}
		f := zstdFrame{b: src[:p], size: -1}
		if h.HasFCS {
			if h.FrameContentSize > uint64(max) {
				return nil, fmt.Errorf("%w: zstd: a frame states %d bytes", ErrTooLarge, h.FrameContentSize)
			}
			f.size = int(h.FrameContentSize)
		}
		if h.SingleSegment {
			f.window = f.size
		} else if h.WindowSize > uint64(max) {
			return nil, fmt.Errorf("%w: zstd: a frame's window is %d bytes", ErrTooLarge, h.WindowSize)
		} else {
			f.window = int(h.WindowSize)
		}
		frames = append(frames, f)
		src = src[p:]
	}
	return frames, nil
}

// unzstd decodes frames. A frame that states its size is checked against
// what is left of the limit first, then decoded straight into room made
// for it; one that does not is streamed, with the limit checked as it
// grows.
func (c *Codecs) unzstd(dst []byte, frames []zstdFrame, limit int, over func() error) ([]byte, error) {
	start := len(dst)
	for _, f := range frames {
		left := limit - (len(dst) - start)
		var err error
		if f.size >= 0 {
			if f.size > left {
				return dst[:start], over()
			}
			dst, err = c.zstdAll(dst, f)
		} else {
			dst, err = c.zstdStreamed(dst, f, left, over)
		}
		if err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

func (c *Codecs) zstdAll(dst []byte, f zstdFrame) ([]byte, error) {
	_, dec, err := c.zstdCodec()
	if err != nil {
		return dst, err
	}
	at := len(dst)
	// Room for the stated size and the decoder's overrun, so that it
	// never grows the buffer itself.
	dst = slices.Grow(dst, f.size+64)
	out, err := dec.DecodeAll(f.b, dst)
	switch {
	case err != nil:
		return dst[:at], fmt.Errorf("%w: zstd: %w", ErrCodec, err)
	case len(out)-at != f.size:
		return dst[:at], fmt.Errorf("%w: zstd: frame decodes to %d bytes, it stated %d", ErrCodec, len(out)-at, f.size)
	}
	return out, nil
}

func (c *Codecs) zstdStreamed(dst []byte, f zstdFrame, limit int, over func() error) ([]byte, error) {
	var d *zstd.Decoder
	select {
	case d = <-c.zstdStream:
	default:
		var err error
		d, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // decodes on the caller's goroutine
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(c.max)))
		if err != nil {
			return dst, err
		}
	}
	if err := d.Reset(bytes.NewReader(f.b)); err != nil {
		d.Close()
		return dst, fmt.Errorf("%w: zstd: %w", ErrCodec, err)
	}
	dst, err := readAll(dst, d, limit, Zstd, over)
	_ = d.Reset(nil)
	keep := false
	if f.window <= zstdKeepWindow {
		select {
		case c.zstdStream <- d:
			keep = true
		default:
		}
	}
	if !keep {
		// Its ring would keep a large window's memory.
		d.Close()
	}
	return dst, err
}

// appender is an io.Writer that appends to a slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// Compress appends src, compressed with k, to dst. xerial chooses the
// snappy framing.
func (c *Codecs) Compress(dst []byte, k Codec, src []byte, xerial bool) ([]byte, error) {
	switch k {
	case Uncompressed:
		return append(dst, src...), nil
	case Gzip:
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
	case LZ4:
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
	case Snappy:
		if !xerial {
			return appendSnappy(dst, src), nil
		}
		dst = append(dst, xerialHeader...)
		for len(src) > 0 {
			n := min(len(src), xerialBlock)
			var at int
			dst, at = Grow(dst, 4)
			dst = appendSnappy(dst, src[:n])
			binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
			src = src[n:]
		}
		return dst, nil
	case Zstd:
		enc, _, err := c.zstdCodec()
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, ErrUnknownCodec
}

// CompressBound is room enough for n bytes compressed with k when they do
// not compress, as ciphertext does not: every codec then stores them with
// a small framing overhead, at most snappy's n/6 (its bound, which its
// encoder also needs as working room).
func CompressBound(k Codec, n int) int {
	if k == Snappy {
		return s2.MaxEncodedLen(n) + len(xerialHeader) + 4*(n/xerialBlock+1)
	}
	return n + n/128 + 256
}

// Grow extends b by n bytes and returns it with the position of the new
// bytes, whose contents are undefined: room for a filter to write a batch
// part in place (a decompressed block, a sealed value).
func Grow(b []byte, n int) ([]byte, int) {
	at := len(b)
	if cap(b)-at < n {
		nb := make([]byte, at, 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:at+n], at
}

// appendSnappy appends src as one raw snappy block.
func appendSnappy(dst, src []byte) []byte {
	dst, at := Grow(dst, s2.MaxEncodedLen(len(src)))
	out := s2.EncodeSnappy(dst[at:], src)
	return dst[:at+len(out)]
}
