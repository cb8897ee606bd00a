package encryption

// The partition error entries the filter writes, as they go on the wire, at
// every version: read back with a decoder of the test's own, so that what
// is checked is the bytes a client parses, not kmsg's view of them.

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// wireReader reads Kafka protocol fields; flexible selects the compact
// encodings of arrays, strings and bytes.
type wireReader struct {
	t        *testing.T
	b        []byte
	flexible bool
}

func (r *wireReader) take(n int) []byte {
	r.t.Helper()
	if n < 0 || n > len(r.b) {
		r.t.Fatalf("want %d bytes, %d left", n, len(r.b))
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *wireReader) int16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *wireReader) int32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *wireReader) int64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }

func (r *wireReader) uvarint() int64 {
	r.t.Helper()
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.t.Fatal("bad uvarint")
	}
	r.b = r.b[n:]
	return int64(v)
}

// length reads an array, bytes or string length: -1 is null.
func (r *wireReader) length(int16Len bool) int {
	switch {
	case r.flexible:
		return int(r.uvarint()) - 1
	case int16Len:
		return int(r.int16())
	}
	return int(r.int32())
}

func (r *wireReader) arrayLen() int { return r.length(false) }

// bytesLen reads the length of nullable bytes (a record set), leaving the
// bytes themselves.
func (r *wireReader) bytesLen() int { return r.length(false) }

// nullableString returns the string, or "<null>".
func (r *wireReader) nullableString() string {
	n := r.length(true)
	if n < 0 {
		return "<null>"
	}
	return string(r.take(n))
}

// toFirstPartition skips to the first partition of the first topic of a
// Produce or Fetch response, whose topics go by ID from version 13.
func (r *wireReader) toFirstPartition(version int16) {
	r.t.Helper()
	if n := r.arrayLen(); n < 1 {
		r.t.Fatalf("v%d: %d topics", version, n)
	}
	if version >= 13 {
		r.take(16)
	} else {
		r.take(r.length(true))
	}
	if n := r.arrayLen(); n < 1 {
		r.t.Fatalf("v%d: %d partitions", version, n)
	}
}

// wireFetchPartition is the first partition of the first topic of an
// encoded Fetch response.
type wireFetchPartition struct {
	code                   int16
	hwm, lso, logStart     int64
	aborted                int // -1: null
	preferred              int32
	recordsLen             int // -1: null
	versionHasLSO, hasPref bool
}

func readFetchPartition(t *testing.T, version int16, b []byte) wireFetchPartition {
	t.Helper()
	r := &wireReader{t: t, b: b, flexible: version >= 12}
	if version >= 1 {
		r.int32() // throttle
	}
	if version >= 7 {
		r.int16() // error code
		r.int32() // session id
	}
	r.toFirstPartition(version)
	var p wireFetchPartition
	r.int32() // partition
	p.code = r.int16()
	p.hwm = r.int64()
	p.lso, p.logStart, p.preferred = -1, -1, -1
	if version >= 4 {
		p.versionHasLSO = true
		p.lso = r.int64()
		if version >= 5 {
			p.logStart = r.int64()
		}
		p.aborted = r.arrayLen()
		r.take(16 * max(p.aborted, 0))
		if version >= 11 {
			p.hasPref = true
			p.preferred = r.int32()
		}
	}
	p.recordsLen = r.bytesLen()
	return p
}

// checkFailedFetch checks an encoded Fetch response whose first partition
// the filter failed with code: an empty record set, not a null one (which
// librdkafka and sarama cannot parse), and what a broker sends beside it.
func checkFailedFetch(t *testing.T, what string, resp *kmsg.FetchResponse, code int16) {
	t.Helper()
	v := resp.Version
	enc := resp.AppendTo(nil)
	p := readFetchPartition(t, v, enc)
	if p.code != code {
		t.Errorf("%s v%d: error code %d, want %d", what, v, p.code, code)
	}
	if p.recordsLen != 0 {
		t.Errorf("%s v%d: record set length %d on the wire, want 0 (an empty record set; -1 is null)", what, v, p.recordsLen)
	}
	if p.hwm != -1 || p.lso != -1 || p.logStart != -1 {
		t.Errorf("%s v%d: high watermark %d, last stable offset %d, log start offset %d; want -1 as from a broker",
			what, v, p.hwm, p.lso, p.logStart)
	}
	if p.versionHasLSO && p.aborted != 0 {
		t.Errorf("%s v%d: %d aborted transactions on the wire, want an empty array", what, v, p.aborted)
	}
	if p.hasPref && p.preferred != -1 {
		t.Errorf("%s v%d: preferred read replica %d, want -1", what, v, p.preferred)
	}
	// The whole response still decodes.
	back := kmsg.NewPtrFetchResponse()
	back.Version = v
	if err := back.ReadFrom(enc); err != nil {
		t.Errorf("%s v%d: the response does not decode: %v", what, v, err)
	}
}

