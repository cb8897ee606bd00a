package authz

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataOf is a Metadata request of version v for the named topics;
// nil names ask for all topics.
func metadataOf(v int16, names ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = v
	if names == nil {
		r.Topics = nil
		return r
	}
	r.Topics = []kmsg.MetadataRequestTopic{}
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = ptr(n)
		r.Topics = append(r.Topics, t)
	}
	return r
}

// metadataAnswer is a broker holding topics: each one asked for (or all,
// for an all-topics request) with a partition, and the others asked for
// as unknown.
func metadataAnswer(req *kmsg.MetadataRequest, topics ...string) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9092}}
	entry := func(name string, exists bool) {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = ptr(name)
		if exists {
			t.TopicID = idOf(name)
			t.Partitions = []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 1}}
		} else {
			t.ErrorCode = codeUnknownTopic
		}
		resp.Topics = append(resp.Topics, t)
	}
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, n := range topics {
			entry(n, true)
		}
		return resp
	}
	for _, t := range req.Topics {
		entry(*t.Topic, slices.Contains(topics, *t.Topic))
	}
	return resp
}

// metadataCodes maps each answered topic (by name, or "id:<name>" for an
// unnamed entry) to its error code.
func metadataCodes(t *testing.T, resp *kmsg.MetadataResponse) map[string]int16 {
	t.Helper()
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		k := "id:" + string(trimID(rt.TopicID))
		if rt.Topic != nil {
			k = *rt.Topic
			if rt.ErrorCode != 0 && rt.TopicID != ([16]byte{}) {
				t.Errorf("%s: refused with its topic ID", k)
			}
		}
		if _, dup := out[k]; dup {
			t.Errorf("%s answered twice", k)
		}
		out[k] = rt.ErrorCode
	}
	return out
}

func trimID(id [16]byte) []byte {
	b := id[:]
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

var clusterTopics = []string{"alice-a", "alice-b", "bob-x", "shared", "__consumer_offsets"}

func TestMetadataAllTopics(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	for _, v := range []int16{0, 1, 4, 9, 12, 13} {
		c, _ := testCtx(t, "alice")
		var req *kmsg.MetadataRequest
		if v == 0 {
			req = metadataOf(0) // v0: an empty list is all topics
		} else {
			req = metadataOf(v, nil...)
		}
		x := send(t, f, c, req)
		resp := x.reply(metadataAnswer(x.upstream().(*kmsg.MetadataRequest), clusterTopics...)).(*kmsg.MetadataResponse)
		wantCodes(t, metadataCodes(t, resp), map[string]int16{"alice-a": 0, "alice-b": 0, "shared": 0})
		if len(resp.Brokers) != 1 {
			t.Errorf("v%d: brokers %v", v, resp.Brokers)
		}
	}
}

func TestMetadataAnonymousSeesNothing(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "")
	x := send(t, f, c, metadataOf(12, nil...))
	resp := x.reply(metadataAnswer(x.upstream().(*kmsg.MetadataRequest), clusterTopics...)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 0 {
		t.Errorf("anonymous sees %d topics", len(resp.Topics))
	}
}

func TestMetadataNamed(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	x := send(t, f, c, metadataOf(9, "alice-a", "bob-x", "shared"))
	up := x.upstream().(*kmsg.MetadataRequest)
	if len(up.Topics) != 2 {
		t.Fatalf("upstream asks for %d topics, want alice-a and shared", len(up.Topics))
	}
	resp := x.reply(metadataAnswer(up, clusterTopics...)).(*kmsg.MetadataResponse)
	wantCodes(t, metadataCodes(t, resp), map[string]int16{"alice-a": 0, "shared": 0, "bob-x": codeTopicAuth})
}

func TestMetadataNamedAllowedUntouched(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	x := send(t, f, c, metadataOf(9, "alice-a", "shared"))
	if !x.untouched() || f.fixups.Len() != 0 {
		t.Errorf("untouched %v, fixups %d: an allowed named request needs nothing", x.untouched(), f.fixups.Len())
	}
}

func TestMetadataEveryNamedDenied(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	for _, v := range []int16{0, 1, 12} {
		c, _ := testCtx(t, "alice")
		x := send(t, f, c, metadataOf(v, "bob-x", "bob-y"))
		up := x.upstream().(*kmsg.MetadataRequest)
		if v > 0 && (up.Topics == nil || len(up.Topics) != 0) {
			t.Errorf("v%d: upstream topics %v: want an empty list, not all topics", v, up.Topics)
		}
		resp := x.reply(metadataAnswer(up, clusterTopics...)).(*kmsg.MetadataResponse)
		wantCodes(t, metadataCodes(t, resp), map[string]int16{"bob-x": codeTopicAuth, "bob-y": codeTopicAuth})
	}
}

func TestMetadataTopicIDs(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x")
	req := metadataOf(12)
	for _, n := range []string{"alice-a", "bob-x", "gone"} {
		tt := kmsg.NewMetadataRequestTopic()
		tt.TopicID = idOf(n)
		req.Topics = append(req.Topics, tt)
	}
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.MetadataRequest)
	if len(up.Topics) != 1 || up.Topics[0].TopicID != idOf("alice-a") {
		t.Fatalf("upstream %+v", up.Topics)
	}
	broker := kmsg.NewPtrMetadataResponse()
	bt := kmsg.NewMetadataResponseTopic()
	bt.Topic, bt.TopicID = ptr("alice-a"), idOf("alice-a")
	// Unnamed entries: an error tells nothing and stays; a described
	// topic without its name cannot be checked and goes.
	unknown, unnamed := kmsg.NewMetadataResponseTopic(), kmsg.NewMetadataResponseTopic()
	unknown.TopicID, unknown.ErrorCode = idOf("other"), codeUnknownTopicID
	unnamed.TopicID = idOf("hidden")
	broker.Topics = append(broker.Topics, bt, unknown, unnamed)
	resp := x.reply(broker).(*kmsg.MetadataResponse)
	wantCodes(t, metadataCodes(t, resp), map[string]int16{
		"alice-a": 0, "id:bob-x": codeTopicAuth, "id:gone": codeUnknownTopicID, "id:other": codeUnknownTopicID,
	})
}

