package wire_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// skimmedFetch is what SkimFetch reports of a body.
func skimmedFetch(body []byte, v int16) (topics []wire.FetchTopic, follower, ok bool) {
	follower, ok = wire.SkimFetch(body, v, func(t wire.FetchTopic) bool {
		topics = append(topics, t)
		return true
	})
	return topics, follower, ok
}

// checkFetchSkim compares SkimFetch's answer on body with what kmsg
// decodes from it. strict: body is kmsg's own encoding of r, so the
// skimmer must read it.
func checkFetchSkim(t *testing.T, r *kmsg.FetchRequest, body []byte, strict bool) {
	t.Helper()
	v := r.Version
	topics, follower, ok := skimmedFetch(body, v)
	if !ok {
		if strict {
			t.Fatalf("Fetch v%d: kmsg's own encoding did not skim: % x", v, body)
		}
		return
	}
	if len(topics) != len(r.Topics) {
		t.Fatalf("Fetch v%d: skimmed %d topics, kmsg reads %d", v, len(topics), len(r.Topics))
	}
	for i, rt := range r.Topics {
		if v >= 13 && topics[i].ID != rt.TopicID || v < 13 && string(topics[i].Name) != rt.Topic {
			t.Fatalf("Fetch v%d topic %d: skimmed %q/%x, kmsg reads %q/%x", v, i, topics[i].Name, topics[i].ID, rt.Topic, rt.TopicID)
		}
	}
	// A replica's fetch is never taken for a consumer's.
	if v < 15 && follower != (r.ReplicaID >= 0) || v >= 15 && !follower && r.ReplicaState.ID >= 0 {
		t.Fatalf("Fetch v%d: follower %v for replica id %d, replica state %d", v, follower, r.ReplicaID, r.ReplicaState.ID)
	}
	if _, _, ok := skimmedFetch(body[:len(body)-1], v); ok {
		t.Fatalf("Fetch v%d: body without its last byte skimmed", v)
	}
}

func checkProduceSkim(t *testing.T, r *kmsg.ProduceRequest, body []byte, strict bool) {
	t.Helper()
	checkProduceTopics(t, r, body, strict)
	v := r.Version
	p, ok := wire.SkimProduce(body, v)
	if !ok {
		if strict {
			t.Fatalf("Produce v%d: kmsg's own encoding did not skim: % x", v, body)
		}
		return
	}
	if p.Acks != r.Acks || p.Topics != len(r.Topics) || p.Transactional != (v >= 3 && r.TransactionID != nil) {
		t.Fatalf("Produce v%d: skimmed %+v; kmsg reads acks %d, %d topics, transactional id %v", v, p, r.Acks, len(r.Topics), r.TransactionID)
	}
	if len(r.Topics) > 0 && (v >= 13 && p.ID != r.Topics[0].TopicID || v < 13 && string(p.Name) != r.Topics[0].Topic) {
		t.Fatalf("Produce v%d: skimmed first topic %q/%x, kmsg reads %q/%x", v, p.Name, p.ID, r.Topics[0].Topic, r.Topics[0].TopicID)
	}
}

// checkProduceTopics compares SkimProduceTopics on body with what kmsg
// reads.
func checkProduceTopics(t *testing.T, r *kmsg.ProduceRequest, body []byte, strict bool) {
	t.Helper()
	v := r.Version
	var names []string
	var ids [][16]byte
	_, ok := wire.SkimProduceTopics(body, v, func(name []byte, id [16]byte) bool {
		names, ids = append(names, string(name)), append(ids, id)
		return true
	})
	if !ok {
		if strict {
			t.Fatalf("Produce v%d: kmsg's own encoding did not skim to its end: % x", v, body)
		}
		return
	}
	if len(names) != len(r.Topics) {
		t.Fatalf("Produce v%d: skimmed %d topics, kmsg reads %d", v, len(names), len(r.Topics))
	}
	for i, rt := range r.Topics {
		if v >= 13 && ids[i] != rt.TopicID || v < 13 && names[i] != rt.Topic {
			t.Fatalf("Produce v%d topic %d: skimmed %q/%x, kmsg reads %q/%x", v, i, names[i], ids[i], rt.Topic, rt.TopicID)
		}
	}
	if len(body) > 0 {
		if _, ok := wire.SkimProduceTopics(body[:len(body)-1], v, func([]byte, [16]byte) bool { return true }); ok {
			t.Fatalf("Produce v%d: body without its last byte skimmed to its end", v)
		}
	}
}

