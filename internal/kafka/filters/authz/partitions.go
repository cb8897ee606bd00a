package authz

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys that name topic partitions.
const (
	keyListOffsets          int16 = 2
	keyDeleteRecords        int16 = 21
	keyOffsetForLeaderEpoch int16 = 23
	keyDescribeProducers    int16 = 61
)

// checkListOffsets: DESCRIBE on each topic.
func checkListOffsets(a *call) error {
	r, ok := a.req.Body.(*kmsg.ListOffsetsRequest)
	if !ok {
		return errWrongBody(keyListOffsets, a.req.Body)
	}
	var refused []kmsg.ListOffsetsResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.ListOffsetsRequestTopic) int16 {
		return a.topicCode(t.Topic, opDescribe)
	}, listOffsetsError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrListOffsetsResponse,
		func(resp *kmsg.ListOffsetsResponse) *[]kmsg.ListOffsetsResponseTopic { return &resp.Topics })
}

func listOffsetsError(t kmsg.ListOffsetsRequestTopic, code int16) kmsg.ListOffsetsResponseTopic {
	rt := kmsg.NewListOffsetsResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rp.OldStyleOffsets = []int64{}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func refuseListOffsets(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.ListOffsetsRequest)
	if !ok {
		return nil, errWrongBody(keyListOffsets, req)
	}
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, listOffsetsError)
	return resp, nil
}

// checkOffsetForLeaderEpoch: DESCRIBE on each topic. A follower's request
// (v3+, a replica id set) needs CLUSTER_ACTION, which no rule grants.
func checkOffsetForLeaderEpoch(a *call) error {
	r, ok := a.req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	if !ok {
		return errWrongBody(keyOffsetForLeaderEpoch, a.req.Body)
	}
	if r.Version >= 3 && r.ReplicaID >= 0 {
		a.denied++
		a.logDenied(resCluster, clusterName, opClusterAction)
		return respondWith(a, refuseOffsetForLeaderEpoch, kerr.ClusterAuthorizationFailed.Code)
	}
	var refused []kmsg.OffsetForLeaderEpochResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) int16 {
		return a.topicCode(t.Topic, opDescribe)
	}, leaderEpochError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrOffsetForLeaderEpochResponse,
		func(resp *kmsg.OffsetForLeaderEpochResponse) *[]kmsg.OffsetForLeaderEpochResponseTopic {
			return &resp.Topics
		})
}

func leaderEpochError(t kmsg.OffsetForLeaderEpochRequestTopic, code int16) kmsg.OffsetForLeaderEpochResponseTopic {
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func refuseOffsetForLeaderEpoch(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.OffsetForLeaderEpochRequest)
	if !ok {
		return nil, errWrongBody(keyOffsetForLeaderEpoch, req)
	}
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, leaderEpochError)
	return resp, nil
}

// checkDeleteRecords: DELETE on each topic.
func checkDeleteRecords(a *call) error {
	r, ok := a.req.Body.(*kmsg.DeleteRecordsRequest)
	if !ok {
		return errWrongBody(keyDeleteRecords, a.req.Body)
	}
	var refused []kmsg.DeleteRecordsResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.DeleteRecordsRequestTopic) int16 {
		return a.topicCode(t.Topic, opDelete)
	}, deleteRecordsError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrDeleteRecordsResponse,
		func(resp *kmsg.DeleteRecordsResponse) *[]kmsg.DeleteRecordsResponseTopic { return &resp.Topics })
}

func deleteRecordsError(t kmsg.DeleteRecordsRequestTopic, code int16) kmsg.DeleteRecordsResponseTopic {
	rt := kmsg.NewDeleteRecordsResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: p.Partition, LowWatermark: -1, ErrorCode: code})
	}
	return rt
}

func refuseDeleteRecords(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DeleteRecordsRequest)
	if !ok {
		return nil, errWrongBody(keyDeleteRecords, req)
	}
	resp := kmsg.NewPtrDeleteRecordsResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, deleteRecordsError)
	return resp, nil
}

// checkDescribeProducers: READ on each topic.
func checkDescribeProducers(a *call) error {
	r, ok := a.req.Body.(*kmsg.DescribeProducersRequest)
	if !ok {
		return errWrongBody(keyDescribeProducers, a.req.Body)
	}
	var refused []kmsg.DescribeProducersResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.DescribeProducersRequestTopic) int16 {
		return a.topicCode(t.Topic, opRead)
	}, describeProducersError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrDescribeProducersResponse,
		func(resp *kmsg.DescribeProducersResponse) *[]kmsg.DescribeProducersResponseTopic { return &resp.Topics })
}

func describeProducersError(t kmsg.DescribeProducersRequestTopic, code int16) kmsg.DescribeProducersResponseTopic {
	rt := kmsg.NewDescribeProducersResponseTopic()
	rt.Topic = t.Topic
	msg := kerr.ErrorForCode(code).Error()
	for _, p := range t.Partitions {
		rp := kmsg.NewDescribeProducersResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, &msg
		rp.ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func refuseDescribeProducers(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DescribeProducersRequest)
	if !ok {
		return nil, errWrongBody(keyDescribeProducers, req)
	}
	resp := kmsg.NewPtrDescribeProducersResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, describeProducersError)
	return resp, nil
}
