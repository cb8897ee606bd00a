package validation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/jsonschema"
)

// fixture is a registry holding the test schemas and a filter whose rules
// use them.
type fixture struct {
	reg                                      *testRegistry
	f                                        *Filter
	avroID, protoID, jsonID, otherID, mixedJ int
	recordNameID, keyID                      int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	x := &fixture{reg: startRegistry(t)}
	x.avroID = x.reg.register(t, "orders-value", sr.TypeAvro, avroOrder)
	x.protoID = x.reg.register(t, "orders-proto-value", sr.TypeProtobuf, protoOrder)
	x.jsonID = x.reg.register(t, "orders-json-value", sr.TypeJSON, jsonOrder)
	x.otherID = x.reg.register(t, "other-value", sr.TypeAvro, `{"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]}`)
	x.mixedJ = x.reg.register(t, "mixed-value", sr.TypeJSON, jsonOrder)
	x.recordNameID = x.reg.register(t, "shop.Order", sr.TypeAvro, avroOrder)
	x.keyID = x.reg.register(t, "keyed-key", sr.TypeAvro, `"string"`)
	cfg := Config{Rules: []Rule{
		{Topics: []string{"orders"}, Key: &PartRule{JSON: &JSONRule{DuplicateKeys: "reject"}}, Value: &PartRule{Schema: &SchemaRule{Strategy: "topic-name"}}},
		{Topics: []string{"orders-proto"}, Value: &PartRule{Schema: &SchemaRule{}}},
		{Topics: []string{"orders-json"}, Value: &PartRule{Schema: &SchemaRule{JSON: &JSONRule{DuplicateKeys: "reject"}}}},
		{Topics: []string{"events*"}, Key: &PartRule{MaxBytes: 8}, Value: &PartRule{JSON: &JSONRule{}}},
		{Topics: []string{"strict-?"}, Value: &PartRule{JSON: &JSONRule{}, AllowNull: ptr(false)}},
		{Topics: []string{"mixed"}, Value: &PartRule{Schema: &SchemaRule{Subjects: []string{"mixed-value"}, Formats: []string{"avro"}}}},
		{Topics: []string{"ids"}, Value: &PartRule{Schema: &SchemaRule{IDs: []int{x.avroID}}}},
		{Topics: []string{"broken"}, Value: &PartRule{Schema: &SchemaRule{}}},
		{Topics: []string{"watch"}, Mode: "warn", Value: &PartRule{JSON: &JSONRule{}}},
		{Topics: []string{"empty-ok"}, Value: &PartRule{JSON: &JSONRule{}, AllowEmpty: ptr(true)}},
		{Topics: []string{"rn"}, Value: &PartRule{Schema: &SchemaRule{Strategy: "record-name"}}},
		{Topics: []string{"keyed"}, Key: &PartRule{Schema: &SchemaRule{}}},
	}}
	cfg.Registry = &schema.RegistryConfig{URL: x.reg.url}
	x.f = newFilter(t, cfg)
	return x
}

