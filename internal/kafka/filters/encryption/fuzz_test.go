package encryption

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
)

// Fuzz targets for everything that reads bytes a client or a broker sent:
// the marker, and record batches on both paths. Seeds live in
// testdata/fuzz; more are added here from batches built at run time.

// FuzzParseMarker: parseMarker never panics, and what it accepts is exactly
// what appendMarker writes.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte{1, 0})
	f.Add(appendMarker(nil, flagDEK|flagTopic, "orders-kek", bytes.Repeat([]byte{7}, 41), 300))
	f.Add(appendMarker(nil, flagKey, "k", nil, 0))
	f.Add(append(appendMarker(nil, flagDEK|flagHeaders|flagInMarker, "k", []byte{1, 2, 3}, 1), make([]byte, 20)...))
	f.Fuzz(func(t *testing.T, v []byte) {
		m, err := parseMarker(v)
		if err != nil {
			return
		}
		again := appendMarker(nil, m.flags, string(m.kek), m.wrapped, m.iv)
		if !bytes.Equal(again, m.fixed) {
			t.Fatalf("parsed %x as %+v, which writes %x", v, m, again)
		}
		if !bytes.Equal(append(append([]byte(nil), m.fixed...), m.sealed...), v) {
			t.Fatalf("fixed and sealed parts do not make up the marker")
		}
	})
}

// fuzzFilter is a filter over a vault made for one fuzz run.
func fuzzFilter(f *testing.F, cfg Config) *Filter {
	_, k := testVault(f, "kek")
	cfg.Topics, cfg.KEK = []string{"t"}, "kek"
	return newTestFilter(f, cfg, k)
}

// seedBatches adds plaintext batches of every codec, and their sealed
// forms, to f's corpus.
func seedBatches(f *testing.F, flt *Filter) {
	recs := []rec{
		{key: []byte("k"), value: []byte("value"), headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}},
		{value: nil, headers: []kmsg.Header{{Key: "why", Value: nil}}},
		{key: []byte{}, value: []byte{}},
	}
	for _, c := range codecsUnderTest {
		o := defaultBatchOpts()
		o.codec = c.codec
		plain := makeBatch(f, o, recs...)
		f.Add(plain)
		sealed, err := flt.sealPartition(context.Background(), "t", flt.pol.get("t"), plain)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sealed)
	}
}

// FuzzOpenRecords: the fetch path never panics on what a broker returns,
// and never hands on anything but whole, well-formed batches.
func FuzzOpenRecords(f *testing.F) {
	flt := fuzzFilter(f, Config{EncryptHeaders: true, EncryptKey: true, MaxBatchBytes: 1 << 20})
	seedBatches(f, flt)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _ := flt.openPartition(context.Background(), "t", b)
		for len(out) > 0 {
			batch, rest, err := recordbatch.Next(out)
			if err != nil {
				t.Fatalf("handed on a batch that does not frame: %v", err)
			}
			if err := recordbatch.Check(batch); err != nil && recordbatch.Magic(batch) == 2 {
				t.Fatalf("handed on a batch that does not check: %v", err)
			}
			out = rest
		}
	})
}

// FuzzSealRecords: the produce path never panics on what a client sends,
// and whatever it seals opens again to the same records.
func FuzzSealRecords(f *testing.F) {
	flt := fuzzFilter(f, Config{EncryptHeaders: true, EncryptKey: true, MaxBatchBytes: 1 << 20})
	seedBatches(f, flt)
	dec := kgo.DefaultDecompressor()
	f.Fuzz(func(t *testing.T, b []byte) {
		sealed, err := flt.sealPartition(context.Background(), "t", flt.pol.get("t"), b)
		if err != nil {
			return
		}
		opened, err := flt.openPartition(context.Background(), "t", sealed)
		if err != nil {
			t.Fatalf("sealed records do not open: %v", err)
		}
		if got, want := fuzzRecords(t, dec, opened), fuzzRecords(t, dec, b); !equalRecords(got, want) {
			t.Fatalf("round trip changed the records:\n got %q\nwant %q", got, want)
		}
	})
}

// fuzzRecords lists the records of b (already checked by the filter) as
// key, value and header fields, with null distinct from empty.
func fuzzRecords(t *testing.T, dec kgo.Decompressor, b []byte) [][]string {
	var out [][]string
	field := func(v []byte) string {
		if v == nil {
			return "<null>"
		}
		return "=" + string(v)
	}
	for len(b) > 0 {
		batch, rest, err := recordbatch.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		b = rest
		if recordbatch.IsControl(batch) {
			continue
		}
		raw, err := dec.Decompress(batch[recordbatch.HeaderLen:], kgo.CompressionCodecType(recordbatch.CodecOf(batch)))
		if err != nil {
			t.Fatal(err)
		}
		for range recordbatch.Count(batch) {
			r, next, err := recordbatch.ParseRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			raw = next
			fs := []string{string(r.Prefix), field(r.Key), field(r.Value)}
			hs := r.Headers
			for range r.HeaderCount {
				var h recordbatch.Header
				h, hs, _ = recordbatch.NextHeader(hs)
				fs = append(fs, field(h.Key), field(h.Value))
			}
			out = append(out, fs)
		}
	}
	return out
}

func equalRecords(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}