// TestSkimRequests: requests as clients write them skim to what kmsg reads.
func TestSkimRequests(t *testing.T) {
	for v := int16(4); v <= wire.MaxVersion(wire.KeyFetch); v++ {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.ReplicaID, r.ReplicaState.ID, r.SessionID, r.SessionEpoch = v, -1, -1, 7, 3
		for _, name := range []string{"orders", "payments", ""} {
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = name, [16]byte{byte(len(name)), 1}
			for p := range 3 {
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.FetchOffset = int32(p), 1<<40
				ft.Partitions = append(ft.Partitions, fp)
			}
			r.Topics = append(r.Topics, ft)
		}
		r.ForgottenTopics = append(r.ForgottenTopics, kmsg.FetchRequestForgottenTopic{Topic: "old", Partitions: []int32{1, 2}})
		r.Rack = "rack-a"
		checkFetchSkim(t, r, r.AppendTo(nil), true)
		if v < 15 {
			r.ReplicaID = 2
		} else {
			r.ReplicaState.ID = 2
		}
		checkFetchSkim(t, r, r.AppendTo(nil), true)
	}
	if _, ok := wire.SkimFetch(kmsg.NewPtrFetchRequest().AppendTo(nil), 3, func(wire.FetchTopic) bool { return true }); ok {
		t.Error("Fetch v3 skimmed: versions before 4 are decoded instead")
	}
	for v := int16(0); v <= wire.MaxVersion(wire.KeyProduce); v++ {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks = v, -1
		for _, name := range []string{"orders", "payments"} {
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic, pt.TopicID = name, [16]byte{byte(len(name))}
			pt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 1, Records: bytes.Repeat([]byte{9}, 100)}}
			r.Topics = append(r.Topics, pt)
			body := r.AppendTo(nil)
			checkProduceSkim(t, r, body, true)
			// The prefix up to the end of the first topic's name is enough.
			first := []byte(r.Topics[0].Topic)
			if v >= 13 {
				first = r.Topics[0].TopicID[:]
			}
			end := bytes.Index(body, first) + len(first)
			if p, ok := wire.SkimProduce(body[:end], v); !ok || p.Topics != len(r.Topics) {
				t.Errorf("Produce v%d: a prefix without the records skimmed to %+v, %v", v, p, ok)
			}
		}
		if v >= 3 {
			id := "tx-1"
			r.TransactionID = &id
			checkProduceSkim(t, r, r.AppendTo(nil), true)
		}
	}
}

// FuzzSkimRequestsStructured builds Fetch and Produce requests from the
// fuzzer's bytes with kmsg and checks the skimmers against the message.
func FuzzSkimRequestsStructured(f *testing.F) {
	f.Add([]byte{}, int16(0), false)
	f.Add(bytes.Repeat([]byte{1, 2, 3, 0xff, 0x80}, 40), int16(3), false)
	f.Add(bytes.Repeat([]byte{2, 7, 0, 0xfe, 0x41, 3}, 60), int16(4), true)
	f.Fuzz(func(t *testing.T, data []byte, version int16, produce bool) {
		if produce {
			r := kmsg.NewPtrProduceRequest()
			r.Version = fuzzVersion(version, 0, wire.MaxVersion(wire.KeyProduce))
			(&byteFiller{src: data}).fill(reflect.ValueOf(r).Elem(), 0)
			checkProduceSkim(t, r, r.AppendTo(nil), true)
			return
		}
		r := kmsg.NewPtrFetchRequest()
		r.Version = fuzzVersion(version, 4, wire.MaxVersion(wire.KeyFetch))
		(&byteFiller{src: data}).fill(reflect.ValueOf(r).Elem(), 0)
		checkFetchSkim(t, r, r.AppendTo(nil), true)
	})
}

// FuzzSkimRequests: on any bytes, the skimmers never panic, and where kmsg
// reads the body (as a broker would) they report what it reads.
func FuzzSkimRequests(f *testing.F) {
	f.Add([]byte{}, int16(12), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, int16(7), false)
	f.Add([]byte{0, 0xff, 0xff, 0, 0, 0, 0, 2, 7, 'o', 'r', 'd', 'e', 'r', 's'}, int16(9), true)
	f.Fuzz(func(t *testing.T, data []byte, version int16, produce bool) {
		if produce {
			r := kmsg.NewPtrProduceRequest()
			r.Version = fuzzVersion(version, 0, wire.MaxVersion(wire.KeyProduce))
			if err := r.ReadFrom(data); err == nil {
				checkProduceSkim(t, r, data, false)
			} else {
				wire.SkimProduce(data, r.Version)
			}
			return
		}
		r := kmsg.NewPtrFetchRequest()
		r.Version = fuzzVersion(version, 4, wire.MaxVersion(wire.KeyFetch))
		if err := r.ReadFrom(data); err == nil {
			checkFetchSkim(t, r, data, false)
		} else {
			skimmedFetch(data, r.Version)
		}
	})
}
