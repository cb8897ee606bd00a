package authz

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestListOffsets(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := func(v int16, topics ...string) *kmsg.ListOffsetsRequest {
		r := kmsg.NewPtrListOffsetsRequest()
		r.Version = v
		for _, n := range topics {
			r.Topics = append(r.Topics, kmsg.ListOffsetsRequestTopic{Topic: n, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0}}})
		}
		return r
	}
	codes := func(resp *kmsg.ListOffsetsResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
			if rt.Partitions[0].ErrorCode != 0 && rt.Partitions[0].Offset != -1 {
				t.Errorf("%s refused with offset %d", rt.Topic, rt.Partitions[0].Offset)
			}
		}
		return out
	}
	for _, v := range versions(keyListOffsets) {
		x := send(t, f, c, req(v, "alice-a", "shared", "bob-x"))
		up := x.upstream().(*kmsg.ListOffsetsRequest)
		if len(up.Topics) != 2 {
			t.Fatalf("v%d: upstream %+v", v, up.Topics)
		}
		broker := kmsg.NewPtrListOffsetsResponse()
		for _, rt := range up.Topics {
			broker.Topics = append(broker.Topics, kmsg.ListOffsetsResponseTopic{Topic: rt.Topic, Partitions: []kmsg.ListOffsetsResponseTopicPartition{{Partition: 0, Offset: 4}}})
		}
		resp := roundTrip(t, x.reply(broker)).(*kmsg.ListOffsetsResponse)
		wantCodes(t, codes(resp), map[string]int16{"alice-a": 0, "shared": 0, "bob-x": codeTopicAuth})
		resp = roundTrip(t, send(t, f, c, req(v, "bob-x")).mustAnswer()).(*kmsg.ListOffsetsResponse)
		wantCodes(t, codes(resp), map[string]int16{"bob-x": codeTopicAuth})
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := func(v int16, topics ...string) *kmsg.OffsetForLeaderEpochRequest {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version = v
		for _, n := range topics {
			r.Topics = append(r.Topics, kmsg.OffsetForLeaderEpochRequestTopic{Topic: n, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0}}})
		}
		return r
	}
	codes := func(resp *kmsg.OffsetForLeaderEpochResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	x := send(t, f, c, req(4, "alice-a", "bob-x"))
	up := x.upstream().(*kmsg.OffsetForLeaderEpochRequest)
	broker := kmsg.NewPtrOffsetForLeaderEpochResponse()
	broker.Topics = []kmsg.OffsetForLeaderEpochResponseTopic{{Topic: up.Topics[0].Topic, Partitions: []kmsg.OffsetForLeaderEpochResponseTopicPartition{{Partition: 0}}}}
	resp := roundTrip(t, x.reply(broker)).(*kmsg.OffsetForLeaderEpochResponse)
	wantCodes(t, codes(resp), map[string]int16{"alice-a": 0, "bob-x": codeTopicAuth})

	follower := req(3, "alice-a")
	follower.ReplicaID = 2
	resp = roundTrip(t, send(t, f, c, follower).mustAnswer()).(*kmsg.OffsetForLeaderEpochResponse)
	wantCodes(t, codes(resp), map[string]int16{"alice-a": codeClusterAuth})
	// Before v3 the replica id is not on the wire.
	send(t, f, c, req(2, "alice-a")).upstream()
}

