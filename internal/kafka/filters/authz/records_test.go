package authz

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// aliceRules: every user may do everything on topics and groups named
// after them, and read "shared"; alice may also use transactional id
// "alice-tx".
func aliceRules() []Rule {
	return []Rule{
		allow(list("*"), "topic", list("{principal}-*"), "ALL"),
		allow(list("*"), "group", list("{principal}-*"), "ALL"),
		allow(list("*"), "topic", list("shared"), "READ"),
		allow(list("alice"), "transactional_id", list("alice-tx"), "ALL"),
	}
}

// produceOf is a Produce request of version v writing a batch to each
// partition of each topic.
func produceOf(v int16, topics map[string][]int32) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks = v, -1
	for name, parts := range topics {
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = name, idOf(name)
		for _, p := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch(false)
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// batch is a record batch header with or without the transactional flag.
func batch(transactional bool) []byte {
	b := kmsg.RecordBatch{Magic: 2, NumRecords: 0}
	if transactional {
		b.Attributes = 0x10
	}
	return b.AppendTo(nil)
}

// produceAnswer is a broker accepting every partition of req.
func produceAnswer(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset = p.Partition, 100
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// produceCodes maps "topic/partition" to its error code in resp, which
// must answer each partition once.
func produceCodes(t *testing.T, resp *kmsg.ProduceResponse, byID bool) map[string]int16 {
	t.Helper()
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		name := rt.Topic
		if byID {
			name = strings.TrimRight(string(rt.TopicID[:]), "\x00")
		}
		for _, p := range rt.Partitions {
			k := name + "/" + string(rune('0'+p.Partition))
			if _, dup := out[k]; dup {
				t.Errorf("%s answered twice", k)
			}
			out[k] = p.ErrorCode
		}
	}
	return out
}

func wantCodes(t *testing.T, got, want map[string]int16) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("answered %v, want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: code %d (answered: %v), want %d", k, g, ok, w)
		}
	}
}

func TestProduceAllowed(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	for _, v := range []int16{0, 3, 9, 12} {
		c, _ := testCtx(t, "alice")
		req := produceOf(v, map[string][]int32{"alice-a": {0, 1}, "alice-b": {0}})
		x := send(t, f, c, req)
		if len(x.upstream().(*kmsg.ProduceRequest).Topics) != 2 || !x.untouched() {
			t.Errorf("v%d: allowed produce changed: untouched=%v", v, x.untouched())
		}
		if f.refused.Len() != 0 {
			t.Errorf("v%d: %d refusals kept", v, f.refused.Len())
		}
	}
}

func TestProduceMixed(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, logs := testCtx(t, "alice")
	req := produceOf(9, map[string][]int32{"alice-a": {0, 1}, "bob-x": {0, 2}, "shared": {3}})
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.ProduceRequest)
	if len(up.Topics) != 1 || up.Topics[0].Topic != "alice-a" || x.untouched() {
		t.Fatalf("upstream topics %+v, untouched %v; want alice-a only", up.Topics, x.untouched())
	}
	resp := x.reply(produceAnswer(up)).(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, resp, false), map[string]int16{
		"alice-a/0": codeNone, "alice-a/1": codeNone,
		"bob-x/0": codeTopicAuth, "bob-x/2": codeTopicAuth, "shared/3": codeTopicAuth,
	})
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode == codeTopicAuth && (p.BaseOffset != -1 || p.ErrorMessage == nil) {
				t.Errorf("%s/%d: base offset %d, message %v", rt.Topic, p.Partition, p.BaseOffset, p.ErrorMessage)
			}
		}
	}
	if f.refused.Len() != 0 {
		t.Errorf("%d refusals left after the answer", f.refused.Len())
	}
	for _, w := range []string{`msg="authorization denied"`, "principal=alice", "api=Produce", "resource=topic", "name=bob-x", "operation=WRITE"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %s:\n%s", w, logs)
		}
	}
}

