package fieldencryption

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/schema"
)

// benchRecords is how many reference records one benchmarked partition
// holds: a producer's batch, so that per-batch costs (the output slice,
// the batch header) spread as they do in real traffic.
const benchRecords = 100

// referenceBatch returns a batch of benchRecords reference records
// (bench/schemas, about 1 KiB each) in kind's encoding, framed as the
// benchmark's producer frames them (schema id 1 for Avro and Protobuf).
func referenceBatch(b testing.TB, kind string) []byte {
	var recs []rec
	for i := range benchRecords {
		v, err := kafkaload.EncodeRecord(kind, kafkaload.ReferenceRecord(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)))
		if err != nil {
			b.Fatal(err)
		}
		switch kind {
		case kafkaload.PayloadAvro:
			v = append(schema.AppendPrefix(nil, 1), v...)
		case kafkaload.PayloadProtobuf:
			v = append(schema.AppendMessageIndexes(schema.AppendPrefix(nil, 1), nil), v...)
		}
		recs = append(recs, rec{value: v})
	}
	return makeBatch(b, kgo.NoCompression(), recs...)
}

// referenceConfig encrypts the reference record's ssn, as
// bench/layers/sfe-<kind>.yaml does.
func referenceConfig(kind string) Config {
	cfg := Config{Rules: []Rule{{Topics: []string{"*"}, KEK: "kek", Value: &Part{Format: kind, Fields: []Field{{Path: "ssn"}}}}}}
	switch kind {
	case kafkaload.PayloadAvro:
		cfg.Schemas = []schema.SchemaConfig{{ID: 1, Type: "AVRO", Schema: schemas.Avro}}
	case kafkaload.PayloadProtobuf:
		cfg.Schemas = []schema.SchemaConfig{{ID: 1, Type: "PROTOBUF", Schema: schemas.Proto}}
	}
	return cfg
}

// BenchmarkReferenceRecord measures encrypting (seal) and decrypting
// (open) the ssn of the 1 KiB reference record, per record, in a batch of
// 100, for each encoding. The targets: 2 µs for Avro and Protobuf and
// 3 µs for JSON, each way, with no allocation per record.
func BenchmarkReferenceRecord(b *testing.B) {
	for _, kind := range []string{kafkaload.PayloadJSON, kafkaload.PayloadAvro, kafkaload.PayloadProtobuf} {
		f := newFilter(b, referenceConfig(kind), testKMS(b, "kek"))
		pol := f.policy("bench")
		in := referenceBatch(b, kind)
		sealed, _, err := f.sealPartition(context.Background(), "bench", pol, in)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(kind+"/seal", func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := f.sealPartition(context.Background(), "bench", pol, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
		})
		b.Run(kind+"/open", func(b *testing.B) {
			b.SetBytes(int64(len(sealed)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := f.openPartition(context.Background(), "bench", pol.rule, false, sealed); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
		})
	}
}

// BenchmarkReferenceCopy is the floor under BenchmarkReferenceRecord: the
// same batch re-framed record by record with nothing located or sealed
// (parse, copy, CRC), so that the difference is what field encryption
// itself costs.
func BenchmarkReferenceCopy(b *testing.B) {
	f := newFilter(b, referenceConfig(kafkaload.PayloadAvro), testKMS(b, "kek"))
	in := referenceBatch(b, kafkaload.PayloadAvro)
	copyRecord := func(dst []byte, _ *recordbatch.Record, raw []byte) ([]byte, bool, error) {
		return append(dst, raw...), true, nil
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		s := getScratch()
		if _, _, err := rewrite(context.Background(), f.codecs, s, make([]byte, 0, len(in)+len(in)/4+256), in, false, copyRecord); err != nil {
			b.Fatal(err)
		}
		putScratch(s)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
}