// TestRecordOutcomes sends one record per case and checks the partition's
// answer: forwarded as sent, or refused with the exact code, error_message
// and KIP-467 record error.
func TestRecordOutcomes(t *testing.T) {
	x := newFixture(t)
	avroOK := prefixed(x.avroID, nil, avroBody(t, "o-1", 5))
	syntax := func(b string, dup bool) string {
		return jsonschema.CheckSyntax([]byte(b), jsonschema.SyntaxOptions{RejectDuplicateKeys: dup}).Error()
	}
	for _, tc := range []struct {
		name   string
		topic  string
		r      rec
		code   *kerr.Error // nil: forwarded
		reason string      // the record error, before " (topic ..."
		rule   string
	}{
		{name: "avro valid", topic: "orders", r: rec{key: []byte(`{"k":1}`), value: avroOK}},
		{name: "null key allowed by default", topic: "orders", r: rec{value: avroOK}},
		{name: "tombstone allowed by default", topic: "orders", r: rec{key: []byte(`"k"`)}},
		{name: "protobuf valid", topic: "orders-proto", r: rec{value: prefixed(x.protoID, []int{0}, protoBody("o-1", 5))}},
		{name: "protobuf second message", topic: "orders-proto", r: rec{value: prefixed(x.protoID, []int{1}, protoBody("o-1", 5)[:5])}},
		{name: "json schema valid", topic: "orders-json", r: rec{value: prefixed(x.jsonID, nil, []byte(`{"id":"o-1","amount":5}`))}},
		{name: "json valid", topic: "events-1", r: rec{key: []byte("12345678"), value: []byte(` {"a": [1, 2.5e3, null]} `)}},
		{name: "empty allowed", topic: "empty-ok", r: rec{value: []byte{}}},
		{name: "record-name strategy", topic: "rn", r: rec{value: prefixed(x.recordNameID, nil, avroBody(t, "o-1", 5))}},
		{name: "ids", topic: "ids", r: rec{value: avroOK}},
		{name: "key schema", topic: "keyed", r: rec{key: prefixed(x.keyID, nil, []byte{6, 'a', 'b', 'c'}), value: []byte("values are not checked")}},
		{name: "key schema of another subject", topic: "keyed", r: rec{key: avroOK}, code: kerr.InvalidRecord, rule: "rules[11] (keyed)",
			reason: fmt.Sprintf("key: schema id %d is not registered for subject keyed-key", x.avroID)},
		{name: "null key under a key schema", topic: "keyed", r: rec{value: []byte("v")}},

		{name: "no prefix", topic: "orders", r: rec{value: []byte(`{"id":"o-1"}`)}, code: kerr.InvalidRecord, rule: "rules[0] (orders)",
			reason: "value: payload does not carry a schema id: first byte is 0x7b, want 0x00"},
		{name: "short prefix", topic: "orders", r: rec{value: []byte{0, 0, 1}}, code: kerr.InvalidRecord, rule: "rules[0] (orders)",
			reason: "value: payload does not carry a schema id: 3 bytes, want at least 5"},
		{name: "unknown id", topic: "orders", r: rec{value: prefixed(987654, nil, avroBody(t, "o-1", 5))}, code: kerr.InvalidRecord, rule: "rules[0] (orders)",
			reason: "value: schema id 987654 is not registered"},
		{name: "other subject", topic: "orders", r: rec{value: prefixed(x.otherID, nil, []byte{2})}, code: kerr.InvalidRecord, rule: "rules[0] (orders)",
			reason: fmt.Sprintf("value: schema id %d is not registered for subject orders-value", x.otherID)},
		{name: "duplicate key in key", topic: "orders", r: rec{key: []byte(`{"a":1,"a":2}`), value: avroOK}, code: kerr.InvalidRecord, rule: "rules[0] (orders)",
			reason: "key: " + syntax(`{"a":1,"a":2}`, true)},
		{name: "json broken", topic: "events-2", r: rec{value: []byte(`{"a":}`)}, code: kerr.InvalidRecord, rule: "rules[3] (events*)",
			reason: "value: " + syntax(`{"a":}`, false)},
		{name: "json empty", topic: "events-2", r: rec{value: []byte{}}, code: kerr.InvalidRecord, rule: "rules[3] (events*)",
			reason: "value: is empty (0 bytes, not null), and the rule has allow_empty: false"},
		{name: "key over max_bytes", topic: "events-2", r: rec{key: []byte("123456789"), value: []byte(`1`)}, code: kerr.InvalidRecord, rule: "rules[3] (events*)",
			reason: "key: is 9 bytes, over the rule's max_bytes of 8"},
		{name: "tombstone refused", topic: "strict-a", r: rec{key: []byte("k")}, code: kerr.InvalidRecord, rule: "rules[4] (strict-?)",
			reason: "value: is null, and the rule has allow_null: false"},
		{name: "format not allowed", topic: "mixed", r: rec{value: prefixed(x.mixedJ, nil, []byte(`{"id":"o","amount":1}`))}, code: kerr.InvalidRecord, rule: "rules[5] (mixed)",
			reason: fmt.Sprintf("value: schema id %d is JSON, and the rule allows only AVRO", x.mixedJ)},
		{name: "id not allowed", topic: "ids", r: rec{value: prefixed(x.otherID, nil, []byte{2})}, code: kerr.InvalidRecord, rule: "rules[6] (ids)",
			reason: fmt.Sprintf("value: schema id %d is not one of the allowed ids", x.otherID)},
		{name: "record-name other subject", topic: "rn", r: rec{value: prefixed(x.otherID, nil, []byte{2})}, code: kerr.InvalidRecord, rule: "rules[10] (rn)",
			reason: fmt.Sprintf("value: schema id %d is not registered for subject Other", x.otherID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, logs := testCtx(t)
			batch := makeBatch(t, recordbatch.Uncompressed, 0, tc.r)
			res, merged := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{tc.topic: {2: batch}}))
			if tc.code == nil {
				if res.upstream == nil || !res.untouched {
					t.Fatalf("refused or re-encoded (answer %+v); want the client's bytes forwarded", res.answer)
				}
				if p := partitionOf(t, merged, tc.topic, 2); p.ErrorCode != 0 {
					t.Fatalf("error %d", p.ErrorCode)
				}
				return
			}
			if res.answer == nil {
				t.Fatal("forwarded; want it refused")
			}
			p := partitionOf(t, merged, tc.topic, 2)
			want := tc.reason + " (topic " + tc.topic + ", record 0 of the batch, " + tc.rule + ")"
			if p.ErrorCode != tc.code.Code {
				t.Errorf("code %d, want %s", p.ErrorCode, tc.code.Message)
			}
			if p.ErrorMessage == nil || *p.ErrorMessage != "strait record-validation: "+want {
				t.Errorf("error_message %q\nwant          %q", deref(p.ErrorMessage), "strait record-validation: "+want)
			}
			if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 0 || deref(p.ErrorRecords[0].ErrorMessage) != want {
				t.Errorf("record_errors %+v, want [{0 %q}]", p.ErrorRecords, want)
			}
			for _, w := range []string{"topic=" + tc.topic, "partition=2", "error_code=INVALID_RECORD"} {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log line lacks %q: %s", w, logs.String())
				}
			}
		})
	}
}