func TestDeleteRecordsAndDescribeProducers(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	dr := kmsg.NewPtrDeleteRecordsRequest()
	for _, n := range list("alice-a", "shared") { // shared: READ only
		dr.Topics = append(dr.Topics, kmsg.DeleteRecordsRequestTopic{Topic: n, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0}}})
	}
	x := send(t, f, c, dr)
	broker := kmsg.NewPtrDeleteRecordsResponse()
	broker.Topics = []kmsg.DeleteRecordsResponseTopic{{Topic: "alice-a", Partitions: []kmsg.DeleteRecordsResponseTopicPartition{{Partition: 0, LowWatermark: 3}}}}
	resp := roundTrip(t, x.reply(broker)).(*kmsg.DeleteRecordsResponse)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	wantCodes(t, got, map[string]int16{"alice-a": 0, "shared": codeTopicAuth})

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "shared", Partitions: []int32{0}}, {Topic: "bob-x", Partitions: []int32{1}}}
	x = send(t, f, c, dp)
	pb := kmsg.NewPtrDescribeProducersResponse()
	pb.Topics = []kmsg.DescribeProducersResponseTopic{{Topic: "shared", Partitions: []kmsg.DescribeProducersResponseTopicPartition{{Partition: 0}}}}
	presp := roundTrip(t, x.reply(pb)).(*kmsg.DescribeProducersResponse)
	got = map[string]int16{}
	for _, rt := range presp.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	wantCodes(t, got, map[string]int16{"shared": 0, "bob-x": codeTopicAuth})
}

func createTopicsOf(v int16, names ...string) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = v
	for _, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = n
		r.Topics = append(r.Topics, t)
	}
	return r
}

