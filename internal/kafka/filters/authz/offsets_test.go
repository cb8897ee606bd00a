package authz

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func offsetCommitOf(v int16, group string, topics map[string][]int32) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group = v, group
	for name, parts := range topics {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.TopicID = name, idOf(name)
		for _, p := range parts {
			t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 5})
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func offsetCommitAnswer(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	for _, t := range req.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func offsetCommitCodes(resp *kmsg.OffsetCommitResponse, byID bool) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		name := t.Topic
		if byID {
			name = string(trimID(t.TopicID))
		}
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", name, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

func TestOffsetCommit(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	topics := map[string][]int32{"alice-a": {0, 1}, "bob-x": {2}, "shared": {0}}

	resp := roundTrip(t, send(t, f, c, offsetCommitOf(8, "bob-g", topics)).mustAnswer()).(*kmsg.OffsetCommitResponse)
	wantCodes(t, offsetCommitCodes(resp, false), map[string]int16{
		"alice-a/0": codeGroupAuth, "alice-a/1": codeGroupAuth, "bob-x/2": codeGroupAuth, "shared/0": codeGroupAuth,
	})

	x := send(t, f, c, offsetCommitOf(8, "alice-g", topics))
	up := x.upstream().(*kmsg.OffsetCommitRequest)
	if len(up.Topics) != 2 {
		t.Fatalf("upstream %+v", up.Topics)
	}
	resp = roundTrip(t, x.reply(offsetCommitAnswer(up))).(*kmsg.OffsetCommitResponse)
	wantCodes(t, offsetCommitCodes(resp, false), map[string]int16{
		"alice-a/0": 0, "alice-a/1": 0, "shared/0": 0, "bob-x/2": codeTopicAuth,
	})

	resp = send(t, f, c, offsetCommitOf(2, "alice-g", map[string][]int32{"bob-x": {0}})).mustAnswer().(*kmsg.OffsetCommitResponse)
	wantCodes(t, offsetCommitCodes(resp, false), map[string]int16{"bob-x/0": codeTopicAuth})

	if x := send(t, f, c, offsetCommitOf(8, "alice-g", map[string][]int32{"alice-a": {0}})); !x.untouched() {
		t.Error("an allowed commit was changed")
	}
}

func TestOffsetCommitTopicIDs(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x")
	req := offsetCommitOf(10, "alice-g", map[string][]int32{"alice-a": {0}, "bob-x": {1}, "gone": {2}})
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.OffsetCommitRequest)
	resp := roundTrip(t, x.reply(offsetCommitAnswer(up))).(*kmsg.OffsetCommitResponse)
	wantCodes(t, offsetCommitCodes(resp, true), map[string]int16{"alice-a/0": 0, "bob-x/1": codeTopicAuth, "gone/2": codeUnknownTopicID})
}

func offsetFetchOld(v int16, group string, topics map[string][]int32) *kmsg.OffsetFetchRequest {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group = v, group
	if topics == nil {
		r.Topics = nil
		return r
	}
	for name, parts := range topics {
		r.Topics = append(r.Topics, kmsg.OffsetFetchRequestTopic{Topic: name, Partitions: parts})
	}
	return r
}

func offsetFetchOldCodes(resp *kmsg.OffsetFetchResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

func TestOffsetFetchOneGroup(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	topics := map[string][]int32{"alice-a": {0}, "bob-x": {1}}

	// Group refused: per partition before v2, top-level from v2.
	resp := roundTrip(t, send(t, f, c, offsetFetchOld(1, "bob-g", topics)).mustAnswer()).(*kmsg.OffsetFetchResponse)
	wantCodes(t, offsetFetchOldCodes(resp), map[string]int16{"alice-a/0": codeGroupAuth, "bob-x/1": codeGroupAuth})
	resp = roundTrip(t, send(t, f, c, offsetFetchOld(5, "bob-g", topics)).mustAnswer()).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != codeGroupAuth || len(resp.Topics) != 0 {
		t.Errorf("v5, group refused: %+v", resp)
	}

	x := send(t, f, c, offsetFetchOld(5, "alice-g", topics))
	up := x.upstream().(*kmsg.OffsetFetchRequest)
	if len(up.Topics) != 1 {
		t.Fatalf("upstream %+v", up.Topics)
	}
	broker := kmsg.NewPtrOffsetFetchResponse()
	broker.Topics = []kmsg.OffsetFetchResponseTopic{{Topic: "alice-a", Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0, Offset: 9}}}}
	resp = roundTrip(t, x.reply(broker)).(*kmsg.OffsetFetchResponse)
	wantCodes(t, offsetFetchOldCodes(resp), map[string]int16{"alice-a/0": 0, "bob-x/1": codeTopicAuth})
	for _, rt := range resp.Topics {
		if rt.Topic == "bob-x" && rt.Partitions[0].Offset != -1 {
			t.Errorf("refused partition has offset %d", rt.Partitions[0].Offset)
		}
	}

	// All topics: the answer keeps those alice may describe.
	x = send(t, f, c, offsetFetchOld(5, "alice-g", nil))
	broker = kmsg.NewPtrOffsetFetchResponse()
	for _, n := range list("alice-a", "bob-x", "shared") {
		broker.Topics = append(broker.Topics, kmsg.OffsetFetchResponseTopic{Topic: n, Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0}}})
	}
	resp = x.reply(broker).(*kmsg.OffsetFetchResponse)
	wantCodes(t, offsetFetchOldCodes(resp), map[string]int16{"alice-a/0": 0, "shared/0": 0})

	resp = send(t, f, c, offsetFetchOld(3, "alice-g", map[string][]int32{"bob-x": {0}})).mustAnswer().(*kmsg.OffsetFetchResponse)
	wantCodes(t, offsetFetchOldCodes(resp), map[string]int16{"bob-x/0": codeTopicAuth})
}

