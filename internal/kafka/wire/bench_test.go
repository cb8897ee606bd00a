package wire_test

// Benchmarks for the per-frame hot path. Every function here runs on each
// request or response the proxy forwards, so each must allocate nothing;
// TestHotPathAllocs holds them to that in an ordinary test run.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// produceV9Frame is a Produce v9 request frame after its size: a realistic
// client id and transactional id, and one partition's records.
func produceV9Frame() (frame []byte, bodyOff int) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.TransactionID = kmsg.StringPtr("orders-service-txn-7")
	req.Acks = -1
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.ProduceRequestTopic{{
		Topic:      "orders",
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 3, Records: make([]byte, 16<<10)}},
	}}
	frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID("orders-service-producer-1")).AppendRequest(nil, req, 42)[4:]
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		panic(err)
	}
	return frame, h.Len
}

// fetchResponse1MiB is a Fetch response body of about 1 MiB: two topics,
// ten partitions, a tenth of a MiB of records each, some aborted transactions, and no
// top-level tags (the common case the skimmer must pass untouched).
func fetchResponse1MiB(version int16) []byte {
	r := kmsg.NewPtrFetchResponse()
	r.SetVersion(version)
	r.SessionID = 12345
	for i := range 2 {
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic = []string{"orders", "payments"}[i]
		tp.TopicID = [16]byte{byte(i + 1), 0xaa}
		for j := range 5 {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = int32(j)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1e6, 1e6-10, 0
			p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 9, FirstOffset: 999}}
			p.RecordBatches = make([]byte, (1<<20)/10)
			tp.Partitions = append(tp.Partitions, p)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r.AppendTo(nil)
}

func BenchmarkParseRequestHeader(b *testing.B) {
	frame, _ := produceV9Frame()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseRequestHeader(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProduceAcks(b *testing.B) {
	frame, off := produceV9Frame()
	body := frame[off:]
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := wire.ProduceAcks(body, 9); !ok {
			b.Fatal("not ok")
		}
	}
}

func BenchmarkFetchResponseHasTopLevelTags(b *testing.B) {
	v := wire.MaxVersion(wire.KeyFetch)
	body := fetchResponse1MiB(v)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if has, ok := wire.FetchResponseHasTopLevelTags(body, v); has || !ok {
			b.Fatal(has, ok)
		}
	}
}

func TestHotPathAllocs(t *testing.T) {
	frame, off := produceV9Frame()
	body := frame[off:]
	v := wire.MaxVersion(wire.KeyFetch)
	fetch := fetchResponse1MiB(v)
	if len(fetch) < 1<<20 {
		t.Fatalf("fetch response is %d bytes, want at least 1 MiB", len(fetch))
	}
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"ParseRequestHeader", func() {
			if _, err := wire.ParseRequestHeader(frame); err != nil {
				t.Fatal(err)
			}
		}},
		{"ProduceAcks", func() {
			if a, ok := wire.ProduceAcks(body, 9); !ok || a != -1 {
				t.Fatal(a, ok)
			}
		}},
		{"FetchResponseHasTopLevelTags", func() {
			if has, ok := wire.FetchResponseHasTopLevelTags(fetch, v); has || !ok {
				t.Fatal(has, ok)
			}
		}},
	} {
		if n := testing.AllocsPerRun(100, c.fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", c.name, n)
		}
	}
}