func TestMetadataAutoCreate(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	// alice may create alice-*, not shared (which she may read) nor
	// bob-x (which she may not even describe).
	req := metadataOf(9, "alice-new", "shared", "shared-missing", "bob-x")
	req.AllowAutoTopicCreation = true
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.MetadataRequest)
	if up.AllowAutoTopicCreation {
		t.Error("auto-creation stays on for a topic the principal may not create")
	}
	resp := x.reply(metadataAnswer(up, "shared")).(*kmsg.MetadataResponse)
	wantCodes(t, metadataCodes(t, resp), map[string]int16{
		"alice-new":      codeUnknownTopic, // may be created, but not in this request
		"shared":         0,                // exists: described
		"shared-missing": codeTopicAuth,    // READ is on "shared" only
		"bob-x":          codeTopicAuth,
	})

	// Every topic creatable: the flag stays.
	req = metadataOf(9, "alice-new")
	req.AllowAutoTopicCreation = true
	x = send(t, f, c, req)
	if !x.upstream().(*kmsg.MetadataRequest).AllowAutoTopicCreation || !x.untouched() {
		t.Error("auto-creation of a creatable topic was changed")
	}
}

func TestMetadataAutoCreateMissingIsRefused(t *testing.T) {
	f := newFilter(t, allow(list("u"), "topic", list("*"), "DESCRIBE"))
	c, logs := testCtx(t, "u")
	req := metadataOf(9, "exists", "missing")
	req.AllowAutoTopicCreation = true
	x := send(t, f, c, req)
	resp := x.reply(metadataAnswer(x.upstream().(*kmsg.MetadataRequest), "exists")).(*kmsg.MetadataResponse)
	wantCodes(t, metadataCodes(t, resp), map[string]int16{"exists": 0, "missing": codeTopicAuth})
	if !containsAll(logs.String(), "operation=CREATE", "name=missing") {
		t.Errorf("log:\n%s", logs)
	}
}

func TestMetadataOldVersionCannotTurnOffCreation(t *testing.T) {
	f := newFilter(t, allow(list("u"), "topic", list("*"), "DESCRIBE"), allow(list("u"), "topic", list("mine"), "CREATE"))
	c, _ := testCtx(t, "u")
	x := send(t, f, c, metadataOf(3, "exists", "mine"))
	up := x.upstream().(*kmsg.MetadataRequest)
	if len(up.Topics) != 1 || *up.Topics[0].Topic != "mine" {
		t.Fatalf("upstream %+v: a v3 request may create what it names", up.Topics)
	}
	resp := x.reply(metadataAnswer(up, "exists", "mine")).(*kmsg.MetadataResponse)
	wantCodes(t, metadataCodes(t, resp), map[string]int16{"mine": 0, "exists": codeTopicAuth})
}

