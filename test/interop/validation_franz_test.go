package interop

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// franzInvalidRecord is how franz-go's kgo reports INVALID_RECORD on a
// produced record: kerr.InvalidRecord alone. kgo negotiates Produce v8 and
// up, whose answer carries error_message and record_errors, but does not
// pass them on; TestValidationFranzGo's raw-produce shows they are there.
var franzInvalidRecord = regexp.MustCompile(`^INVALID_RECORD: This record has failed the validation on the broker and hence been rejected\.$`)

// Go types the serdes encode, one per format (a Serde finds its encoder by
// the value's type).
type (
	avroOrder struct {
		ID     string `avro:"id"`
		Amount int64  `avro:"amount"`
	}
	avroOrderRef struct {
		ID string `avro:"id"`
	}
	jsonOrder struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	jsonOrderRef struct {
		ID string `json:"id"`
	}
)

// TestValidationFranzGo produces through a validating gateway with
// franz-go: schemas registered with the sr client, records encoded by
// sr.Serde (Avro through hamba/avro, JSON through encoding/json, Protobuf
// through dynamicpb, with the message index [0]) and produced by an
// idempotent kgo producer, which must go on producing to a partition after
// the gateway refused batches of it. Then one raw Produce request shows the
// gateway's error_message and record_errors, which kgo does not pass on.
func TestValidationFranzGo(t *testing.T) {
	t.Parallel()
	e, regURL := startValidationEnv(t)
	p := planValidation(t, e, regURL, "franz", fmtAvro, fmtJSON, fmtProtobuf)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	reg, err := sr.NewClient(sr.URLs(regURL))
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.ClientID("strait-interop-franz"),
		kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	rep := valReport{Client: "franz-go with sr.Serde"}
	send := func(c, topic string, value []byte) {
		r := kgo.Record{Topic: topic, Key: []byte(c), Value: value}
		res := valResult{Case: c, Topic: topic, Value: value}
		if err := prod.ProduceSync(ctx, &r).FirstErr(); err != nil {
			res.Error = err.Error()
		}
		rep.Results = append(rep.Results, res)
	}
	register := func(subject, format, text string) int {
		t.Helper()
		s, err := reg.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: srType(format)})
		if err != nil {
			t.Fatalf("registering %s schema under %s: %v", format, subject, err)
		}
		return s.ID
	}

	ids := map[string]int{}
	for _, f := range []string{fmtAvro, fmtJSON, fmtProtobuf} {
		vf := p.spec.Formats[f]
		id := register(vf.Topic+"-value", f, vf.Schema)
		otherID := register(vf.OtherSubject, f, vf.OtherSchema)
		ids[f] = id
		serde, orders, other, second := franzSerde(t, f, id, otherID)
		var first []byte
		for _, v := range orders {
			b, err := serde.Encode(v)
			if err != nil {
				t.Fatalf("encoding a %s order: %v", f, err)
			}
			if first == nil {
				first = b
			}
			send(f+"/"+caseValid, vf.Topic, b)
		}
		b, err := serde.Encode(other)
		if err != nil {
			t.Fatalf("encoding a %s order reference: %v", f, err)
		}
		send(f+"/"+caseOtherSubject, vf.Topic, b)
		if second != nil {
			b, err := serde.Encode(second)
			if err != nil {
				t.Fatalf("encoding a refund: %v", err)
			}
			send(f+"/second-message", vf.Topic, b)
		}
		send(f+"/"+caseUnknownID, vf.Topic, withSchemaID(first, unknownID))
		bad := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
		if f == fmtProtobuf {
			bad = append(bad, 0) // message indexes [0]
		}
		send(f+"/"+caseMismatch, vf.Topic, append(bad, vf.BadBody...))
		// The idempotent producer goes on after refused batches.
		send(f+"/valid-again", vf.Topic, first)
	}
	send("no-prefix", p.spec.Formats[fmtJSON].Topic, []byte(noPrefix))
	send("events/valid", p.spec.EventsTopic, []byte(eventValid))
	send("events/broken", p.spec.EventsTopic, []byte(eventBroken))

	want := standardWants(p, franzInvalidRecord)
	for _, f := range []string{fmtAvro, fmtJSON, fmtProtobuf} {
		want[f+"/valid-again"] = valWant{land: true}
	}
	want[fmtProtobuf+"/second-message"] = valWant{land: true}
	checkValidation(t, e, p, rep, want)

	t.Run("raw-produce", func(t *testing.T) {
		// A record naming a schema id registered under another
		// subject, sent as one batch of a Produce request at the
		// highest version the gateway and kmsg share.
		vf := p.spec.Formats[fmtJSON]
		otherID := register(vf.OtherSubject, fmtJSON, vf.OtherSchema)
		value, err := json.Marshal(jsonOrderRef{ID: "o-raw"})
		if err != nil {
			t.Fatal(err)
		}
		value = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(otherID)), value...)
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = vf.Topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, oneRecordBatch(value)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		leader, topicID := leaderOf(ctx, t, prod, vf.Topic)
		rt.TopicID = topicID // Produce v13 and up name topics by id
		req.Topics[0] = rt
		kresp, err := prod.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		resp := kresp.(*kmsg.ProduceResponse)
		t.Logf("Produce v%d", resp.Version)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("answer for %d topics, want one partition of one", len(resp.Topics))
		}
		part := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("partition error %v, want INVALID_RECORD", err)
		}
		reason := regexp.MustCompile(fmt.Sprintf(`schema id %d is not registered for subject %s-value`, otherID, regexp.QuoteMeta(vf.Topic)))
		msg := deref(part.ErrorMessage)
		t.Logf("error_message %q", msg)
		if !reason.MatchString(msg) || !regexp.MustCompile(regexp.QuoteMeta(vf.Topic)).MatchString(msg) {
			t.Errorf("error_message %q, want the topic and %s", msg, reason)
		}
		if len(part.ErrorRecords) != 1 {
			t.Fatalf("%d record_errors, want 1", len(part.ErrorRecords))
		}
		re := part.ErrorRecords[0]
		t.Logf("record_errors [{%d %q}]", re.RelativeOffset, deref(re.ErrorMessage))
		if re.RelativeOffset != 0 || !reason.MatchString(deref(re.ErrorMessage)) {
			t.Errorf("record error {%d %q}, want {0 ...%s...}", re.RelativeOffset, deref(re.ErrorMessage), reason)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// leaderOf returns the leader of partition 0 of topic, and the topic's id.
func leaderOf(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) (int32, [16]byte) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	for _, mt := range resp.Topics {
		for _, mp := range mt.Partitions {
			if mp.Partition == 0 {
				return mp.Leader, mt.TopicID
			}
		}
	}
	t.Fatalf("metadata of %s: no partition 0", topic)
	return -1, [16]byte{}
}

