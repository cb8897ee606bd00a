package fieldencryption

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/straitgw/strait/internal/schema"
)

// twoMessagesProto has a ssn in its first message only: a config naming
// ssn fits the schema as New checks it (the first message) and not the
// records of the second.
const twoMessagesProto = `syntax = "proto3";
package t;
message WithSSN { string ssn = 1; }
message WithoutSSN { string id = 1; }`

// schemaRule is a config of the Person schemas (Avro id 1, Protobuf id 2)
// whose rule encrypts paths of the values of topics pii* in format.
func schemaRule(format string, paths ...string) Config {
	cfg := schemaConfig()
	var fs []Field
	for _, p := range paths {
		fs = append(fs, Field{Path: p})
	}
	cfg.Rules[0].Value = &Part{Format: format, Fields: fs}
	return cfg
}

// withTwoMessages adds twoMessagesProto to cfg's schemas, as id 3.
func withTwoMessages(cfg Config) Config {
	cfg.Schemas = append(cfg.Schemas, schema.SchemaConfig{ID: 3, Type: "PROTOBUF", Schema: twoMessagesProto})
	return cfg
}

// TestProduceFailsClosed produces records in which a configured field
// cannot be encrypted: each partition is refused with the code its
// producer acts on, a message naming the field (or what else is at fault)
// and saying what is wrong, and none of its bytes go upstream.
func TestProduceFailsClosed(t *testing.T) {
	k := testKMS(t, "kek")
	avroBody := avroPerson(t, "123-45-6789", nil, nil)[5:]
	withoutSSN := append(schema.AppendMessageIndexes(schema.AppendPrefix(nil, 3), []int{1}),
		protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "p-1")...)
	cases := []struct {
		name  string
		cfg   Config
		value []byte
		code  *kerr.Error
		says  []string
	}{
		{"json missing field", jsonConfig("ssn"), []byte(`{"id":"a","name":"123-45-6789"}`),
			kerr.InvalidRecord, []string{`value: field "ssn"`, "is missing", "record at offset 0"}},
		{"json nested missing field", jsonConfig("customer.ssn"), []byte(`{"customer":{"id":"123-45-6789"}}`),
			kerr.InvalidRecord, []string{`field "customer.ssn"`, "is missing"}},
		{"json number at ssn", jsonConfig("ssn"), []byte(`{"ssn":123456789}`),
			kerr.InvalidRecord, []string{`field "ssn"`, "is a number, not a string"}},
		{"json object at ssn", jsonConfig("ssn"), []byte(`{"ssn":{"v":"123-45-6789"}}`),
			kerr.InvalidRecord, []string{`field "ssn"`, "not a string"}},
		{"not json", jsonConfig("ssn"), []byte(`ssn=123-45-6789`),
			kerr.InvalidRecord, []string{"value: ", "not JSON"}},
		{"truncated json", jsonConfig("ssn"), []byte(`{"ssn":"123-45-6789"`),
			kerr.InvalidRecord, []string{"value: ", "not JSON"}},
		{"avro without prefix", schemaRule(formatAvro, "ssn"), avroBody,
			kerr.InvalidRecord, []string{"value: ", "does not carry a schema id"}},
		{"auto without prefix", schemaRule(formatAuto, "ssn"), []byte(`{"ssn":"123-45-6789"}`),
			kerr.InvalidRecord, []string{"value: ", "does not carry a schema id"}},
		{"unknown schema id", schemaRule(formatAvro, "ssn"), append(schema.AppendPrefix(nil, 99), avroBody...),
			kerr.InvalidRecord, []string{"value: ", "schema id 99 is not registered"}},
		{"protobuf schema under avro", schemaRule(formatAvro, "ssn"), protoPerson("123-45-6789"),
			kerr.InvalidRecord, []string{"value: ", "schema id 2 is PROTOBUF", "the rule says avro"}},
		{"avro schema under protobuf", schemaRule(formatProtobuf, "ssn"), avroPerson(t, "123-45-6789", nil, nil),
			kerr.InvalidRecord, []string{"value: ", "schema id 1 is AVRO", "the rule says protobuf"}},
		{"schema lacks the path", withTwoMessages(schemaRule(formatProtobuf, "ssn")), withoutSSN,
			kerr.InvalidRecord, []string{"value: ", `field path "ssn"`, "t.WithoutSSN has no field"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(tc.cfg, k)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			c, _ := testCtx(t, "")
			in := makeBatch(t, kgo.NoCompression(), rec{key: []byte("k"), value: tc.value})
			out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: in}}))
			t.Log(wantRefused(t, out, "pii-people", 0, tc.code, tc.says, "123-45-6789"))
			if out.upstream != nil {
				t.Errorf("the filter sent a request upstream with nothing in it: %+v", out.upstream.Topics)
			}
		})
	}
}

