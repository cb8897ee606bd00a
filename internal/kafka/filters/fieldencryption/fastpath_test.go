package fieldencryption

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// TestProduceUntouched produces to a topic no rule selects, and records
// with nothing to encrypt to one a rule selects: the request goes upstream
// as the client sent it, marked untouched so the proxy forwards its bytes.
func TestProduceUntouched(t *testing.T) {
	k := testKMS(t, "kek")
	optional := jsonConfig()
	optional.Rules[0].Value.Fields = []Field{{Path: "ssn", Optional: true}}
	f := newFilter(t, optional, k)
	c, _ := testCtx(t, "")
	plain := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"123-45-6789"}`)})
	nothing := makeBatch(t, kgo.SnappyCompression(), rec{value: []byte(`{"id":1}`)}, rec{value: nil})
	for _, tc := range []struct {
		name  string
		parts map[string]map[int32][]byte
	}{
		{"no rule", map[string]map[int32][]byte{"orders": {0: plain, 3: plain}, "audit": {1: plain}}},
		{"nothing to encrypt", map[string]map[int32][]byte{"pii-people": {0: nothing}, "orders": {0: plain}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runProduceAll(t, f, c, producePartitions(tc.parts))
			if !out.req.Untouched() {
				t.Error("the request was not left untouched: the proxy would re-encode it")
			}
			if len(out.resp.Topics) != 0 {
				t.Errorf("the filter answered for %+v", out.resp.Topics)
			}
			for topic, ps := range tc.parts {
				for p, want := range ps {
					if got, ok := out.sent(topic, p); !ok || !bytes.Equal(got, want) {
						t.Errorf("%s/%d went upstream as %x (sent %v), want as produced", topic, p, got, ok)
					}
				}
			}
		})
	}
	// One record to encrypt: the request is changed.
	out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: plain}, "orders": {0: plain}}))
	if out.req.Untouched() {
		t.Error("a request whose records were encrypted is marked untouched")
	}
}

// TestFetchWithoutMarkers fetches, from topics a rule selects, records
// written before the rule (no marker): they are returned as the broker
// sent them and the response is marked unchanged, whoever fetches.
func TestFetchWithoutMarkers(t *testing.T) {
	k := testKMS(t, "kek")
	cfg := withFetch(jsonConfig("ssn"), FetchRule{DecryptFor: []string{"alice"}, Others: othersRedact}, "")
	f := newFilter(t, cfg, k)
	old := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"123-45-6789"}`), headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}}, rec{value: []byte(`{"ssn":"987-65-4321"}`)})
	oldZstd := makeBatch(t, kgo.ZstdCompression(), rec{value: []byte(`{"ssn":"123-45-6789"}`)})
	for _, who := range []string{"alice", "bob"} {
		c, _ := testCtx(t, who)
		got, changed := runFetch(t, f, c, map[string][]byte{"pii-a": old, "pii-b": oldZstd, "orders": old})
		if changed {
			t.Errorf("%s: a fetch with no marker in it was not left unchanged", who)
		}
		for topic, want := range map[string][]byte{"pii-a": old, "pii-b": oldZstd, "orders": old} {
			if p := got[topic]; p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, want) {
				t.Errorf("%s: %s came back as error %d, %x", who, topic, p.ErrorCode, p.RecordBatches)
			}
		}
	}
}

// runFetchRequest passes a Fetch request through a chain of f and returns
// the request as it goes on, and the answer if f gave one.
func runFetchRequest(t *testing.T, f *Filter, c *filter.Context, r *kmsg.FetchRequest) (*filter.Request, *kmsg.FetchResponse) {
	t.Helper()
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	fr := &filter.Request{Header: filter.Header{Key: 1, Version: r.Version, CorrelationID: 21}, Body: r}
	at, err := ch.OnRequest(c, ch.RequestMask(1, r.Version), fr)
	if err != nil {
		t.Fatal(err)
	}
	if at < ch.Len() {
		return fr, fr.Response().(*kmsg.FetchResponse)
	}
	return fr, nil
}

func fetchRequest(version int16, topics ...string) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = version
	for _, name := range topics {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = name
		for p := range int32(2) {
			pp := kmsg.NewFetchRequestTopicPartition()
			pp.Partition = p
			t.Partitions = append(t.Partitions, pp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// TestFetchOldVersion: a Fetch before v4 would lose the marker header, so
// a topic a rule selects gets UNSUPPORTED_VERSION, alone or beside topics
// that go on to the broker; without such a topic the request is
// untouched. Fetch v4 and later are not looked at.
func TestFetchOldVersion(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn"), k)
	c, _ := testCtx(t, "")
	unsupported := func(t *testing.T, resp *kmsg.FetchResponse, topic string) {
		t.Helper()
		for _, tp := range resp.Topics {
			if tp.Topic != topic {
				continue
			}
			if len(tp.Partitions) != 2 {
				t.Errorf("%s: %d partitions answered, want 2", topic, len(tp.Partitions))
			}
			for _, p := range tp.Partitions {
				if p.ErrorCode != kerr.UnsupportedVersion.Code || len(p.RecordBatches) != 0 || p.HighWatermark != -1 {
					t.Errorf("%s/%d: error %d, %d bytes, high watermark %d; want UNSUPPORTED_VERSION and nothing", topic, p.Partition, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
				}
			}
			return
		}
		t.Errorf("no answer for %s in %+v", topic, resp.Topics)
	}
	t.Run("selected only", func(t *testing.T) {
		_, resp := runFetchRequest(t, f, c, fetchRequest(3, "pii-people"))
		if resp == nil {
			t.Fatal("the request went upstream")
		}
		unsupported(t, resp, "pii-people")
	})
	t.Run("selected and other", func(t *testing.T) {
		fr, resp := runFetchRequest(t, f, c, fetchRequest(3, "orders", "pii-people"))
		if resp != nil {
			t.Fatal("the filter answered a request with a topic the broker should serve")
		}
		r := fr.Body.(*kmsg.FetchRequest)
		if len(r.Topics) != 1 || r.Topics[0].Topic != "orders" {
			t.Fatalf("upstream request has topics %+v, want orders alone", r.Topics)
		}
		// The broker's answer for orders gets the refused partitions.
		b := kmsg.NewPtrFetchResponse()
		b.Version = 3
		bt := kmsg.NewFetchResponseTopic()
		bt.Topic = "orders"
		bt.Partitions = []kmsg.FetchResponseTopicPartition{kmsg.NewFetchResponseTopicPartition()}
		b.Topics = append(b.Topics, bt)
		if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: 1, Version: 3, CorrelationID: 21}, Body: b}); err != nil {
			t.Fatal(err)
		}
		unsupported(t, b, "pii-people")
		if b.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Error("orders' partition got an error")
		}
	})
	t.Run("other only", func(t *testing.T) {
		fr, resp := runFetchRequest(t, f, c, fetchRequest(3, "orders"))
		if resp != nil || !fr.Untouched() {
			t.Errorf("a Fetch v3 of topics no rule selects was answered (%v) or changed (untouched %v)", resp != nil, fr.Untouched())
		}
	})
	t.Run("v4", func(t *testing.T) {
		ch, err := filter.NewChain(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int16{4, 12, maxFetchVersion} {
			if ch.RequestMask(1, v) != 0 {
				t.Errorf("the filter asks to see Fetch v%d requests", v)
			}
		}
		if ch.RequestMask(1, maxFetchVersion+1) == 0 {
			t.Errorf("the filter does not see Fetch v%d, which it does not know", maxFetchVersion+1)
		}
	})
}
