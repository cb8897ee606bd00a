package encryption

// Decompression bombs and the gateway-wide decompression budget.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/membudget"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/testkit"
)

// Attribute bits of the codecs, as a batch carries them.
const (
	attrGzip = 1
	attrLz4  = 3
	attrZstd = 4
)

// rawRecords encodes records as a batch holds them before compression.
func rawRecords(recs ...rec) []byte {
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	return raw
}

// batchOf wraps an already compressed payload of n records in a batch
// header with codec attribute attr, as a client that compresses its own
// way would send it.
func batchOf(attr int16, payload []byte, n int) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attr, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: payload,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoliTable))
	return out
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
	// Flushed before the end is known, as a stream is, the frame
	// header cannot state the size.
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("the streamed frame states its size (%v): not the case under test", err)
	}
	return buf.Bytes()
}

// bombs are batches of one 16 MiB record of zeros, in every codec that
// compresses zeros past the default ratio, including a zstd frame that
// does not state its size (so it can only be stopped while decoding).
func bombs(t testing.TB) map[string][]byte {
	t.Helper()
	zeros := rec{value: make([]byte, 16<<20)}
	out := map[string][]byte{}
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"gzip", kgo.GzipCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		o := defaultBatchOpts()
		o.codec = c.codec
		out[c.name] = makeBatch(t, o, zeros)
	}
	out["zstd-streamed"] = batchOf(attrZstd, zstdStreamed(t, rawRecords(zeros)), 1)
	return out
}

// logBuffer is a filter.Context whose log lines are kept.
func logBuffer(t testing.TB) (*filter.Context, *testkit.SyncBuffer) {
	c := testCtx(t)
	var buf testkit.SyncBuffer
	c.Log = slog.New(slog.NewTextHandler(&buf, nil))
	return c, &buf
}

// allocated is how many bytes the heap handed out while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A bomb of a few kilobytes that would inflate to 16 MiB (well under
// max_batch_bytes) is refused as soon as it passes max_compression_ratio
// times its size: with INVALID_RECORD, which producers do not retry, a log
// line naming topic, partition and the ratio, and without the gateway ever
// allocating what the bomb inflates to.
func TestProduceBombRefusedByRatio(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	f.codecs = testCodecs(f, membudget.New(DefaultDecompressionBudget), recordbatch.BudgetWait)
	for name, bomb := range bombs(t) {
		t.Run(name, func(t *testing.T) {
			// Once first, so that pooled decoders are not counted.
			runProduce(t, f, testCtx(t), produce(9, -1, map[string]map[int32][]byte{"orders": {3: bomb}}))
			c, logs := logBuffer(t)
			var up *kmsg.ProduceRequest
			var answer *kmsg.ProduceResponse
			n := allocated(func() {
				up, answer = runProduce(t, f, c, produce(9, -1, map[string]map[int32][]byte{"orders": {3: bomb}}))
			})
			if answer == nil || up != nil {
				t.Fatalf("a %d-byte batch that inflates to 16 MiB went upstream", len(bomb))
			}
			p := answer.Topics[0].Partitions[0]
			if p.ErrorCode != kerr.InvalidRecord.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "max_compression_ratio") {
				t.Errorf("error %d %v, want INVALID_RECORD naming max_compression_ratio", p.ErrorCode, p.ErrorMessage)
			}
			if kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Retriable {
				t.Error("a bomb is refused with a retriable error: the producer would send it again and again")
			}
			line := logs.String()
			for _, want := range []string{"topic=orders", "partition=3", "max_compression_ratio", "over 100 times"} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %q: %s", want, line)
				}
			}
			// The limit is 100 times the compressed size, or 1 MiB; the
			// output doubles as it grows towards it, so refusing costs
			// at most about twice the limit, far from 16 MiB and more.
			limit, _ := f.codecs.Limit(len(bomb) - recordbatch.HeaderLen)
			if n > uint64(2*limit+recordbatch.MaxDecoderState+1<<20) && !raceEnabled {
				t.Errorf("refusing the bomb allocated %d bytes; its limit is %d", n, limit)
			}
			if got := f.codecs.Budget().InUse(); got != 0 {
				t.Errorf("%d bytes of the budget still held after the refusal", got)
			}
		})
	}
}

// A bomb stored in a topic (written around the gateway) fails its fetched
// partition instead of inflating in the gateway.
func TestFetchBombFailsPartition(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	f.codecs = testCodecs(f, membudget.New(DefaultDecompressionBudget), recordbatch.BudgetWait)
	c, logs := logBuffer(t)
	resp := fetchResponse(12, map[string][]byte{"orders": bombs(t)["gzip"]})
	runFetch(t, f, c, resp)
	p := fetched(t, resp, "orders")
	if p.ErrorCode != kerr.CorruptMessage.Code || len(p.RecordBatches) != 0 {
		t.Errorf("error %d with %d bytes of records, want CORRUPT_MESSAGE and none", p.ErrorCode, len(p.RecordBatches))
	}
	if line := logs.String(); !strings.Contains(line, "topic=orders") || !strings.Contains(line, "max_compression_ratio") {
		t.Errorf("log line: %s", line)
	}
}