func srType(format string) sr.SchemaType {
	switch format {
	case fmtJSON:
		return sr.TypeJSON
	case fmtProtobuf:
		return sr.TypeProtobuf
	}
	return sr.TypeAvro
}

// franzSerde returns a Serde that encodes orders under id and order
// references under otherID in format, with the values to encode: orders,
// a reference and, for Protobuf, a refund (the file's second message).
func franzSerde(t *testing.T, format string, id, otherID int) (serde *sr.Serde, orders []any, reference, refund any) {
	t.Helper()
	serde = new(sr.Serde)
	switch format {
	case fmtAvro:
		order, other := avro.MustParse(orderAvro), avro.MustParse(otherAvro)
		serde.Register(id, avroOrder{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(order, v) }))
		serde.Register(otherID, avroOrderRef{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(other, v) }))
		return serde, []any{avroOrder{"o-1", 12}, avroOrder{"o-2", 3400}}, avroOrderRef{"o-ref"}, nil
	case fmtJSON:
		serde.Register(id, jsonOrder{}, sr.EncodeFn(json.Marshal))
		serde.Register(otherID, jsonOrderRef{}, sr.EncodeFn(json.Marshal))
		return serde, []any{jsonOrder{"o-1", 12}, jsonOrder{"o-2", 3400}}, jsonOrderRef{"o-ref"}, nil
	}
	// Protobuf: an order and a reference are the first messages of their
	// files (indexes [0]), a refund the second of the order's ([1]). A
	// Serde tells values apart by type, and every dynamic message is a
	// *dynamicpb.Message, so references and refunds are wrapped.
	file := compileProto(t, "order.proto")
	md, refundMD := file.Messages().ByName("Order"), file.Messages().ByName("Refund")
	otherMD := compileProto(t, "order_ref.proto").Messages().ByName("OrderRef")
	marshal := func(v any) ([]byte, error) { return proto.Marshal(v.(*dynamicpb.Message)) }
	serde.Register(id, &dynamicpb.Message{}, sr.EncodeFn(marshal), sr.Index(0))
	serde.Register(id, protoRefund{}, sr.EncodeFn(func(v any) ([]byte, error) { return marshal(v.(protoRefund).m) }), sr.Index(1))
	serde.Register(otherID, protoRef{}, sr.EncodeFn(func(v any) ([]byte, error) { return marshal(v.(protoRef).m) }), sr.Index(0))
	order := func(id string, amount int64) any {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("id"), protoreflect.ValueOfString(id))
		m.Set(md.Fields().ByName("amount"), protoreflect.ValueOfInt64(amount))
		return m
	}
	ref := dynamicpb.NewMessage(otherMD)
	ref.Set(otherMD.Fields().ByName("id"), protoreflect.ValueOfString("o-ref"))
	rf := dynamicpb.NewMessage(refundMD)
	rf.Set(refundMD.Fields().ByName("order_id"), protoreflect.ValueOfString("o-1"))
	rf.Set(refundMD.Fields().ByName("cents"), protoreflect.ValueOfInt64(5))
	return serde, []any{order("o-1", 12), order("o-2", 3400)}, protoRef{ref}, protoRefund{rf}
}

// protoRef and protoRefund wrap dynamic messages so a Serde can tell them
// from an order.
type (
	protoRef    struct{ m *dynamicpb.Message }
	protoRefund struct{ m *dynamicpb.Message }
)

// withSchemaID returns a copy of a wire-format payload naming another
// schema id.
func withSchemaID(b []byte, id int) []byte {
	out := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(out[1:5], uint32(id))
	return out
}

// oneRecordBatch is a v2 record batch (uncompressed, not idempotent) of
// one record with no key and no headers.
func oneRecordBatch(value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // null key
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // no headers
	records := binary.AppendVarint(nil, int64(len(rec)))
	records = append(records, rec...)

	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              records,
	}
	out := b.AppendTo(nil)
	// Length counts what follows it; the CRC covers what follows it.
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}
