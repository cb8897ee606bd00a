package encryption

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms/datakey"
)

// Benchmarks of the filter's own work, without the proxy: one 1 KiB record
// sealed and opened, and a Produce partition (100 records of 1 KiB) on
// each path, uncompressed and lz4. b.SetBytes is the plaintext size, so
// MB/s reads directly against the sizing target (at most 2 ms of CPU per
// MB, i.e. at least 500 MB/s for produce and fetch together).
//
//	go test -run '^$' -bench . -benchmem ./internal/kafka/filters/encryption/

// payload is a JSON-like 1 KiB value that compresses about as well as real
// events do.
func payload(i int) []byte {
	v := fmt.Appendf(nil, `{"order_id":"ord-%08d","customer":"cust-%06d","currency":"EUR","amount":%d.%02d,"items":[`, i, i%9973, i%5000, i%100)
	for j := 0; len(v) < 1000; j++ {
		v = fmt.Appendf(v, `{"sku":"SKU-%05d","qty":%d},`, (i*31+j*7)%100000, j%9+1)
	}
	v = append(v[:1000], `"end"]}`...)
	for len(v) < 1024 {
		v = append(v, ' ')
	}
	return v[:1024]
}

func benchBatch(b *testing.B, codec kgo.CompressionCodec, n int) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{key: fmt.Appendf(nil, "cust-%06d", i%9973), value: payload(i)}
	}
	o := defaultBatchOpts()
	o.codec = codec
	o.producerID, o.producerEpoch, o.baseSequence = 1, 0, 0
	return makeBatch(b, o, recs...)
}

func benchFilter(b *testing.B) *Filter {
	_, k := testVault(b, "orders-kek")
	return newTestFilter(b, Config{Topics: []string{"orders"}, KEK: "orders-kek", DEK: DEKConfig{MaxRecords: MaxRecordsLimit}}, k)
}

func BenchmarkSealRecord1KiB(b *testing.B) {
	f := benchFilter(b)
	plain := benchBatch(b, kgo.NoCompression(), 1)
	r, _, err := recordbatch.ParseRecord(plain[recordbatch.HeaderLen:])
	if err != nil {
		b.Fatal(err)
	}
	s := getScratch()
	j := sealer{f: f, ctx: context.Background(), topic: "orders", kek: "orders-kek", s: s}
	s.ad = keyAD(s.ad[:0], "orders", f.bind)
	dst := make([]byte, 0, 2048)
	b.SetBytes(int64(len(r.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if dst, err = j.sealRecord(dst[:0], &r, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenRecord1KiB(b *testing.B) {
	f := benchFilter(b)
	sealed := sealOne(b, f, "orders", benchBatch(b, kgo.NoCompression(), 1))
	recs := sealed[recordbatch.HeaderLen:]
	r, _, err := recordbatch.ParseRecord(recs)
	if err != nil {
		b.Fatal(err)
	}
	j := opener{f: f, ctx: context.Background(), topic: "orders", s: getScratch()}
	dst := make([]byte, 0, 2048)
	b.SetBytes(int64(len(r.Value) - datakey.TagLen))
	b.ReportAllocs()
	for b.Loop() {
		if dst, _, err = j.openRecord(dst[:0], &r, recs); err != nil {
			b.Fatal(err)
		}
	}
}

var benchCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{{"none", kgo.NoCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}}

// BenchmarkProducePath encrypts one Produce partition of 100 x 1 KiB
// records: parse, decompress, seal, compress, CRC.
func BenchmarkProducePath(b *testing.B) {
	for _, c := range benchCodecs {
		b.Run(c.name, func(b *testing.B) {
			f := benchFilter(b)
			in := benchBatch(b, c.codec, 100)
			pol := f.pol.get("orders")
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.sealPartition(context.Background(), "orders", pol, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchPath decrypts one Fetch partition of 100 x 1 KiB records.
func BenchmarkFetchPath(b *testing.B) {
	for _, c := range benchCodecs {
		b.Run(c.name, func(b *testing.B) {
			f := benchFilter(b)
			in := sealOne(b, f, "orders", benchBatch(b, c.codec, 100))
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.openPartition(context.Background(), "orders", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