// compressible returns n bytes of text that compress a few times, as real
// payloads do.
func compressible(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	const alphabet = "abcdefghijklmnopqrstuvwxyz {}\":,0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return b
}

// Many connections decompressing at once never hold more than the budget:
// the bytes acquired (not the process's memory, which the GC blurs) peak
// at or under it, every batch still goes through, and everything is given
// back at the end.
func TestBudgetBoundsConcurrentBatches(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", MaxBatchBytes: 1 << 20}, k)
	// Room for two batches at a time: each reserves its 1 MiB limit and a
	// decoder's working memory, then keeps what it decompressed to.
	const budget = 2*(1<<20+recordbatch.MaxDecoderState) + 1<<20
	f.codecs = testCodecs(f, membudget.New(budget), time.Minute) // generous: this test is about the bound, not the refusal

	var batches [][]byte
	for i, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.SnappyCompression()} {
		o := defaultBatchOpts()
		o.codec = codec
		batches = append(batches, makeBatch(t, o, rec{value: compressible(600<<10, uint64(i))}, rec{value: compressible(100<<10, uint64(i+10))}))
	}
	batches = append(batches, batchOf(attrZstd, zstdStreamed(t, rawRecords(rec{value: compressible(700<<10, 99)})), 1))

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := batches[i%len(batches)]
			out, err := f.sealPartition(context.Background(), "orders", f.pol.get("orders"), batch)
			if err == nil {
				_, err = f.openPartition(context.Background(), "orders", out)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a batch within every limit failed: %v", err)
	}
	b := f.codecs.Budget()
	if b.Peak() > budget {
		t.Errorf("%d bytes of decompressed batches held at once, over the %d-byte budget", b.Peak(), budget)
	}
	if b.Peak() < 1<<20 {
		t.Errorf("peak of %d bytes: the batches did not draw on the budget", b.Peak())
	}
	if b.InUse() != 0 {
		t.Errorf("%d bytes still held after every batch finished", b.InUse())
	}
}

// When the budget stays spent, a produce is refused with a retriable code
// after the wait, and so is a fetched partition; once bytes are free the
// same batches go through.
func TestBudgetSpentIsRetriable(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", MaxBatchBytes: 1 << 20}, k)
	b := membudget.New(16 << 20)
	f.codecs = testCodecs(f, b, 50*time.Millisecond)
	o := defaultBatchOpts()
	o.codec = kgo.GzipCompression()
	batch := makeBatch(t, o, rec{value: []byte("secret")})
	sealed := sealOne(t, f, "orders", batch)

	if err := b.Acquire(context.Background(), 16<<20); err != nil {
		t.Fatal(err)
	}
	c := testCtx(t)
	_, answer := runProduce(t, f, c, produce(9, -1, map[string]map[int32][]byte{"orders": {0: batch}}))
	if answer == nil {
		t.Fatal("a batch went upstream while the budget was spent")
	}
	p := answer.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.KafkaStorageError.Code || !strings.Contains(*p.ErrorMessage, "decompression_budget") {
		t.Errorf("produce: error %d %q, want KAFKA_STORAGE_ERROR naming decompression_budget", p.ErrorCode, *p.ErrorMessage)
	}
	if !kerr.KafkaStorageError.Retriable {
		t.Fatal("KAFKA_STORAGE_ERROR is no longer retriable")
	}
	resp := fetchResponse(12, map[string][]byte{"orders": sealed})
	runFetch(t, f, c, resp)
	if fp := fetched(t, resp, "orders"); fp.ErrorCode != kerr.KafkaStorageError.Code {
		t.Errorf("fetch: error %d, want KAFKA_STORAGE_ERROR", fp.ErrorCode)
	}

	b.Release(16 << 20)
	if up, answer := runProduce(t, f, c, produce(9, -1, map[string]map[int32][]byte{"orders": {0: batch}})); answer != nil || up == nil {
		t.Error("the batch was still refused once the budget was free")
	}
	resp = fetchResponse(12, map[string][]byte{"orders": sealed})
	runFetch(t, f, c, resp)
	if fp := fetched(t, resp, "orders"); fp.ErrorCode != 0 {
		t.Errorf("fetch once the budget was free: error %d", fp.ErrorCode)
	}
}

