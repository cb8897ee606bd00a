package recordbatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/membudget"
)

// testRecord is a record to put in a test batch.
type testRecord struct {
	key, value []byte // nil is null
	headers    []kmsg.Header
}

// rawRecords encodes records as a batch holds them before compression.
func rawRecords(recs ...testRecord) []byte {
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	return raw
}

// batchOf wraps a (perhaps compressed) payload of n records in a batch
// header with codec k, with its length and CRC filled in.
func batchOf(k Codec, payload []byte, n int) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(k), LastOffsetDelta: int32(n - 1),
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
		ProducerID: 7, ProducerEpoch: 1, FirstSequence: 3, NumRecords: int32(n), Records: payload,
	}
	out := b.AppendTo(nil)
	Finish(out, 0)
	return out
}

func testCodecs() *Codecs {
	return NewCodecs(DefaultMaxBatchBytes, DefaultMaxCompressionRatio, membudget.New(DefaultDecompressionBudget), time.Second)
}

func TestReadBatchesAndRecords(t *testing.T) {
	recs := []testRecord{
		{key: []byte("k0"), value: []byte(`{"a":1}`), headers: []kmsg.Header{{Key: "h", Value: []byte("v")}, {Key: "n"}}},
		{key: nil, value: nil},                // keyless tombstone
		{key: []byte{}, value: []byte{}},      // empty, not null
		{key: []byte("k3"), value: []byte{0}}, // one byte
	}
	c := testCodecs()
	for _, k := range []Codec{Uncompressed, Gzip, Snappy, LZ4, Zstd} {
		t.Run(k.String(), func(t *testing.T) {
			raw := rawRecords(recs...)
			payload, err := c.Compress(nil, k, raw, false)
			if err != nil {
				t.Fatal(err)
			}
			two := append(batchOf(k, payload, len(recs)), batchOf(Uncompressed, rawRecords(recs[0]), 1)...)
			batch, rest, err := Next(two)
			if err != nil || len(rest) == 0 {
				t.Fatalf("Next: %v, %d bytes left", err, len(rest))
			}
			if err := Check(batch); err != nil {
				t.Fatalf("Check: %v", err)
			}
			if CodecOf(batch) != k || Count(batch) != len(recs) || IsControl(batch) || Magic(batch) != 2 {
				t.Fatalf("header: codec %v count %d control %v", CodecOf(batch), Count(batch), IsControl(batch))
			}
			out, held, err := c.Decompress(context.Background(), nil, k, batch[HeaderLen:])
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release(held)
			if !bytes.Equal(out, raw) {
				t.Fatalf("decompressed %d bytes, want the %d compressed", len(out), len(raw))
			}
			for i, want := range recs {
				r, next, err := ParseRecord(out)
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if int(r.OffsetDelta) != i || !bytes.Equal(r.Key, want.key) || r.KeyNull != (want.key == nil) ||
					!bytes.Equal(r.Value, want.value) || r.ValueNull != (want.value == nil) || r.HeaderCount != len(want.headers) {
					t.Errorf("record %d: %+v, want %+v", i, r, want)
				}
				out = next
			}
			if len(out) != 0 {
				t.Errorf("%d bytes after the last record", len(out))
			}
			if second, rest, err := Next(rest); err != nil || len(rest) != 0 || Check(second) != nil {
				t.Errorf("second batch: %v, %d bytes left", err, len(rest))
			}
		})
	}
}

func TestCheckRefuses(t *testing.T) {
	good := batchOf(Uncompressed, rawRecords(testRecord{value: []byte("v")}), 1)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"legacy magic", func(b []byte) []byte { b[offMagic] = 1; return b }, ErrOldFormat},
		{"unknown magic", func(b []byte) []byte { b[offMagic] = 3; return b }, ErrBadBatch},
		{"bad crc", func(b []byte) []byte { b[offCRC] ^= 1; return b }, ErrBadCRC},
		{"negative count", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offCount:], 0x80000000)
			binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
			return b
		}, ErrBadBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(append([]byte(nil), good...))
			if err := Check(b); !errors.Is(err, tc.want) {
				t.Errorf("Check: %v, want %v", err, tc.want)
			}
		})
	}
	if _, _, err := Next(good[:len(good)-1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("Next of a cut batch: %v, want ErrTruncated", err)
	}
}