func TestCreateTopics(t *testing.T) {
	f := newFilter(t, append(aliceRules(),
		allow(list("maker"), "topic", list("*"), "CREATE"),
		allow(list("ops"), "cluster", nil, "CREATE"),
		allow(list("ops"), "topic", list("*"), "DESCRIBE_CONFIGS"))...)
	answer := func(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
		resp := kmsg.NewPtrCreateTopicsResponse()
		for _, tt := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tt.Topic, 3, 1
			rt.Configs = []kmsg.CreateTopicsResponseTopicConfig{{Name: "retention.ms", Value: ptr("1")}}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	byName := func(resp *kmsg.CreateTopicsResponse) map[string]kmsg.CreateTopicsResponseTopic {
		out := map[string]kmsg.CreateTopicsResponseTopic{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt
		}
		return out
	}

	c, _ := testCtx(t, "alice")
	x := send(t, f, c, createTopicsOf(7, "alice-new", "bob-new"))
	up := x.upstream().(*kmsg.CreateTopicsRequest)
	if len(up.Topics) != 1 || up.Topics[0].Topic != "alice-new" {
		t.Fatalf("upstream %+v", up.Topics)
	}
	got := byName(roundTrip(t, x.reply(answer(up))).(*kmsg.CreateTopicsResponse))
	if g := got["alice-new"]; g.ErrorCode != 0 || g.ConfigErrorCode != 0 || len(g.Configs) != 1 {
		t.Errorf("alice-new: %+v", g)
	}
	if g := got["bob-new"]; g.ErrorCode != codeTopicAuth || g.ConfigErrorCode != codeTopicAuth {
		t.Errorf("bob-new: %+v", g)
	}

	// CREATE without DESCRIBE_CONFIGS: created, configs withheld (v5+).
	c, _ = testCtx(t, "maker")
	x = send(t, f, c, createTopicsOf(5, "anything"))
	got = byName(roundTrip(t, x.reply(answer(x.upstream().(*kmsg.CreateTopicsRequest)))).(*kmsg.CreateTopicsResponse))
	if g := got["anything"]; g.ErrorCode != 0 || g.ConfigErrorCode != codeTopicAuth || len(g.Configs) != 0 || g.NumPartitions != -1 {
		t.Errorf("maker's topic: %+v", g)
	}
	if x := send(t, f, c, createTopicsOf(4, "anything")); !x.untouched() {
		t.Error("before v5 there are no configs to withhold")
	}

	// CREATE on the cluster creates any topic.
	c, _ = testCtx(t, "ops")
	if x := send(t, f, c, createTopicsOf(7, "x", "y")); !x.untouched() {
		t.Error("ops's create was changed")
	}

	c, _ = testCtx(t, "")
	resp := roundTrip(t, send(t, f, c, createTopicsOf(0, "x")).mustAnswer()).(*kmsg.CreateTopicsResponse)
	if resp.Topics[0].ErrorCode != codeTopicAuth {
		t.Errorf("anonymous: %+v", resp.Topics)
	}
}

func TestDeleteTopics(t *testing.T) {
	f := newFilter(t, append(aliceRules(), allow(list("alice"), "topic", list("ro"), "DESCRIBE"))...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x", "ro")
	codes := func(resp *kmsg.DeleteTopicsResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			k := "id:" + string(trimID(rt.TopicID))
			if rt.Topic != nil {
				k = *rt.Topic
			}
			out[k] = rt.ErrorCode
		}
		return out
	}
	// By name.
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TopicNames = 5, list("alice-a", "bob-x")
	x := send(t, f, c, req)
	if up := x.upstream().(*kmsg.DeleteTopicsRequest); len(up.TopicNames) != 1 {
		t.Fatalf("upstream %v", up.TopicNames)
	}
	broker := kmsg.NewPtrDeleteTopicsResponse()
	broker.Topics = []kmsg.DeleteTopicsResponseTopic{{Topic: ptr("alice-a")}}
	wantCodes(t, codes(roundTrip(t, x.reply(broker)).(*kmsg.DeleteTopicsResponse)), map[string]int16{"alice-a": 0, "bob-x": codeTopicAuth})

	// By ID (v6): unknown, not describable (no name in the answer),
	// describable but not deletable (named), allowed.
	req = kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	for _, n := range list("alice-a", "bob-x", "ro", "gone") {
		req.Topics = append(req.Topics, kmsg.DeleteTopicsRequestTopic{TopicID: idOf(n)})
	}
	req.Topics = append(req.Topics, kmsg.DeleteTopicsRequestTopic{Topic: ptr("bob-y")})
	x = send(t, f, c, req)
	if up := x.upstream().(*kmsg.DeleteTopicsRequest); len(up.Topics) != 1 || up.Topics[0].TopicID != idOf("alice-a") {
		t.Fatalf("upstream %+v", up.Topics)
	}
	broker = kmsg.NewPtrDeleteTopicsResponse()
	broker.Topics = []kmsg.DeleteTopicsResponseTopic{{Topic: ptr("alice-a"), TopicID: idOf("alice-a")}}
	wantCodes(t, codes(roundTrip(t, x.reply(broker)).(*kmsg.DeleteTopicsResponse)), map[string]int16{
		"alice-a": 0, "id:bob-x": codeTopicAuth, "ro": codeTopicAuth, "id:gone": codeUnknownTopicID, "bob-y": codeTopicAuth,
	})
}

func TestCreatePartitions(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "alice-a", Count: 4}, {Topic: "shared", Count: 4}}
	x := send(t, f, c, req)
	broker := kmsg.NewPtrCreatePartitionsResponse()
	broker.Topics = []kmsg.CreatePartitionsResponseTopic{{Topic: "alice-a"}}
	resp := roundTrip(t, x.reply(broker)).(*kmsg.CreatePartitionsResponse)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.ErrorCode
	}
	wantCodes(t, got, map[string]int16{"alice-a": 0, "shared": codeTopicAuth})
}

// configsRules: alice may describe and alter the configs of her topics and
// groups, and describe (not alter) the brokers'.
func configsRules() []Rule {
	return append(aliceRules(), allow(list("alice"), "cluster", nil, "DESCRIBE_CONFIGS"))
}

type configRes struct {
	typ  kmsg.ConfigResourceType
	name string
}

var configCases = []configRes{
	{kmsg.ConfigResourceTypeTopic, "alice-a"},
	{kmsg.ConfigResourceTypeTopic, "bob-x"},
	{kmsg.ConfigResourceTypeGroupConfig, "alice-g"},
	{kmsg.ConfigResourceTypeGroupConfig, "bob-g"},
	{kmsg.ConfigResourceTypeBroker, "1"},
	{kmsg.ConfigResourceTypeBrokerLogger, "1"},
	{kmsg.ConfigResourceTypeClientMetrics, "m"},
	{kmsg.ConfigResourceType(99), "?"},
}