// A batch that could need more than the whole budget is refused at once,
// naming the setting to raise, rather than waiting for bytes that can
// never be free.
func TestBatchOverWholeBudgetRefusedAtOnce(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", MaxBatchBytes: 1 << 20}, k)
	f.codecs = testCodecs(f, membudget.New(512<<10), time.Hour)
	o := defaultBatchOpts()
	o.codec = kgo.Lz4Compression()
	_, err := f.sealPartition(context.Background(), "orders", f.pol.get("orders"), makeBatch(t, o, rec{value: []byte("secret")}))
	if !errors.Is(err, recordbatch.ErrTooLarge) || !strings.Contains(err.Error(), "decompression_budget") {
		t.Fatalf("err %v, want errTooLarge naming decompression_budget", err)
	}
	if code := produceCode(err); code != kerr.MessageTooLarge {
		t.Errorf("code %s, want MESSAGE_TOO_LARGE", code.Message)
	}
}

// Frames that do and do not state their size, concatenated in one batch,
// decode as one stream of records; the limit counts them together.
func TestZstdFramesOfBothKinds(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	f.codecs = testCodecs(f, membudget.New(DefaultDecompressionBudget), recordbatch.BudgetWait)
	first := rawRecords(rec{value: []byte("one")}, rec{value: compressible(50<<10, 1)})
	second := rawRecords(rec{value: []byte("three")})
	// The second frame's record offsets go on from the first's.
	var kr kmsg.Record
	kr.OffsetDelta, kr.Value = 2, []byte("three")
	kr.Length = int32(len(kr.AppendTo(nil)) - 1)
	second = kr.AppendTo(nil)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'}
	payload := append(enc.EncodeAll(first, nil), skippable...)
	payload = append(payload, zstdStreamed(t, second)...)
	batch := batchOf(attrZstd, payload, 3)

	out, held, err := f.codecs.Decompress(context.Background(), nil, recordbatch.Zstd, payload)
	if err != nil {
		t.Fatal(err)
	}
	f.codecs.Release(held)
	if want := append(append([]byte(nil), first...), second...); !bytes.Equal(out, want) {
		t.Fatalf("decompressed %d bytes, want %d", len(out), len(want))
	}
	if held != int64(len(out)) {
		t.Errorf("held %d bytes for %d decompressed", held, len(out))
	}
	_, recs := decodeBatches(t, openOne(t, f, "orders", sealOne(t, f, "orders", batch)))
	if len(recs) != 3 || string(recs[0].Value) != "one" || string(recs[2].Value) != "three" {
		t.Errorf("round trip gave %d records", len(recs))
	}

	// A frame that states more than is left of the limit is refused
	// before it is decoded.
	f2 := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", MaxBatchBytes: 1 << 20}, k)
	f2.codecs = testCodecs(f2, membudget.New(DefaultDecompressionBudget), recordbatch.BudgetWait)
	big := enc.EncodeAll(make([]byte, 2<<20), nil)
	if _, _, err := f2.codecs.Decompress(context.Background(), nil, recordbatch.Zstd, big); !errors.Is(err, recordbatch.ErrTooLarge) {
		t.Errorf("a frame stating 2 MiB under a 1 MiB limit: %v", err)
	}
}

func TestDecompressionConfigValidation(t *testing.T) {
	base := Config{Topics: []string{"a"}, KEK: "k"}
	for _, tt := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.MaxCompressionRatio = 1 }, "max_compression_ratio:"},
		{func(c *Config) { c.MaxCompressionRatio = -5 }, "max_compression_ratio:"},
		{func(c *Config) { c.DecompressionBudget = -1 }, "decompression_budget:"},
		{func(c *Config) { c.DecompressionBudget = 64 << 20 }, "decompression_budget: 67108864 is less than max_batch_bytes"},
		{func(c *Config) { c.MaxBatchBytes, c.DecompressionBudget = 1<<20, 8<<20 }, "raise it to at least 9437184"},
	} {
		c := base
		tt.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", c, err, tt.want)
		}
	}
	ok := base
	ok.MaxCompressionRatio, ok.DecompressionBudget, ok.MaxBatchBytes = 2, 9<<20, 1<<20
	if err := ok.Validate(); err != nil {
		t.Errorf("smallest settings refused: %v", err)
	}
}

// Every filter of the process draws on one budget, sized by the largest
// any of them asks for.
func TestOneBudgetPerProcess(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	a := newTestFilter(t, Config{Topics: []string{"a"}, KEK: "orders-kek", DecompressionBudget: 100 << 20}, k)
	b := newTestFilter(t, Config{Topics: []string{"b"}, KEK: "orders-kek", DecompressionBudget: 300 << 20}, k)
	if a.codecs.Budget() != b.codecs.Budget() {
		t.Fatal("two filters have budgets of their own")
	}
	if got := a.codecs.Budget().Size(); got < 300<<20 {
		t.Errorf("budget %d, want at least the largest asked for, %d", got, 300<<20)
	}
}

// testCodecs gives f codecs of its own limits that draw on budget and wait
// for it up to wait.
func testCodecs(f *Filter, budget *membudget.Budget, wait time.Duration) *recordbatch.Codecs {
	return recordbatch.NewCodecs(f.cfg.MaxBatchBytes, f.cfg.MaxCompressionRatio, budget, wait)
}