func TestProduceAllDenied(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "bob")
	x := send(t, f, c, produceOf(7, map[string][]int32{"alice-a": {0, 1}}))
	resp := x.mustAnswer().(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, resp, false), map[string]int16{"alice-a/0": codeTopicAuth, "alice-a/1": codeTopicAuth})
}

func TestProduceAnonymous(t *testing.T) {
	f := newFilter(t, append(aliceRules(), allow(list("anonymous"), "topic", list("public"), "WRITE"))...)
	c, logs := testCtx(t, "")
	x := send(t, f, c, produceOf(9, map[string][]int32{"public": {0}, "-x": {0}}))
	resp := x.reply(produceAnswer(x.upstream().(*kmsg.ProduceRequest))).(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, resp, false), map[string]int16{"public/0": codeNone, "-x/0": codeTopicAuth})
	if !strings.Contains(logs.String(), "authenticated=false") {
		t.Errorf("the log does not say the client is anonymous:\n%s", logs)
	}
}

func TestProduceTopicIDs(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x") // "gone" does not resolve
	req := produceOf(13, map[string][]int32{"alice-a": {0}, "bob-x": {1}, "gone": {2}})
	for i := range req.Topics {
		req.Topics[i].Topic = "" // v13 names topics by ID only
	}
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.ProduceRequest)
	if len(up.Topics) != 1 || up.Topics[0].TopicID != idOf("alice-a") {
		t.Fatalf("upstream %+v", up.Topics)
	}
	resp := x.reply(produceAnswer(up)).(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, resp, true), map[string]int16{"alice-a/0": codeNone, "bob-x/1": codeTopicAuth, "gone/2": codeUnknownTopicID})
}

func TestProduceTransactional(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	for _, c := range []struct {
		name          string
		principal     string
		txnID         *string
		transactional bool
		want          int16 // 0: forwarded
	}{
		{"allowed id", "alice", ptr("alice-tx"), true, 0},
		{"denied id", "alice", ptr("bob-tx"), true, codeTxnAuth},
		{"id of another user", "carol", ptr("alice-tx"), true, codeTxnAuth},
		{"transactional batch without an id", "alice", nil, true, codeTxnAuth},
		{"denied id, plain batches", "alice", ptr("bob-tx"), false, codeTxnAuth},
		{"idempotent", "alice", nil, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, _ := testCtx(t, c.principal)
			req := produceOf(9, map[string][]int32{c.principal + "-a": {0, 1}})
			req.TransactionID = c.txnID
			for i := range req.Topics[0].Partitions {
				req.Topics[0].Partitions[i].Records = batch(c.transactional)
			}
			x := send(t, f, ctx, req)
			if c.want == 0 {
				x.upstream()
				return
			}
			resp := x.mustAnswer().(*kmsg.ProduceResponse)
			wantCodes(t, produceCodes(t, resp, false), map[string]int16{c.principal + "-a/0": c.want, c.principal + "-a/1": c.want})
		})
	}
}

func TestProduceAcks0Denied(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := produceOf(9, map[string][]int32{"alice-a": {0}, "bob-x": {0}})
	req.Acks = 0
	if err := sendErr(t, f, c, req); !strings.Contains(err.Error(), "acks=0") {
		t.Errorf("error %v", err)
	}
	req = produceOf(9, map[string][]int32{"alice-a": {0}})
	req.Acks, req.TransactionID = 0, ptr("bob-tx")
	sendErr(t, f, c, req)
	// Allowed, acks=0 goes upstream as usual.
	req = produceOf(9, map[string][]int32{"alice-a": {0}})
	req.Acks = 0
	send(t, f, c, req).upstream()
}

func TestProduceNewerVersion(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	x := send(t, f, c, produceOf(14, map[string][]int32{"alice-a": {0}}))
	wantCodes(t, produceCodes(t, x.mustAnswer().(*kmsg.ProduceResponse), false), map[string]int16{"alice-a/0": codeUnsupportedVer})
}