// A payload that carries a registered schema's id but does not match it
// is refused with the codec's reason, naming the field where it can.
func TestSchemaMismatch(t *testing.T) {
	x := newFixture(t)
	for _, tc := range []struct {
		name, topic string
		value       []byte
		want        string // in the reason
	}{
		{"avro cut short", "orders", prefixed(x.avroID, nil, avroBody(t, "o-1", 5)[:3]), "value: "},
		{"avro trailing bytes", "orders", prefixed(x.avroID, nil, append(avroBody(t, "o-1", 5), 1, 2)), "value: "},
		{"protobuf wrong wire type", "orders-proto", prefixed(x.protoID, []int{0}, []byte{0x08, 0x01}), "value: "},
		{"protobuf no such message", "orders-proto", prefixed(x.protoID, []int{5}, protoBody("o", 1)), "out of range"},
		{"protobuf malformed indexes", "orders-proto", prefixed(x.protoID, nil, []byte{0x7f}), "message indexes"},
		{"json schema minimum", "orders-json", prefixed(x.jsonID, nil, []byte(`{"id":"o-1","amount":-1}`)), `field "amount"`},
		{"json schema duplicate keys", "orders-json", prefixed(x.jsonID, nil, []byte(`{"id":"o","id":"p","amount":1}`)), "duplicate key"},
		{"json schema not json", "orders-json", prefixed(x.jsonID, nil, []byte(`{`)), "invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := testCtx(t)
			res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{tc.topic: {0: makeBatch(t, recordbatch.Uncompressed, 0, rec{value: tc.value})}}))
			if res.answer == nil {
				t.Fatal("forwarded")
			}
			p := partitionOf(t, res.answer, tc.topic, 0)
			if p.ErrorCode != kerr.InvalidRecord.Code || len(p.ErrorRecords) != 1 {
				t.Fatalf("code %d, %d record errors", p.ErrorCode, len(p.ErrorRecords))
			}
			msg := deref(p.ErrorRecords[0].ErrorMessage)
			if !strings.HasPrefix(msg, "value: ") || !strings.Contains(msg, tc.want) || !strings.HasSuffix(msg, "record 0 of the batch, "+x.f.rules.get(tc.topic).desc+")") {
				t.Errorf("record error %q, want a value reason with %q", msg, tc.want)
			}
		})
	}
}

