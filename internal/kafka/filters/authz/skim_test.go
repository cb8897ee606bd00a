package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// TestPassRequest: what the filter lets through unread is exactly what
// OnRequest would leave untouched; everything else is left to OnRequest.
func TestPassRequest(t *testing.T) {
	f := newFilter(t, benchRules()...)
	produce := func(version int16, txn *string, topics ...string) []byte {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TransactionID = version, -1, txn
		for _, name := range topics {
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic, pt.TopicID = name, idOf(name)
			pt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, 70)}}
			r.Topics = append(r.Topics, pt)
		}
		return r.AppendTo(nil)
	}
	fetch := func(version int16, replica int32, topics ...string) []byte {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.ReplicaID, r.ReplicaState.ID, r.SessionEpoch = version, replica, replica, -1
		for _, name := range topics {
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = name, idOf(name)
			ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
			r.Topics = append(r.Topics, ft)
		}
		return r.AppendTo(nil)
	}
	txn := "alice-tx"
	for _, tc := range []struct {
		name      string
		principal string
		key       int16
		version   int16
		body      []byte
		whole     bool
		pass      bool
	}{
		{"produce to an own topic", "alice", wire.KeyProduce, 9, produce(9, nil, "alice-orders"), true, true},
		{"produce, body cut after the topic", "alice", wire.KeyProduce, 9, produce(9, nil, "alice-orders")[:30], false, true},
		{"produce v3 (legacy encoding)", "alice", wire.KeyProduce, 3, produce(3, nil, "alice-orders"), true, true},
		{"produce v13 by topic ID", "alice", wire.KeyProduce, 13, produce(13, nil, "alice-orders"), true, true},
		{"produce v13, ID that does not resolve", "alice", wire.KeyProduce, 13, produce(13, nil, "nobody-knows"), true, false},
		{"produce to another's topic", "alice", wire.KeyProduce, 9, produce(9, nil, "bob-orders"), true, false},
		{"produce, anonymous", "", wire.KeyProduce, 9, produce(9, nil, "alice-orders"), true, false},
		{"produce to two own topics", "alice", wire.KeyProduce, 9, produce(9, nil, "alice-a", "alice-b"), true, true},
		{"produce v13 to two own topics", "alice", wire.KeyProduce, 13, produce(13, nil, "alice-orders", "alice-a"), true, true},
		{"produce to two topics, one another's", "alice", wire.KeyProduce, 9, produce(9, nil, "alice-a", "bob-b"), true, false},
		{"produce to two topics, not whole", "alice", wire.KeyProduce, 9, produce(9, nil, "alice-a", "alice-b"), false, false},
		{"transactional produce", "alice", wire.KeyProduce, 9, produce(9, &txn, "alice-orders"), true, false},
		{"produce, prefix too short", "alice", wire.KeyProduce, 9, produce(9, nil, "alice-orders")[:8], false, false},
		{"produce newer than checked", "alice", wire.KeyProduce, 14, produce(13, nil, "alice-orders"), true, false},
		{"fetch of own topics", "alice", wire.KeyFetch, 12, fetch(12, -1, "alice-a", "alice-b"), true, true},
		{"fetch v16 by topic ID", "alice", wire.KeyFetch, 16, fetch(16, -1, "alice-a"), true, true},
		{"fetch with one other's topic", "alice", wire.KeyFetch, 12, fetch(12, -1, "alice-a", "bob-b"), true, false},
		{"fetch, not whole", "alice", wire.KeyFetch, 12, fetch(12, -1, "alice-a"), false, false},
		{"a follower's fetch", "alice", wire.KeyFetch, 12, fetch(12, 1, "alice-a"), true, false},
		{"a follower's fetch v15", "alice", wire.KeyFetch, 15, fetch(15, 1, "alice-a"), true, false},
		{"metadata is never passed", "alice", wire.KeyMetadata, 12, kmsg.NewPtrMetadataRequest().AppendTo(nil), true, false},
	} {
		c, logs := testCtx(t, tc.principal, "alice-orders", "alice-a")
		h := filter.Header{Key: tc.key, Version: tc.version}
		if got := f.PassRequest(c, h, tc.body, tc.whole); got != tc.pass {
			t.Errorf("%s: passed %v, want %v", tc.name, got, tc.pass)
		}
		if logs.String() != "" {
			t.Errorf("%s: logged %q: refusals are logged when OnRequest takes the request", tc.name, logs.String())
		}
	}
}