// fetchOf is a Fetch request of version v for the partitions of topics.
func fetchOf(v int16, topics map[string][]int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.SessionID, r.SessionEpoch = v, 77, 3
	for name, parts := range topics {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = name, idOf(name)
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	r.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "old", TopicID: idOf("old"), Partitions: []int32{0}}}
	return r
}

func fetchAnswer(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = req.SessionID
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.RecordBatches = p.Partition, 10, []byte{1}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func fetchCodes(t *testing.T, resp *kmsg.FetchResponse, byID bool) map[string]int16 {
	t.Helper()
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		name := rt.Topic
		if byID {
			name = strings.TrimRight(string(rt.TopicID[:]), "\x00")
		}
		for _, p := range rt.Partitions {
			k := name + "/" + string(rune('0'+p.Partition))
			if _, dup := out[k]; dup {
				t.Errorf("%s answered twice", k)
			}
			out[k] = p.ErrorCode
			if p.ErrorCode != codeNone && (p.RecordBatches == nil || len(p.RecordBatches) != 0 || p.HighWatermark != -1) {
				t.Errorf("%s: refused with records %v, high watermark %d", k, p.RecordBatches, p.HighWatermark)
			}
		}
	}
	return out
}

func TestFetchAllowed(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	for _, v := range []int16{0, 4, 7, 12} {
		c, _ := testCtx(t, "alice")
		x := send(t, f, c, fetchOf(v, map[string][]int32{"alice-a": {0, 1}, "shared": {0}}))
		up := x.upstream().(*kmsg.FetchRequest)
		if len(up.Topics) != 2 || !x.untouched() || up.SessionID != 77 {
			t.Errorf("v%d: allowed fetch changed", v)
		}
		// Nothing pending: the skimmer keeps the response as bytes.
		if f.WantsResponse(1, v, nil) {
			t.Errorf("v%d: the filter wants a fetch response it has nothing to add to", v)
		}
	}
}

func TestFetchMixed(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	x := send(t, f, c, fetchOf(12, map[string][]int32{"alice-a": {0, 1}, "bob-x": {0, 1}}))
	up := x.upstream().(*kmsg.FetchRequest)
	if len(up.Topics) != 1 || up.Topics[0].Topic != "alice-a" {
		t.Fatalf("upstream %+v", up.Topics)
	}
	if up.SessionID != 0 || up.SessionEpoch != -1 || up.ForgottenTopics != nil {
		t.Errorf("session %d epoch %d forgotten %v: want a sessionless fetch", up.SessionID, up.SessionEpoch, up.ForgottenTopics)
	}
	resp := x.reply(fetchAnswer(up)).(*kmsg.FetchResponse)
	wantCodes(t, fetchCodes(t, resp, false), map[string]int16{
		"alice-a/0": codeNone, "alice-a/1": codeNone, "bob-x/0": codeTopicAuth, "bob-x/1": codeTopicAuth,
	})
}

func TestFetchOldVersionKeepsSession(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	// Before v7 there are no sessions to drop.
	x := send(t, f, c, fetchOf(6, map[string][]int32{"alice-a": {0}, "bob-x": {0}}))
	up := x.upstream().(*kmsg.FetchRequest)
	resp := x.reply(fetchAnswer(up)).(*kmsg.FetchResponse)
	wantCodes(t, fetchCodes(t, resp, false), map[string]int16{"alice-a/0": codeNone, "bob-x/0": codeTopicAuth})
}

func TestFetchAllDenied(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "carol")
	x := send(t, f, c, fetchOf(11, map[string][]int32{"alice-a": {0}, "bob-x": {3}}))
	resp := x.mustAnswer().(*kmsg.FetchResponse)
	wantCodes(t, fetchCodes(t, resp, false), map[string]int16{"alice-a/0": codeTopicAuth, "bob-x/3": codeTopicAuth})
	if resp.SessionID != 0 || resp.ErrorCode != 0 {
		t.Errorf("session %d, error %d: want a sessionless answer with per-partition errors", resp.SessionID, resp.ErrorCode)
	}
}