func TestFailedFetchPartitionOnTheWire(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	sealed := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")}))
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1 // the IV counter, last byte of the marker
	recordbatch.Finish(tampered, 0)

	for v := int16(minFetchVersion); v <= maxFetchVersion; v++ {
		resp := fetchResponse(v, map[string][]byte{"orders": tampered})
		p := fetched(t, resp, "orders")
		p.LastStableOffset, p.LogStartOffset = 100, 0
		p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 3}}
		runFetch(t, f, testCtx(t), resp)
		checkFailedFetch(t, "tampered record", resp, kerr.CorruptMessage.Code)

		g := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k) // knows no DEK
		k.down.Store(true)
		resp = fetchResponse(v, map[string][]byte{"orders": sealed})
		runFetch(t, g, testCtx(t), resp)
		k.down.Store(false)
		checkFailedFetch(t, "kms down", resp, kerr.KafkaStorageError.Code)

		if v >= 13 {
			resp = fetchResponse(v, map[string][]byte{"orders": sealed})
			resp.Topics[0].TopicID = [16]byte{0xbe, 0xef}
			runFetch(t, f, testCtx(t), resp)
			checkFailedFetch(t, "unknown topic id", resp, kerr.UnknownTopicID.Code)
		}
	}

	// Partitions the filter adds to a response: those it took out of a
	// request it could not serve, at every version.
	for v := int16(0); v <= maxFetchVersion; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		filter.AddFetchRefused(resp, []filter.Refused{{Topic: "orders", TopicID: topicID("orders"), Code: kerr.UnsupportedVersion.Code}})
		checkFailedFetch(t, "added failure", resp, kerr.UnsupportedVersion.Code)
	}

	// Fetch before v4: answered by the filter when only encrypted topics
	// were asked for, added to the broker's answer otherwise.
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	for v := int16(0); v < minFetchVersion; v++ {
		c := testCtx(t)
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "orders"
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		fr := filter.Request{Header: filter.Header{Key: wire.KeyFetch, Version: v, CorrelationID: 5}, Body: req}
		if _, err := ch.OnRequest(c, ch.RequestMask(wire.KeyFetch, v), &fr); err != nil {
			t.Fatal(err)
		}
		ans, ok := fr.Response().(*kmsg.FetchResponse)
		if !ok {
			t.Fatalf("v%d: no local answer", v)
		}
		checkFailedFetch(t, "refused version", ans, kerr.UnsupportedVersion.Code)
	}
}

func TestFailedShareFetchPartitionOnTheWire(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	sealed := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")}))
	sealed[len(sealed)-1] ^= 1
	recordbatch.Finish(sealed, 0)
	for v := int16(0); v <= maxShareFetchVersion; v++ {
		for _, tc := range []struct {
			name string
			id   [16]byte
			code int16
		}{
			{"tampered record", topicID("orders"), kerr.CorruptMessage.Code},
			{"unknown topic id", [16]byte{0xbe, 0xef}, kerr.UnknownTopicID.Code},
		} {
			resp := kmsg.NewPtrShareFetchResponse()
			resp.Version = v
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = tc.id
			p := kmsg.NewShareFetchResponseTopicPartition()
			p.Records = sealed
			p.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 0, LastOffset: 0, DeliveryCount: 1}}
			rt.Partitions = append(rt.Partitions, p)
			resp.Topics = append(resp.Topics, rt)
			if err := f.OnResponse(testCtx(t), &filter.Response{Header: filter.Header{Key: wire.KeyShareFetch, Version: v}, Body: resp}); err != nil {
				t.Fatal(err)
			}
			enc := resp.AppendTo(nil)
			r := &wireReader{t: t, b: enc, flexible: true}
			r.int32() // throttle
			r.int16() // error code
			r.nullableString()
			if v >= 1 {
				r.int32() // acquisition lock timeout
			}
			r.arrayLen()
			r.take(16)
			r.arrayLen()
			r.int32() // partition
			code := r.int16()
			msg := r.nullableString()
			r.int16() // acknowledge error code
			r.nullableString()
			r.int32() // current leader id
			r.int32() // current leader epoch
			r.uvarint()
			records := r.bytesLen()
			acquired := r.arrayLen()
			if code != tc.code || records != 0 || acquired != 0 || !strings.HasPrefix(msg, "strait record-encryption: ") {
				t.Errorf("%s v%d: code %d, message %q, record set length %d, %d acquired ranges; want code %d, a message, 0 (empty, not null), 0",
					tc.name, v, code, msg, records, acquired, tc.code)
			}
		}
	}
}