// A schema the registry holds but that does not compile refuses the record
// for good: it can never be validated.
func TestSchemaDoesNotCompile(t *testing.T) {
	x := newFixture(t)
	c, _ := testCtx(t)
	res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"broken": {0: makeBatch(t, recordbatch.Uncompressed, 0, rec{value: prefixed(brokenID, nil, []byte{2})})}}))
	if res.answer == nil {
		t.Fatal("forwarded")
	}
	p := partitionOf(t, res.answer, "broken", 0)
	msg := deref(p.ErrorRecords[0].ErrorMessage)
	if p.ErrorCode != kerr.InvalidRecord.Code || !strings.HasPrefix(msg, fmt.Sprintf("value: AVRO schema id %d does not compile: ", brokenID)) {
		t.Errorf("code %d, record error %q", p.ErrorCode, msg)
	}
}

// Every invalid record of a batch is listed, by its index in the batch;
// the partition's error_message gives the first and the count.
func TestEveryInvalidRecordListed(t *testing.T) {
	x := newFixture(t)
	c, _ := testCtx(t)
	batch := makeBatch(t, recordbatch.Uncompressed, 0,
		rec{value: []byte(`{"ok":1}`)}, rec{value: []byte(`nope`)}, rec{value: []byte(`2`)}, rec{value: []byte(`{`)})
	res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"events": {0: batch}}))
	if res.answer == nil {
		t.Fatal("forwarded")
	}
	p := partitionOf(t, res.answer, "events", 0)
	var idx []int32
	for _, re := range p.ErrorRecords {
		idx = append(idx, re.RelativeOffset)
	}
	if fmt.Sprint(idx) != "[1 3]" {
		t.Errorf("record errors at %v, want [1 3]", idx)
	}
	if msg := deref(p.ErrorMessage); !strings.Contains(msg, "record 1 of the batch") || !strings.HasSuffix(msg, "; 2 invalid records in all") {
		t.Errorf("error_message %q", msg)
	}
}

// Batches that cannot be read are refused with the code a broker or the
// record-encryption filter gives, never forwarded unchecked.
func TestUnreadableBatches(t *testing.T) {
	x := newFixture(t)
	good := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`1`)})
	// A damaged batch whose records fail: CORRUPT_MESSAGE, which the
	// producer retries, not INVALID_RECORD, which it must not.
	crc := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`{broken`)})
	crc[17] ^= 1
	legacy := append([]byte(nil), good...)
	legacy[16] = 1
	trailing := append([]byte(nil), good...)
	trailing = append(trailing, 0) // a byte the batch length does not cover
	over := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`1`)}, rec{value: []byte(`2`)})
	over = append(over[:len(over)-4], over[len(over)-3:]...) // the last record cut
	recordbatch.Finish(over, 0)
	bomb := makeBatch(t, recordbatch.Gzip, 0, rec{value: make([]byte, 16<<20)})
	for _, tc := range []struct {
		name  string
		batch []byte
		code  *kerr.Error
		want  string
	}{
		{"bad crc", crc, kerr.CorruptMessage, "CRC"},
		{"legacy format", legacy, kerr.UnsupportedForMessageFormat, "legacy message format"},
		{"bytes past the batch", trailing, kerr.InvalidRecord, "record data ends inside a record batch"},
		{"malformed record", over, kerr.InvalidRecord, "malformed record"},
		{"decompression bomb", bomb, kerr.InvalidRecord, "max_compression_ratio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := testCtx(t)
			res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"events": {0: tc.batch}}))
			if res.answer == nil {
				t.Fatal("forwarded")
			}
			p := partitionOf(t, res.answer, "events", 0)
			if p.ErrorCode != tc.code.Code || !strings.Contains(deref(p.ErrorMessage), tc.want) || len(p.ErrorRecords) != 0 {
				t.Errorf("code %d, message %q, %d record errors; want %s naming %q", p.ErrorCode, deref(p.ErrorMessage), len(p.ErrorRecords), tc.code.Message, tc.want)
			}
		})
	}
}