func TestFetchTopicIDs(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x")
	req := fetchOf(13, map[string][]int32{"alice-a": {0}, "bob-x": {1}, "gone": {2}})
	for i := range req.Topics {
		req.Topics[i].Topic = ""
	}
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.FetchRequest)
	resp := x.reply(fetchAnswer(up)).(*kmsg.FetchResponse)
	wantCodes(t, fetchCodes(t, resp, true), map[string]int16{"alice-a/0": codeNone, "bob-x/1": codeTopicAuth, "gone/2": codeUnknownTopicID})
}

func TestFetchFollower(t *testing.T) {
	f := newFilter(t, allow(list("*"), "topic", list("*"), "ALL"), allow(list("*"), "cluster", nil, "ALL"))
	c, logs := testCtx(t, "broker", "a")
	for _, v := range []int16{11, 15} {
		req := fetchOf(v, map[string][]int32{"a": {0}})
		if v < 15 {
			req.ReplicaID = 1
		} else {
			req.ReplicaState.ID = 1
		}
		resp := send(t, f, c, req).mustAnswer().(*kmsg.FetchResponse)
		wantCodes(t, fetchCodes(t, resp, false), map[string]int16{"a/0": codeTopicAuth})
	}
	if !strings.Contains(logs.String(), "operation=CLUSTER_ACTION") {
		t.Errorf("log:\n%s", logs)
	}
	// A consumer's v15 fetch has no replica state.
	send(t, f, c, fetchOf(15, map[string][]int32{"a": {0}})).upstream()
}

func TestFetchNewerVersion(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	resp := send(t, f, c, fetchOf(19, map[string][]int32{"alice-a": {0}})).mustAnswer().(*kmsg.FetchResponse)
	if resp.ErrorCode != codeUnsupportedVer {
		t.Errorf("top-level error %d", resp.ErrorCode)
	}
	wantCodes(t, fetchCodes(t, resp, false), map[string]int16{"alice-a/0": codeUnsupportedVer})
}

// A fixup kept for one connection's request does not touch another's
// response with the same correlation id.
func TestRefusalsPerConnection(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c1, _ := testCtx(t, "alice")
	c2, _ := testCtx(t, "alice")
	x1 := send(t, f, c1, produceOf(9, map[string][]int32{"alice-a": {0}, "bob-x": {0}}))
	x2 := send(t, f, c2, produceOf(9, map[string][]int32{"alice-a": {0}}))
	r2 := x2.reply(produceAnswer(x2.upstream().(*kmsg.ProduceRequest))).(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, r2, false), map[string]int16{"alice-a/0": codeNone})
	r1 := x1.reply(produceAnswer(x1.upstream().(*kmsg.ProduceRequest))).(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, r1, false), map[string]int16{"alice-a/0": codeNone, "bob-x/0": codeTopicAuth})
}

// A connection's remembered decisions belong to its principal: one that
// re-authenticates as someone else is decided afresh.
func TestConnDecisionsFollowThePrincipal(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	send(t, f, c, produceOf(9, map[string][]int32{"alice-a": {0}})).upstream()
	c.SetPrincipal("bob")
	resp := send(t, f, c, produceOf(9, map[string][]int32{"alice-a": {0}})).mustAnswer().(*kmsg.ProduceResponse)
	wantCodes(t, produceCodes(t, resp, false), map[string]int16{"alice-a/0": codeTopicAuth})
	c.SetPrincipal("alice")
	send(t, f, c, produceOf(9, map[string][]int32{"alice-a": {0}})).upstream()
}

func TestConnDecisionsBounded(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	for i := range 3 * maxConnDecisions {
		name := fmt.Sprintf("alice-%d", i)
		send(t, f, c, produceOf(9, map[string][]int32{name: {0}})).upstream()
		if n := len(f.connDecisions(c, "alice").m); n > maxConnDecisions {
			t.Fatalf("the connection remembers %d decisions, bound %d", n, maxConnDecisions)
		}
	}
}