// zstdStreamed compresses raw as a streaming zstd writer does, the Java
// client's way: the frame does not state its content size.
func zstdStreamed(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The streamed zstd decoders the codecs keep are few, and none with a
// large window.
func TestZstdDecoderPoolBounded(t *testing.T) {
	c := testCodecs()
	var payloads [][]byte
	for i := range 16 {
		payloads = append(payloads, zstdStreamed(t, rawRecords(testRecord{value: bytes.Repeat([]byte{byte(i), 'x', 'y'}, 4<<10)})))
	}
	var wg sync.WaitGroup
	for _, payload := range payloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, held, err := c.Decompress(context.Background(), nil, Zstd, payload)
			if err != nil || len(out) == 0 {
				t.Error(err)
			}
			c.Release(held)
		}()
	}
	wg.Wait()
	if n := len(c.zstdStream); n > zstdStreamKeep {
		t.Errorf("%d decoders kept, at most %d", n, zstdStreamKeep)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{MaxCompressionRatio: 1}, "max_compression_ratio:"},
		{Limits{MaxBatchBytes: 1000}, "max_batch_bytes: 1000 is under 1 MiB"},
		{Limits{DecompressionBudget: -1}, "decompression_budget: -1 is negative"},
		{Limits{MaxBatchBytes: 1 << 20, DecompressionBudget: 8 << 20}, "raise it to at least 9437184"},
	} {
		if err := tc.l.Validate(); err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	if d := (Limits{}).WithDefaults(); d.MaxBatchBytes != DefaultMaxBatchBytes || d.MaxCompressionRatio != DefaultMaxCompressionRatio || d.DecompressionBudget != DefaultDecompressionBudget {
		t.Errorf("defaults: %+v", d)
	}
}

// FuzzRead reads arbitrary bytes as a Produce request's records: whatever
// they hold, reading never panics, never reads past its input, and a record
// that parses lies within its batch.
func FuzzRead(f *testing.F) {
	c := NewCodecs(4<<20, 100, membudget.New(64<<20), time.Second)
	for _, k := range []Codec{Uncompressed, Gzip, Snappy, LZ4, Zstd} {
		raw := rawRecords(testRecord{key: []byte("k"), value: []byte("value"), headers: []kmsg.Header{{Key: "h", Value: []byte("1")}}}, testRecord{})
		payload, _ := c.Compress(nil, k, raw, false)
		f.Add(batchOf(k, payload, 2))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for rest := b; len(rest) > 0; {
			batch, next, err := Next(rest)
			if err != nil {
				return
			}
			rest = next
			if Check(batch) != nil || IsControl(batch) {
				continue
			}
			recs, held, err := c.Decompress(context.Background(), nil, CodecOf(batch), batch[HeaderLen:])
			if err != nil {
				continue
			}
			for range Count(batch) {
				r, after, err := ParseRecord(recs)
				if err != nil {
					break
				}
				if len(after) >= len(recs) || len(r.Value) > len(recs) || len(r.Key) > len(recs) {
					t.Fatalf("a record of %d bytes claims more than its input", len(recs)-len(after))
				}
				recs = after
			}
			c.Release(held)
		}
		if c.Budget().InUse() != 0 {
			t.Fatalf("%d bytes of the budget still held", c.Budget().InUse())
		}
	})
}

// Each batch error gets the code a broker would answer a producer with;
// other errors are left to the filter.
func TestProduceCode(t *testing.T) {
	for err, want := range map[error]*kerr.Error{
		ErrOldFormat:                             kerr.UnsupportedForMessageFormat,
		ErrTooLarge:                              kerr.MessageTooLarge,
		ErrBadCRC:                                kerr.CorruptMessage,
		fmt.Errorf("%w: waited", ErrBusy):        kerr.KafkaStorageError,
		fmt.Errorf("record 3: %w", ErrBadRecord): kerr.InvalidRecord,
		ErrRatio:                                 kerr.InvalidRecord,
		ErrTrailingBytes:                         kerr.InvalidRecord,
		errors.New("something else"):             nil,
	} {
		if got := ProduceCode(err); got != want {
			t.Errorf("ProduceCode(%v) = %v, want %v", err, got, want)
		}
	}
}