// A batch whose records pass but whose CRC is wrong goes to the broker as
// sent: the broker checks the CRC (and answers CORRUPT_MESSAGE), so the
// filter does not pay for it on the good path.
func TestGoodRecordsBadCRCForwarded(t *testing.T) {
	x := newFixture(t)
	b := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`1`)})
	b[17] ^= 1
	c, _ := testCtx(t)
	res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"events": {0: b}}))
	if res.answer != nil {
		t.Fatalf("answered locally: %+v", res.answer)
	}
}

// Compressed batches of every codec are checked after decompression, and
// a valid one goes upstream as the producer's bytes.
func TestEveryCodec(t *testing.T) {
	x := newFixture(t)
	for _, k := range []recordbatch.Codec{recordbatch.Uncompressed, recordbatch.Gzip, recordbatch.Snappy, recordbatch.LZ4, recordbatch.Zstd} {
		t.Run(k.String(), func(t *testing.T) {
			c, _ := testCtx(t)
			var recs []rec
			for i := range 50 {
				recs = append(recs, rec{value: prefixed(x.avroID, nil, avroBody(t, fmt.Sprintf("order-%d", i), i))})
			}
			valid := makeBatch(t, k, 0, recs...)
			res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"orders": {0: valid}}))
			if res.upstream == nil || !res.untouched {
				t.Fatal("a valid batch was not forwarded as sent")
			}
			recs[37].value = []byte("plain text")
			res, _ = runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"orders": {0: makeBatch(t, k, 0, recs...)}}))
			if res.answer == nil {
				t.Fatal("an invalid batch was forwarded")
			}
			p := partitionOf(t, res.answer, "orders", 0)
			if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 37 {
				t.Errorf("record errors %+v, want record 37", p.ErrorRecords)
			}
		})
	}
}

// Partitions are refused one by one: the others of the request go
// upstream, and the answer the client gets holds both.
func TestMixedPartitions(t *testing.T) {
	x := newFixture(t)
	good := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`{"ok":true}`)})
	bad := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`not json`)})
	batches := map[string]map[int32][]byte{"events": {0: bad, 1: good}, "unchecked": {0: []byte("anything at all")}}
	for _, version := range []int16{3, 7, 9, 12} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			c, _ := testCtx(t)
			res, merged := runProduce(t, x.f, c, produceReq(version, -1, batches))
			if res.upstream == nil || res.untouched {
				t.Fatal("want a re-encoded request upstream")
			}
			var sent []string
			for _, rt := range res.upstream.Topics {
				for _, rp := range rt.Partitions {
					sent = append(sent, fmt.Sprintf("%s/%d", rt.Topic, rp.Partition))
				}
			}
			if strings.Join(sent, " ") != "events/1 unchecked/0" && strings.Join(sent, " ") != "unchecked/0 events/1" {
				t.Errorf("sent upstream %v, want events/1 and unchecked/0", sent)
			}
			if p := partitionOf(t, merged, "events", 0); p.ErrorCode != kerr.InvalidRecord.Code {
				t.Errorf("events/0: code %d", p.ErrorCode)
			}
			if p := partitionOf(t, merged, "events", 1); p.ErrorCode != 0 {
				t.Errorf("events/1: code %d", p.ErrorCode)
			}
			if p := partitionOf(t, merged, "unchecked", 0); p.ErrorCode != 0 {
				t.Errorf("unchecked/0: code %d", p.ErrorCode)
			}
			// Encoding the merged answer at the request's version keeps
			// what the version has room for.
			merged.Version = version
			var back kmsg.ProduceResponse
			back.Version = version
			if err := back.ReadFrom(merged.AppendTo(nil)); err != nil {
				t.Fatalf("the merged answer does not encode at v%d: %v", version, err)
			}
			if p := partitionOf(t, &back, "events", 0); (version >= 8) != (len(p.ErrorRecords) == 1 && p.ErrorMessage != nil) {
				t.Errorf("v%d: record errors %d, message %v", version, len(p.ErrorRecords), p.ErrorMessage)
			}
		})
	}
	if n := x.f.pending.Len(); n != 0 {
		t.Errorf("%d failures still pending after their responses", n)
	}
}