// TestProduceFailsClosedKMS produces while the KMS is down (retriable) and
// under a KEK the vault lacks (not retriable).
func TestProduceFailsClosedKMS(t *testing.T) {
	value := []byte(`{"ssn":"123-45-6789"}`)
	t.Run("kms down", func(t *testing.T) {
		k := testKMS(t, "kek")
		f := newFilter(t, jsonConfig("ssn"), k)
		k.down.Store(true)
		c, _ := testCtx(t, "")
		out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: makeBatch(t, kgo.NoCompression(), rec{value: value})}}))
		wantRefused(t, out, "pii-people", 0, kerr.KafkaStorageError, []string{"kms unavailable", "switched off"}, "123-45-6789")
		if !kerr.KafkaStorageError.Retriable {
			t.Error("KAFKA_STORAGE_ERROR is not retriable: a producer would drop its records")
		}
		// Back up, the same records go through.
		k.down.Store(false)
		out = runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: makeBatch(t, kgo.NoCompression(), rec{value: value})}}))
		if _, ok := out.sent("pii-people", 0); !ok {
			t.Error("records refused after the KMS came back")
		}
	})
	t.Run("kms down, deterministic", func(t *testing.T) {
		k := testKMS(t, "kek")
		cfg := jsonConfig()
		cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic}}
		f := newFilter(t, cfg, k)
		k.down.Store(true)
		c, _ := testCtx(t, "")
		out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: makeBatch(t, kgo.NoCompression(), rec{value: value})}}))
		wantRefused(t, out, "pii-people", 0, kerr.KafkaStorageError, []string{"kms unavailable"}, "123-45-6789")
	})
	t.Run("kek missing", func(t *testing.T) {
		k := testKMS(t, "kek")
		cfg := jsonConfig("ssn")
		cfg.Rules[0].KEK = "{topic}-kek"
		f := newFilter(t, cfg, k)
		c, _ := testCtx(t, "")
		out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: makeBatch(t, kgo.NoCompression(), rec{value: value})}}))
		wantRefused(t, out, "pii-people", 0, kerr.PolicyViolation, []string{"key not found", `"pii-people-kek"`}, "123-45-6789")
	})
	t.Run("kek missing, deterministic", func(t *testing.T) {
		k := testKMS(t, "kek")
		cfg := jsonConfig()
		cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic, KEK: "det-kek"}}
		f := newFilter(t, cfg, k)
		c, _ := testCtx(t, "")
		out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: makeBatch(t, kgo.NoCompression(), rec{value: value})}}))
		wantRefused(t, out, "pii-people", 0, kerr.PolicyViolation, []string{"key not found", `"det-kek"`}, "123-45-6789")
	})
}

// TestProduceOptionalAbsent produces records that lack a field the schema
// lets them lack: they go upstream as they came, with no marker.
func TestProduceOptionalAbsent(t *testing.T) {
	k := testKMS(t, "kek")
	optional := jsonConfig()
	optional.Rules[0].Value.Fields = []Field{{Path: "ssn", Optional: true}}
	cases := []struct {
		name  string
		cfg   Config
		value []byte
	}{
		{"json optional missing", optional, []byte(`{"id":"a"}`)},
		{"json null", jsonConfig("ssn"), []byte(`{"id":"a","ssn":null}`)},
		{"json nested null", jsonConfig("customer.ssn"), []byte(`{"customer":null}`)},
		{"avro union null", schemaRule(formatAvro, "nick"), avroPerson(t, "123-45-6789", nil, nil)},
		{"proto3 optional absent", schemaRule(formatProtobuf, "nick"), protoPerson("123-45-6789")},
		{"auto, avro union null", schemaRule(formatAuto, "nick"), avroPerson(t, "123-45-6789", nil, nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(t, tc.cfg, k)
			c, _ := testCtx(t, "")
			in := makeBatch(t, kgo.NoCompression(), rec{key: []byte("k"), value: tc.value})
			up := produceOne(t, f, c, "pii-people", in)
			if !bytes.Equal(up, in) {
				t.Errorf("a record with nothing to encrypt changed on its way upstream:\n got %x\nwant %x", up, in)
			}
		})
	}
	// With a field to encrypt beside the absent one, the record is
	// encrypted and comes back whole.
	t.Run("avro union null beside a present field", func(t *testing.T) {
		f := newFilter(t, schemaRule(formatAvro, "nick", "ssn"), k)
		c, _ := testCtx(t, "")
		v := avroPerson(t, "123-45-6789", nil, nil)
		up := produceOne(t, f, c, "pii-people", makeBatch(t, kgo.NoCompression(), rec{value: v}))
		st := decodeRecords(t, up)[0]
		if bytes.Contains(st.Value, []byte("123-45-6789")) {
			t.Fatal("ssn stored in clear")
		}
		markerOf(t, st)
		p, _ := fetchOne(t, f, c, "pii-people", up)
		if got := values(t, p.RecordBatches); len(got) != 1 || !bytes.Equal(got[0], v) {
			t.Errorf("fetched %x, produced %x", got, v)
		}
	})
}

