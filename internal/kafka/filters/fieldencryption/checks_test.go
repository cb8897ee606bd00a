package fieldencryption

// Helpers of the behaviour tests: a Produce run that keeps every partition
// and the request as the chain left it, and checks of a refused partition.

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// produced is a Produce request after a chain of the filter: what went
// upstream (nil when the filter answered the request itself) and the
// producer's answer for the partitions the filter refused.
type produced struct {
	req      *filter.Request
	upstream *kmsg.ProduceRequest
	resp     *kmsg.ProduceResponse
}

// producePartitions builds a Produce request v9 with the given partitions
// of each topic.
func producePartitions(parts map[string]map[int32][]byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, -1, 5000
	for topic, ps := range parts {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = topic
		for p, b := range ps {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition, pp.Records = p, b
			t.Partitions = append(t.Partitions, pp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// runProduceAll passes req through a chain of f, as runProduce does, and
// returns all of the outcome.
func runProduceAll(t testing.TB, f *Filter, c *filter.Context, req *kmsg.ProduceRequest) produced {
	t.Helper()
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	fr := &filter.Request{Header: filter.Header{Key: 0, Version: req.Version, CorrelationID: 11}, Body: req}
	at, err := ch.OnRequest(c, ch.RequestMask(0, req.Version), fr)
	if err != nil {
		t.Fatalf("OnRequest: %v", err)
	}
	out := produced{req: fr}
	if at < ch.Len() {
		out.resp = fr.Response().(*kmsg.ProduceResponse)
		return out
	}
	out.upstream = fr.Body.(*kmsg.ProduceRequest)
	out.resp = kmsg.NewPtrProduceResponse()
	out.resp.Version = req.Version
	if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: 0, Version: req.Version, CorrelationID: 11}, Body: out.resp}); err != nil {
		t.Fatal(err)
	}
	return out
}

// sent returns the records of a partition as they went upstream.
func (p produced) sent(topic string, partition int32) ([]byte, bool) {
	if p.upstream == nil {
		return nil, false
	}
	for _, t := range p.upstream.Topics {
		for _, pp := range t.Partitions {
			if t.Topic == topic && pp.Partition == partition {
				return pp.Records, true
			}
		}
	}
	return nil, false
}

// answer returns the producer's answer for a partition the filter refused.
func (p produced) answer(topic string, partition int32) (kmsg.ProduceResponseTopicPartition, bool) {
	for _, t := range p.resp.Topics {
		for _, pp := range t.Partitions {
			if t.Topic == topic && pp.Partition == partition {
				return pp, true
			}
		}
	}
	return kmsg.ProduceResponseTopicPartition{}, false
}

// wantRefused checks that the partition was refused with code and a
// message holding each of says, and that none of its bytes went upstream.
// secrets are values the message must not hold.
func wantRefused(t *testing.T, out produced, topic string, partition int32, code *kerr.Error, says []string, secrets ...string) string {
	t.Helper()
	if recs, ok := out.sent(topic, partition); ok {
		t.Errorf("%s/%d was refused but went upstream too (%d bytes)", topic, partition, len(recs))
	}
	a, ok := out.answer(topic, partition)
	if !ok {
		t.Fatalf("%s/%d: no answer in the response %+v", topic, partition, out.resp.Topics)
	}
	if a.ErrorCode != code.Code {
		t.Errorf("%s/%d: error code %d (%v), want %s", topic, partition, a.ErrorCode, kerr.ErrorForCode(a.ErrorCode), code.Message)
	}
	if a.BaseOffset != -1 {
		t.Errorf("%s/%d: base offset %d, want -1", topic, partition, a.BaseOffset)
	}
	msg := ""
	if a.ErrorMessage != nil {
		msg = *a.ErrorMessage
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("%s/%d: message %q does not say %q", topic, partition, msg, s)
		}
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("%s/%d: message %q holds the value %q", topic, partition, msg, s)
		}
	}
	return msg
}

// produceOne passes one partition of one topic through f and returns what
// went upstream, failing the test if it was refused.
func produceOne(t testing.TB, f *Filter, c *filter.Context, topic string, batch []byte) []byte {
	t.Helper()
	out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{topic: {0: batch}}))
	if a, ok := out.answer(topic, 0); ok {
		t.Fatalf("produce to %s refused: %d %v", topic, a.ErrorCode, a.ErrorMessage)
	}
	recs, ok := out.sent(topic, 0)
	if !ok {
		t.Fatalf("produce to %s: nothing went upstream", topic)
	}
	return recs
}

// fetchOne passes one fetched partition through f and returns it as the
// client gets it, and whether f changed the response.
func fetchOne(t testing.TB, f *Filter, c *filter.Context, topic string, batches []byte) (kmsg.FetchResponseTopicPartition, bool) {
	t.Helper()
	got, changed := runFetch(t, f, c, map[string][]byte{topic: batches})
	return got[topic], changed
}

// values returns the values of the records of batches.
func values(t testing.TB, batches []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range decodeRecords(t, batches) {
		out = append(out, r.Value)
	}
	return out
}

// markerOf returns the marker header value of a stored record.
func markerOf(t testing.TB, r kmsg.Record) []byte {
	t.Helper()
	if len(r.Headers) == 0 || r.Headers[0].Key != markerKey {
		t.Fatalf("stored record has no marker first among its headers: %+v", r.Headers)
	}
	return r.Headers[0].Value
}

// recOf turns a decoded record back into one a test can batch again.
func recOf(r kmsg.Record) rec {
	return rec{key: r.Key, value: r.Value, headers: r.Headers}
}

// rebatch builds an uncompressed batch of copies of recs.
func rebatch(t testing.TB, recs ...kmsg.Record) []byte {
	t.Helper()
	var rs []rec
	for _, r := range recs {
		c := recOf(r)
		c.key = cloneOrNil(c.key)
		c.value = cloneOrNil(c.value)
		c.headers = append([]kmsg.Header(nil), c.headers...)
		for i := range c.headers {
			c.headers[i].Value = bytes.Clone(c.headers[i].Value)
		}
		rs = append(rs, c)
	}
	return makeBatch(t, kgo.NoCompression(), rs...)
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
