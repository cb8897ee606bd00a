package fieldencryption

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// TestFetchKMSDown fetches, through an instance that has not seen the
// records' keys, while the KMS is down: the partition fails with the
// retriable KAFKA_STORAGE_ERROR and gives nothing; principals who get the
// fields redacted need no key and get their records; once the KMS is back
// the same fetch decrypts.
func TestFetchKMSDown(t *testing.T) {
	for _, mode := range []string{modeRandom, modeDeterministic} {
		t.Run(mode, func(t *testing.T) {
			k := testKMS(t, "kek")
			cfg := jsonConfig()
			cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: mode}}
			cfg.Rules[0].Fetch = FetchRule{DecryptFor: []string{"alice"}, Others: othersRedact}
			c, _ := testCtx(t, "alice")
			in := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"123-45-6789"}`)})
			up := produceOne(t, newFilter(t, cfg, k), c, "pii-people", in)
			other := newFilter(t, cfg, k)
			k.down.Store(true)
			p, _ := fetchOne(t, other, c, "pii-people", up)
			if p.ErrorCode != kerr.KafkaStorageError.Code || len(p.RecordBatches) != 0 {
				t.Errorf("KMS down: error %d and %d bytes of records, want KAFKA_STORAGE_ERROR and none", p.ErrorCode, len(p.RecordBatches))
			}
			bob, _ := testCtx(t, "bob")
			if p, _ := fetchOne(t, other, bob, "pii-people", up); p.ErrorCode != 0 || string(values(t, p.RecordBatches)[0]) != `{"ssn":""}` {
				t.Errorf("KMS down, redacted: error %d, records %q", p.ErrorCode, values(t, p.RecordBatches))
			}
			k.down.Store(false)
			if p, _ := fetchOne(t, other, c, "pii-people", up); p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, in) {
				t.Errorf("KMS back: error %d, records %q", p.ErrorCode, values(t, p.RecordBatches))
			}
		})
	}
}

// topicIDs resolves the topic IDs of a test.
type topicIDs map[[16]byte]string

func (m topicIDs) TopicName(_ context.Context, id [16]byte) (string, error) {
	if n, ok := m[id]; ok {
		return n, nil
	}
	return "", errors.New("no such topic")
}

// TestShareFetch passes ShareFetch responses through the filter: a share
// group's records are restored as a consumer's are, and a partition that
// cannot be restored gets an error, a message and nothing acquired, so its
// records come again rather than being acknowledged unseen.
func TestShareFetch(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn"), k)
	ids := topicIDs{{1}: "pii-people", {2}: "orders"}
	c, _ := testCtx(t, "")
	c.Topics = ids
	in := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"123-45-6789"}`)})
	up := produceOne(t, f, c, "pii-people", in)
	st := decodeRecords(t, up)[0]
	st.Value = bytes.Clone(st.Value)
	st.Value[len(st.Value)-3] ^= 1
	tampered := rebatch(t, st)

	resp := kmsg.NewPtrShareFetchResponse()
	for _, tp := range []struct {
		id   [16]byte
		recs []byte
	}{{[16]byte{1}, up}, {[16]byte{1}, tampered}, {[16]byte{2}, in}, {[16]byte{3}, up}} {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = tp.id
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Records = tp.recs
		p.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 0, LastOffset: 0, DeliveryCount: 1}}
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
	}
	fr := &filter.Response{Header: filter.Header{Key: wire.KeyShareFetch, Version: 1, CorrelationID: 5}, Body: resp}
	if err := f.OnResponse(c, fr); err != nil {
		t.Fatal(err)
	}
	part := func(i int) kmsg.ShareFetchResponseTopicPartition { return resp.Topics[i].Partitions[0] }
	if p := part(0); p.ErrorCode != 0 || !bytes.Equal(p.Records, in) || len(p.AcquiredRecords) != 1 {
		t.Errorf("encrypted records: error %d, %q", p.ErrorCode, values(t, p.Records))
	}
	for i, code := range map[int]*kerr.Error{1: kerr.CorruptMessage, 3: kerr.UnknownTopicID} {
		p := part(i)
		if p.ErrorCode != code.Code || len(p.Records) != 0 || p.AcquiredRecords != nil || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "field-encryption") {
			t.Errorf("topic %d: error %d, message %v, %d bytes, %d acquired; want %s, a message and nothing", i, p.ErrorCode, p.ErrorMessage, len(p.Records), len(p.AcquiredRecords), code.Message)
		}
	}
	if p := part(2); p.ErrorCode != 0 || !bytes.Equal(p.Records, in) {
		t.Errorf("a topic no rule selects: error %d", p.ErrorCode)
	}
	if p := part(1); p.ErrorMessage != nil && !strings.Contains(*p.ErrorMessage, `field "ssn"`) {
		t.Errorf("the message %q does not name the field", *p.ErrorMessage)
	}
}