// ssnText is an ssn in clear.
var ssnText = regexp.MustCompile(`[0-9]{3}-[0-9]{2}-[0-9]{4}`)

// TestProduceMixedBatch produces a partition whose batch holds good
// records and one bad one, beside a good partition of the same topic and
// a good topic: the bad partition is refused whole, the others go upstream
// with their records encrypted.
func TestProduceMixedBatch(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn"), k)
	c, _ := testCtx(t, "")
	good := func(ssn string) rec { return rec{value: []byte(`{"ssn":"` + ssn + `"}`)} }
	mixed := makeBatch(t, kgo.NoCompression(), good("111-11-1111"), rec{value: []byte(`{"id":"no ssn"}`)}, good("222-22-2222"))
	req := producePartitions(map[string]map[int32][]byte{
		"pii-a": {0: mixed, 1: makeBatch(t, kgo.NoCompression(), good("333-33-3333"))},
		"pii-b": {0: makeBatch(t, kgo.GzipCompression(), good("444-44-4444"), good("555-55-5555"))},
		"plain": {0: makeBatch(t, kgo.NoCompression(), good("666-66-6666"))},
	})
	out := runProduceAll(t, f, c, req)
	wantRefused(t, out, "pii-a", 0, kerr.InvalidRecord, []string{"record at offset 1", `field "ssn"`, "is missing"}, "111-11-1111")
	for _, tp := range []struct {
		topic     string
		partition int32
		encrypted bool
	}{{"pii-a", 1, true}, {"pii-b", 0, true}, {"plain", 0, false}} {
		recs, ok := out.sent(tp.topic, tp.partition)
		if !ok {
			t.Errorf("%s/%d did not go upstream", tp.topic, tp.partition)
			continue
		}
		if _, ok := out.answer(tp.topic, tp.partition); ok {
			t.Errorf("%s/%d went upstream and was refused too", tp.topic, tp.partition)
		}
		for _, r := range decodeRecords(t, recs) {
			inClear := ssnText.Match(r.Value)
			if inClear == tp.encrypted {
				t.Errorf("%s/%d stored %q: want encrypted %v", tp.topic, tp.partition, r.Value, tp.encrypted)
			}
			if tp.encrypted {
				markerOf(t, r)
			}
		}
	}
	if n := len(out.resp.Topics); n != 1 {
		t.Errorf("the response has %d topics, want only the refused partition's", n)
	}
}

// TestTooManyValuesForOneDEK: a record with more values under one KEK than
// dek.max_records lets one DEK seal is refused as INVALID_RECORD, which a
// producer does not retry: no retry would fit them.
func TestTooManyValuesForOneDEK(t *testing.T) {
	cfg := jsonConfig("tags[*]")
	cfg.DEK.MaxRecords = 2
	f := newFilter(t, cfg, testKMS(t, "kek"))
	c, _ := testCtx(t, "")
	in := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"tags":["a","b","c"]}`)})
	up, refused := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-x": in}))
	p, ok := refused["pii-x"]
	if !ok || up["pii-x"] != nil {
		t.Fatal("a record of 3 values under a DEK good for 2 was not refused")
	}
	if p.ErrorCode != kerr.InvalidRecord.Code || !strings.Contains(*p.ErrorMessage, "dek.max_records") {
		t.Errorf("refused with %d %q, want INVALID_RECORD naming dek.max_records", p.ErrorCode, *p.ErrorMessage)
	}
	in = makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"tags":["a","b"]}`)})
	if _, refused := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-x": in})); len(refused) != 0 {
		t.Errorf("2 values under a DEK good for 2 refused: %+v", refused)
	}
}