// With acks=0 there is no answer: a refused partition is dropped, the rest
// goes upstream, and nothing is kept for a response that never comes.
func TestAcksZero(t *testing.T) {
	x := newFixture(t)
	good := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`1`)})
	bad := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`x`)})
	c, _ := testCtx(t)
	res, _ := runProduce(t, x.f, c, produceReq(9, 0, map[string]map[int32][]byte{"events": {0: bad, 1: good}}))
	if res.upstream == nil || len(res.upstream.Topics) != 1 || len(res.upstream.Topics[0].Partitions) != 1 || res.upstream.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("upstream %+v, want events/1 alone", res.upstream)
	}
	if n := x.f.pending.Len(); n != 0 {
		t.Errorf("%d failures kept for a response that never comes", n)
	}
	// Everything refused: the filter answers, and the proxy drops the
	// answer of an acks=0 request.
	res, _ = runProduce(t, x.f, c, produceReq(9, 0, map[string]map[int32][]byte{"events": {0: bad}}))
	if res.answer == nil || res.upstream != nil {
		t.Fatal("a request with every partition refused went upstream")
	}
}

// While another connection waits for a refused partition's answer, Produce
// responses are decoded; those with nothing to add go on as the broker sent
// them.
func TestResponseWithNothingToAddIsUntouched(t *testing.T) {
	f := newFilter(t, Config{Rules: []Rule{{Topics: []string{"events"}, Value: &PartRule{JSON: &JSONRule{}}}}})
	other, _ := testCtx(t)
	f.pending.Add(other, 1, filter.Refused{Topic: "events"})
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	m := ch.ResponseMask(0, 9)
	if !ch.WantsResponse(m, ch.Len(), 0, 9, nil) {
		t.Fatal("the response is not looked at while a refusal waits")
	}
	c, _ := testCtx(t)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	fr := filter.Response{Header: filter.Header{Key: 0, Version: 9, CorrelationID: 7}, Body: resp}
	if err := ch.OnResponse(c, m, ch.Len(), &fr); err != nil {
		t.Fatal(err)
	}
	if !fr.Untouched() {
		t.Error("a response with nothing to add is re-encoded instead of forwarded as it came")
	}
}

// In warn mode an invalid batch is forwarded as sent, counted and logged.
func TestWarnMode(t *testing.T) {
	x := newFixture(t)
	c, logs := testCtx(t)
	batch := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`{}`)}, rec{value: []byte(`{`)}, rec{value: []byte(`[]`)})
	res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"watch": {0: batch}}))
	if res.upstream == nil || !res.untouched {
		t.Fatal("warn mode did not forward the batch as sent")
	}
	vc := c.VirtualCluster
	for outcome, want := range map[string]float64{"valid": 2, "invalid": 1, "unchecked": 0} {
		if got := testutil.ToFloat64(recordsTotal.WithLabelValues(vc, "watch", "8", outcome)); got != want {
			t.Errorf("records %s: %v, want %v", outcome, got, want)
		}
	}
	if got := testutil.ToFloat64(batchesTotal.WithLabelValues(vc, "watch", "8", "warned")); got != 1 {
		t.Errorf("batches warned: %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "mode warn") || !strings.Contains(logs.String(), "topic=watch") || !strings.Contains(logs.String(), "record 1 of the batch") {
		t.Errorf("log: %s", logs.String())
	}
}