func TestOffsetFetchGroups(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x", "shared")
	for _, v := range []int16{8, 10} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = v
		group := func(name string, topics ...string) kmsg.OffsetFetchRequestGroup {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = name
			if topics == nil {
				g.Topics = nil
			}
			for _, n := range topics {
				g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: n, TopicID: idOf(n), Partitions: []int32{0}})
			}
			return g
		}
		req.Groups = []kmsg.OffsetFetchRequestGroup{group("bob-g", "alice-a"), group("alice-g", "alice-a", "bob-x"), group("alice-h")}
		x := send(t, f, c, req)
		up := x.upstream().(*kmsg.OffsetFetchRequest)
		if len(up.Groups) != 2 || len(up.Groups[0].Topics) != 1 || up.Groups[1].Topics != nil {
			t.Fatalf("v%d: upstream %+v", v, up.Groups)
		}
		broker := kmsg.NewPtrOffsetFetchResponse()
		for _, g := range []string{"alice-g", "alice-h"} {
			rg := kmsg.OffsetFetchResponseGroup{Group: g}
			for _, n := range list("alice-a", "bob-x", "shared") {
				if g == "alice-g" && n != "alice-a" {
					continue
				}
				rg.Topics = append(rg.Topics, kmsg.OffsetFetchResponseGroupTopic{Topic: n, TopicID: idOf(n), Partitions: []kmsg.OffsetFetchResponseGroupTopicPartition{{Partition: 0}}})
			}
			broker.Groups = append(broker.Groups, rg)
		}
		resp := roundTrip(t, x.reply(broker)).(*kmsg.OffsetFetchResponse)
		got := map[string]int16{}
		for _, g := range resp.Groups {
			got[g.Group] = g.ErrorCode
			for _, rt := range g.Topics {
				name := rt.Topic
				if v >= 10 {
					name = string(trimID(rt.TopicID))
				}
				got[g.Group+"/"+name] = rt.Partitions[0].ErrorCode
			}
		}
		wantCodes(t, got, map[string]int16{
			"bob-g":   codeGroupAuth,
			"alice-g": 0, "alice-g/alice-a": 0, "alice-g/bob-x": codeTopicAuth,
			"alice-h": 0, "alice-h/alice-a": 0, "alice-h/shared": 0,
		})
	}
}

func TestOffsetDelete(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := func(group string, topics ...string) *kmsg.OffsetDeleteRequest {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		for _, n := range topics {
			r.Topics = append(r.Topics, kmsg.OffsetDeleteRequestTopic{Topic: n, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
		}
		return r
	}
	resp := roundTrip(t, send(t, f, c, req("bob-g", "alice-a")).mustAnswer()).(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != codeGroupAuth {
		t.Errorf("bob-g: %d", resp.ErrorCode)
	}
	x := send(t, f, c, req("alice-g", "alice-a", "bob-x"))
	up := x.upstream().(*kmsg.OffsetDeleteRequest)
	if len(up.Topics) != 1 {
		t.Fatalf("upstream %+v", up.Topics)
	}
	broker := kmsg.NewPtrOffsetDeleteResponse()
	broker.Topics = []kmsg.OffsetDeleteResponseTopic{{Topic: "alice-a", Partitions: []kmsg.OffsetDeleteResponseTopicPartition{{Partition: 0}}}}
	resp = roundTrip(t, x.reply(broker)).(*kmsg.OffsetDeleteResponse)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	wantCodes(t, got, map[string]int16{"alice-a": 0, "bob-x": codeTopicAuth})

	resp = send(t, f, c, req("alice-g", "bob-x")).mustAnswer().(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != codeTopicAuth {
		t.Errorf("all topics refused: %+v", resp)
	}
}