// wireProducePartition is the first partition of the first topic of an
// encoded Produce response.
type wireProducePartition struct {
	code                                int16
	baseOffset, appendTime, logStart    int64
	recordErrors                        int
	message                             string
	hasAppendTime, hasLogStart, hasErrs bool
}

func readProducePartition(t *testing.T, version int16, b []byte) wireProducePartition {
	t.Helper()
	r := &wireReader{t: t, b: b, flexible: version >= 9}
	r.toFirstPartition(version)
	var p wireProducePartition
	r.int32() // partition
	p.code = r.int16()
	p.baseOffset = r.int64()
	p.appendTime, p.logStart, p.message = -1, -1, "<none>"
	if p.hasAppendTime = version >= 2; p.hasAppendTime {
		p.appendTime = r.int64()
	}
	if p.hasLogStart = version >= 5; p.hasLogStart {
		p.logStart = r.int64()
	}
	if p.hasErrs = version >= 8; p.hasErrs {
		p.recordErrors = r.arrayLen()
		if p.recordErrors != 0 {
			t.Fatalf("v%d: %d record errors", version, p.recordErrors)
		}
		p.message = r.nullableString()
	}
	return p
}

// TestFailedProducePartitionOnTheWire checks the entries of partitions the
// filter refuses, answered by the filter or added to the broker's answer:
// offsets -1 as from a broker, an empty (not null) list of record errors,
// and from v8 a message saying why.
func TestFailedProducePartitionOnTheWire(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders", "nokey"}, KEK: "{topic}-kek"}, k)
	batch := makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")})
	logs := makeBatch(t, defaultBatchOpts(), rec{value: []byte("log")})
	check := func(what string, resp *kmsg.ProduceResponse, topic string) {
		t.Helper()
		v := resp.Version
		for i := range resp.Topics { // the filter's entry first
			if resp.Topics[i].Topic == topic || (v >= 13 && resp.Topics[i].TopicID == topicID(topic)) {
				resp.Topics[0], resp.Topics[i] = resp.Topics[i], resp.Topics[0]
			}
		}
		enc := resp.AppendTo(nil)
		p := readProducePartition(t, v, enc)
		if p.code != kerr.PolicyViolation.Code || p.baseOffset != -1 || p.appendTime != -1 || p.logStart != -1 {
			t.Errorf("%s v%d: code %d, base offset %d, log append time %d, log start offset %d; want POLICY_VIOLATION and -1s",
				what, v, p.code, p.baseOffset, p.appendTime, p.logStart)
		}
		if p.hasErrs && !strings.HasPrefix(p.message, "strait record-encryption: ") {
			t.Errorf("%s v%d: error message %q", what, v, p.message)
		}
		back := kmsg.NewPtrProduceResponse()
		back.Version = v
		if err := back.ReadFrom(enc); err != nil {
			t.Errorf("%s v%d: the response does not decode: %v", what, v, err)
		}
	}
	for v := int16(0); v <= maxProduceVersion; v++ {
		// Only the refused topic: the filter answers.
		_, answer := runProduce(t, f, testCtx(t), produce(v, -1, map[string]map[int32][]byte{"nokey": {0: batch}}))
		if answer == nil {
			t.Fatalf("v%d: no local answer", v)
		}
		check("answered", answer, "nokey")

		// With another topic: the broker answers, the filter adds.
		c := testCtx(t)
		up, _ := runProduce(t, f, c, produce(v, -1, map[string]map[int32][]byte{"nokey": {0: batch}, "logs": {0: logs}}))
		if up == nil {
			t.Fatalf("v%d: nothing upstream", v)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = v
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = "logs", topicID("logs")
		rt.Partitions = []kmsg.ProduceResponseTopicPartition{kmsg.NewProduceResponseTopicPartition()}
		resp.Topics = append(resp.Topics, rt)
		if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: wire.KeyProduce, Version: v, CorrelationID: 7}, Body: resp}); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 2 {
			t.Fatalf("v%d: %d topics in the response, want the broker's and the filter's", v, len(resp.Topics))
		}
		check("added", resp, "nokey")
	}
}