// While the registry is down, a record whose schema is not cached gets a
// retriable KAFKA_STORAGE_ERROR, never a pass; cached schemas keep
// working; once it is back, the same batch goes through.
func TestRegistryDown(t *testing.T) {
	x := newFixture(t)
	c, _ := testCtx(t)
	cached := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: prefixed(x.avroID, nil, avroBody(t, "o", 1))})
	if res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"orders": {0: cached}})); res.upstream == nil {
		t.Fatal("a valid batch was refused")
	}
	lateID := x.reg.register(t, "orders-value", sr.TypeAvro, `{"type": "record", "name": "Order", "namespace": "shop", "fields": [
		{"name": "id", "type": "string"}, {"name": "amount", "type": "int"}, {"name": "note", "type": "string", "default": ""}]}`)
	late := makeBatch(t, recordbatch.Uncompressed, 0, rec{value: prefixed(lateID, nil, append(avroBody(t, "o", 1), 0))}, rec{value: prefixed(lateID, nil, append(avroBody(t, "o", 2), 0))})

	x.reg.down.Store(true)
	hits := x.reg.hits.Load()
	res, merged := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"orders": {0: late, 1: cached}}))
	if res.upstream == nil {
		t.Fatal("the cached schema's partition was refused too")
	}
	p := partitionOf(t, merged, "orders", 0)
	if p.ErrorCode != kerr.KafkaStorageError.Code || !kerr.KafkaStorageError.Retriable {
		t.Errorf("code %d, want KAFKA_STORAGE_ERROR, retriable", p.ErrorCode)
	}
	if msg := deref(p.ErrorMessage); !strings.HasPrefix(msg, "strait record-validation: cannot check the records now, retry: value: ") ||
		!strings.Contains(msg, fmt.Sprintf("schema id %d", lateID)) || len(p.ErrorRecords) != 0 {
		t.Errorf("error_message %q, %d record errors", msg, len(p.ErrorRecords))
	}
	if p := partitionOf(t, merged, "orders", 1); p.ErrorCode != 0 {
		t.Errorf("cached schema while the registry is down: code %d", p.ErrorCode)
	}
	// One lookup for the partition, which the HTTP transport may try
	// twice; the second record does not ask again.
	if n := x.reg.hits.Load() - hits; n > 2 {
		t.Errorf("%d requests to the registry for one partition", n)
	}
	// Back up: the producer's retries go through once the registry
	// answers (the schema layer waits a second before asking a registry
	// that failed again).
	x.reg.down.Store(false)
	waitFor(t, 10*time.Second, "the batch to pass once the registry is back", func() bool {
		res, _ := runProduce(t, x.f, c, produceReq(9, -1, map[string]map[int32][]byte{"orders": {0: late}}))
		return res.upstream != nil && res.untouched
	})
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// topicIDs resolves the topic IDs of Produce v13+ by a fixed map.
type topicIDs map[[16]byte]string

func (m topicIDs) TopicName(_ context.Context, id [16]byte) (string, error) {
	if n, ok := m[id]; ok {
		return n, nil
	}
	return "", errors.New("no such topic id")
}

// From v13 topics are named by ID: the rule is found through the resolved
// name, and the answer names the topic by ID; an ID that does not resolve
// is refused with a retriable error, not passed unchecked.
func TestTopicIDs(t *testing.T) {
	x := newFixture(t)
	c, _ := testCtx(t)
	events, unknown := [16]byte{1, 2, 3}, [16]byte{9}
	c.Topics = topicIDs{events: "events"}
	req := produceReq(13, -1, map[string]map[int32][]byte{"": {0: makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`{`)})}})
	req.Topics[0].TopicID = events
	other := kmsg.NewProduceRequestTopic()
	other.TopicID = unknown
	op := kmsg.NewProduceRequestTopicPartition()
	op.Records = makeBatch(t, recordbatch.Uncompressed, 0, rec{value: []byte(`{}`)})
	other.Partitions = append(other.Partitions, op)
	req.Topics = append(req.Topics, other)
	res, _ := runProduce(t, x.f, c, req)
	if res.answer == nil {
		t.Fatal("forwarded")
	}
	for _, rt := range res.answer.Topics {
		p := rt.Partitions[0]
		switch rt.TopicID {
		case events:
			if p.ErrorCode != kerr.InvalidRecord.Code || !strings.Contains(deref(p.ErrorMessage), "topic events,") {
				t.Errorf("events: code %d, %q", p.ErrorCode, deref(p.ErrorMessage))
			}
		case unknown:
			if p.ErrorCode != kerr.UnknownTopicID.Code {
				t.Errorf("unknown topic ID: code %d, want UNKNOWN_TOPIC_ID", p.ErrorCode)
			}
		default:
			t.Errorf("an answer for topic ID %x", rt.TopicID)
		}
	}
}