func TestDescribeConfigs(t *testing.T) {
	f := newFilter(t, configsRules()...)
	c, _ := testCtx(t, "alice")
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range configCases {
		req.Resources = append(req.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: r.typ, ResourceName: r.name})
	}
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.DescribeConfigsRequest)
	broker := kmsg.NewPtrDescribeConfigsResponse()
	for _, r := range up.Resources {
		broker.Resources = append(broker.Resources, kmsg.DescribeConfigsResponseResource{ResourceType: r.ResourceType, ResourceName: r.ResourceName})
	}
	resp := roundTrip(t, x.reply(broker)).(*kmsg.DescribeConfigsResponse)
	got := map[string]int16{}
	for _, r := range resp.Resources {
		got[fmt.Sprintf("%d/%s", r.ResourceType, r.ResourceName)] = r.ErrorCode
	}
	wantCodes(t, got, map[string]int16{
		"2/alice-a": 0, "2/bob-x": codeTopicAuth, "32/alice-g": 0, "32/bob-g": codeGroupAuth,
		"4/1": 0, "8/1": 0, "16/m": 0, "99/?": codeInvalidRequest,
	})
}

func TestAlterConfigs(t *testing.T) {
	f := newFilter(t, configsRules()...)
	c, _ := testCtx(t, "alice")
	want := map[string]int16{
		"2/alice-a": 0, "2/bob-x": codeTopicAuth, "32/alice-g": 0, "32/bob-g": codeGroupAuth,
		"4/1": codeClusterAuth, "8/1": codeClusterAuth, "16/m": codeClusterAuth, "99/?": codeInvalidRequest,
	}

	req := kmsg.NewPtrAlterConfigsRequest()
	for _, r := range configCases {
		req.Resources = append(req.Resources, kmsg.AlterConfigsRequestResource{ResourceType: r.typ, ResourceName: r.name})
	}
	x := send(t, f, c, req)
	broker := kmsg.NewPtrAlterConfigsResponse()
	for _, r := range x.upstream().(*kmsg.AlterConfigsRequest).Resources {
		broker.Resources = append(broker.Resources, kmsg.AlterConfigsResponseResource{ResourceType: r.ResourceType, ResourceName: r.ResourceName})
	}
	got := map[string]int16{}
	for _, r := range roundTrip(t, x.reply(broker)).(*kmsg.AlterConfigsResponse).Resources {
		got[fmt.Sprintf("%d/%s", r.ResourceType, r.ResourceName)] = r.ErrorCode
	}
	wantCodes(t, got, want)

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range configCases {
		inc.Resources = append(inc.Resources, kmsg.IncrementalAlterConfigsRequestResource{ResourceType: r.typ, ResourceName: r.name})
	}
	x = send(t, f, c, inc)
	ib := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for _, r := range x.upstream().(*kmsg.IncrementalAlterConfigsRequest).Resources {
		ib.Resources = append(ib.Resources, kmsg.IncrementalAlterConfigsResponseResource{ResourceType: r.ResourceType, ResourceName: r.ResourceName})
	}
	got = map[string]int16{}
	for _, r := range roundTrip(t, x.reply(ib)).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		got[fmt.Sprintf("%d/%s", r.ResourceType, r.ResourceName)] = r.ErrorCode
	}
	wantCodes(t, got, want)

	// Nothing allowed: answered, nothing sent.
	c, _ = testCtx(t, "")
	inc.Resources = inc.Resources[:1]
	if resp := send(t, f, c, inc).mustAnswer().(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != codeTopicAuth {
		t.Errorf("anonymous: %+v", resp.Resources)
	}
}