func TestMetadataAuthorizedOperations(t *testing.T) {
	f := newFilter(t, append(aliceRules(), allow(list("alice"), "cluster", nil, "DESCRIBE", "IDEMPOTENT_WRITE"))...)
	c, _ := testCtx(t, "alice")
	req := metadataOf(10, "alice-a", "shared")
	req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = true, true
	x := send(t, f, c, req)
	resp := x.reply(metadataAnswer(x.upstream().(*kmsg.MetadataRequest), clusterTopics...)).(*kmsg.MetadataResponse)
	want := map[string]int32{
		"alice-a": int32(setOf(opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs)),
		"shared":  int32(setOf(opRead, opDescribe)),
	}
	for _, rt := range resp.Topics {
		if got := rt.AuthorizedOperations; got != want[*rt.Topic] {
			t.Errorf("%s: authorized ops %b, want %b", *rt.Topic, got, want[*rt.Topic])
		}
	}
	if got, w := resp.AuthorizedOperations, int32(setOf(opDescribe, opIdempotentWrite)); got != w {
		t.Errorf("cluster ops %b, want %b", got, w)
	}
	// Without DESCRIBE on the cluster, a broker reports none.
	c2, _ := testCtx(t, "bob")
	x = send(t, f, c2, req)
	resp = x.reply(metadataAnswer(x.upstream().(*kmsg.MetadataRequest))).(*kmsg.MetadataResponse)
	if resp.AuthorizedOperations != 0 {
		t.Errorf("bob's cluster ops %b", resp.AuthorizedOperations)
	}
}

func TestMetadataNewerVersion(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	resp := send(t, f, c, metadataOf(14, "alice-a")).mustAnswer().(*kmsg.MetadataResponse)
	if resp.ErrorCode != codeUnsupportedVer || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != codeUnsupportedVer {
		t.Errorf("answer %+v", resp)
	}
}

func describeTopicsOf(names ...string) *kmsg.DescribeTopicPartitionsRequest {
	r := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, n := range names {
		r.Topics = append(r.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
	}
	return r
}

func describeTopicsAnswer(req *kmsg.DescribeTopicPartitionsRequest, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	names := topics
	if len(req.Topics) > 0 {
		names = nil
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
	}
	for _, n := range names {
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.TopicID = ptr(n), idOf(n)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func describeTopicsCodes(resp *kmsg.DescribeTopicPartitionsResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		out[*t.Topic] = t.ErrorCode
	}
	return out
}

func TestDescribeTopicPartitions(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")

	x := send(t, f, c, describeTopicsOf("alice-a", "bob-x"))
	up := x.upstream().(*kmsg.DescribeTopicPartitionsRequest)
	if len(up.Topics) != 1 {
		t.Fatalf("upstream %+v", up.Topics)
	}
	resp := x.reply(describeTopicsAnswer(up)).(*kmsg.DescribeTopicPartitionsResponse)
	wantCodes(t, describeTopicsCodes(resp), map[string]int16{"alice-a": 0, "bob-x": codeTopicAuth})
	for _, rt := range resp.Topics {
		if *rt.Topic == "alice-a" && rt.AuthorizedOperations != f.engine.Load().authorizedOps("alice", resTopic, "alice-a") {
			t.Errorf("alice-a authorized ops %b", rt.AuthorizedOperations)
		}
	}

	// All topics, with a cursor on a topic alice may not see.
	x = send(t, f, c, describeTopicsOf())
	broker := describeTopicsAnswer(x.upstream().(*kmsg.DescribeTopicPartitionsRequest), clusterTopics...)
	broker.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: "bob-y"}
	resp = x.reply(broker).(*kmsg.DescribeTopicPartitionsResponse)
	wantCodes(t, describeTopicsCodes(resp), map[string]int16{"alice-a": 0, "alice-b": 0, "shared": 0})
	if resp.NextCursor != nil {
		t.Errorf("cursor %+v names a hidden topic", resp.NextCursor)
	}

	// Every named topic refused: answered, since an empty list is all.
	resp = send(t, f, c, describeTopicsOf("bob-x")).mustAnswer().(*kmsg.DescribeTopicPartitionsResponse)
	wantCodes(t, describeTopicsCodes(resp), map[string]int16{"bob-x": codeTopicAuth})
}

func TestDescribeCluster(t *testing.T) {
	f := newFilter(t, append(aliceRules(), allow(list("alice"), "cluster", nil, "DESCRIBE", "ALTER_CONFIGS"))...)
	c, _ := testCtx(t, "")
	req := kmsg.NewPtrDescribeClusterRequest()
	x := send(t, f, c, req)
	if !x.untouched() {
		t.Error("DescribeCluster without authorized operations was changed")
	}
	c, _ = testCtx(t, "alice")
	req.IncludeClusterAuthorizedOperations = true
	x = send(t, f, c, req)
	resp := x.reply(kmsg.NewPtrDescribeClusterResponse()).(*kmsg.DescribeClusterResponse)
	if w := int32(setOf(opDescribe, opAlterConfigs, opDescribeConfigs)); resp.ClusterAuthorizedOperations != w {
		t.Errorf("cluster ops %b, want %b", resp.ClusterAuthorizedOperations, w)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
