package authz

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// authorizedOpsOmitted is what an authorized_operations field holds when
// the client did not ask for it.
const authorizedOpsOmitted = -2147483648

// view is what a response fixup needs of the call that made it: fixups
// run when the answer comes, on the response goroutine, after the call
// is gone.
type view struct {
	f         *Filter
	eng       *engine // the rules the request was checked under
	c         *filter.Context
	principal string
	key       int16
}

func (a *call) view() view {
	return view{f: a.f, eng: a.eng, c: a.c, principal: a.principal, key: a.req.Header.Key}
}

func (v view) quietly(res resourceType, name string, op operation) bool {
	return v.eng.allowed(v.principal, res, name, op)
}

func (v view) ops(res resourceType, name string) int32 {
	return v.eng.authorizedOps(v.principal, res, name)
}

// clusterOps is the cluster's authorized operations as a broker reports
// them: none at all without DESCRIBE.
func (v view) clusterOps() int32 {
	if !v.quietly(resCluster, clusterName, opDescribe) {
		return 0
	}
	return v.ops(resCluster, clusterName)
}

// denied logs and counts a refusal decided while fixing an answer.
func (v view) denied(res resourceType, name string, op operation) {
	countDecisions(v.c.VirtualCluster, 0, 1)
	a := call{f: v.f, c: v.c, principal: v.principal, req: &filter.Request{Header: filter.Header{Key: v.key}}}
	a.logDenied(res, name, op)
}

// checkMetadata: DESCRIBE on each topic named; a request for all topics
// gets only those the principal may describe. A topic the broker would
// create (auto-creation asked for, the topic missing) needs CREATE on it
// or on the cluster: the request goes with auto-creation off when some
// topic lacks it, and a missing topic that lacked it is answered
// TOPIC_AUTHORIZATION_FAILED, as a broker does. Before v4, which cannot
// turn auto-creation off, such a topic is refused outright: the broker
// might create it.
func checkMetadata(a *call) error {
	r, ok := a.req.Body.(*kmsg.MetadataRequest)
	if !ok {
		return errWrongBody(wire.KeyMetadata, a.req.Body)
	}
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	autoCreate := r.Version < 4 || r.AllowAutoTopicCreation
	var refused []kmsg.MetadataResponseTopic
	noCreate := map[string]bool{}
	if !all {
		n := 0
		for _, t := range r.Topics {
			name, code := metadataTopicName(a, t)
			switch {
			case code != 0:
				refused = append(refused, metadataError(t.Topic, t.TopicID, code))
			case !a.may(resTopic, name, opDescribe):
				refused = append(refused, metadataDenied(t))
			case autoCreate && !a.quietly(resCluster, clusterName, opCreate) && !a.quietly(resTopic, name, opCreate):
				if r.Version < 4 {
					a.denied++
					a.logDenied(resTopic, name, opCreate)
					refused = append(refused, metadataDenied(t))
					continue
				}
				noCreate[name] = true
				r.Topics[n] = t
				n++
			default:
				r.Topics[n] = t
				n++
			}
		}
		r.Topics = r.Topics[:n]
	}
	if len(noCreate) > 0 {
		r.AllowAutoTopicCreation = false
	}
	// Every named topic refused: v0 reads an empty list as all topics,
	// so it asks for them all and keeps none.
	keepNone := !all && len(r.Topics) == 0 && r.Version == 0
	topicOps := r.Version >= 8 && r.IncludeTopicAuthorizedOperations
	clusterOps := r.Version >= 8 && r.Version <= 10 && r.IncludeClusterAuthorizedOperations
	if !all && len(refused) == 0 && len(noCreate) == 0 && !topicOps && !clusterOps {
		a.req.Unchanged()
		return nil
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		m, ok := resp.(*kmsg.MetadataResponse)
		if !ok {
			return
		}
		kept := m.Topics[:0]
		for _, t := range m.Topics {
			if keepNone {
				break
			}
			if t.Topic == nil {
				// Unnamed: an error for a topic ID (the broker names
				// every topic it describes). It tells nothing.
				if t.ErrorCode != 0 {
					kept = append(kept, t)
				}
				continue
			}
			name := *t.Topic
			switch {
			case !v.quietly(resTopic, name, opDescribe):
				if all {
					continue
				}
				t = metadataError(t.Topic, [16]byte{}, kerr.TopicAuthorizationFailed.Code)
			case noCreate[name] && t.ErrorCode == kerr.UnknownTopicOrPartition.Code:
				v.denied(resTopic, name, opCreate)
				t = metadataError(t.Topic, [16]byte{}, kerr.TopicAuthorizationFailed.Code)
			case topicOps:
				t.AuthorizedOperations = v.ops(resTopic, name)
			}
			kept = append(kept, t)
		}
		m.Topics = append(kept, refused...)
		if clusterOps {
			m.AuthorizedOperations = v.clusterOps()
		}
	})
	return nil
}

// metadataTopicName is the name of a requested topic: its name, or what
// its topic ID (v12+) resolves to.
func metadataTopicName(a *call, t kmsg.MetadataRequestTopic) (string, int16) {
	if t.Topic != nil {
		return *t.Topic, 0
	}
	return a.topicName(1, 0, "", t.TopicID)
}

// metadataDenied is the answer for a topic the principal may not
// describe: by name, without its ID; by ID, without its name (IDs tell
// nothing, as in Kafka).
func metadataDenied(t kmsg.MetadataRequestTopic) kmsg.MetadataResponseTopic {
	if t.Topic != nil {
		return metadataError(t.Topic, [16]byte{}, kerr.TopicAuthorizationFailed.Code)
	}
	return metadataError(nil, t.TopicID, kerr.TopicAuthorizationFailed.Code)
}

func metadataError(name *string, id [16]byte, code int16) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID, t.ErrorCode = name, id, code
	t.Partitions = []kmsg.MetadataResponseTopicPartition{}
	return t
}

func refuseMetadata(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.MetadataRequest)
	if !ok {
		return nil, errWrongBody(wire.KeyMetadata, req)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = r.Version
	resp.ErrorCode = code // v13+
	for _, t := range r.Topics {
		resp.Topics = append(resp.Topics, metadataError(t.Topic, t.TopicID, code))
	}
	return resp, nil
}

// checkDescribeTopicPartitions: as Metadata without auto-creation;
// DESCRIBE on each topic named, and a request for all topics (none named)
// gets those the principal may describe. Every topic's
// authorized_operations is the rules', as a broker always reports it.
func checkDescribeTopicPartitions(a *call) error {
	r, ok := a.req.Body.(*kmsg.DescribeTopicPartitionsRequest)
	if !ok {
		return errWrongBody(keyDescribeTopicPartitions, a.req.Body)
	}
	all := len(r.Topics) == 0
	var refused []kmsg.DescribeTopicPartitionsResponseTopic
	n := 0
	for _, t := range r.Topics {
		if a.may(resTopic, t.Topic, opDescribe) {
			r.Topics[n] = t
			n++
			continue
		}
		refused = append(refused, describeTopicError(t.Topic, kerr.TopicAuthorizationFailed.Code))
	}
	r.Topics = r.Topics[:n]
	if !all && n == 0 {
		// Nothing left to ask: an empty list would ask for every topic.
		resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
		resp.Topics = refused
		a.respond(resp)
		return nil
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		d, ok := resp.(*kmsg.DescribeTopicPartitionsResponse)
		if !ok {
			return
		}
		kept := d.Topics[:0]
		for _, t := range d.Topics {
			if t.Topic == nil {
				if t.ErrorCode != 0 {
					kept = append(kept, t)
				}
				continue
			}
			if !v.quietly(resTopic, *t.Topic, opDescribe) {
				if all {
					continue
				}
				t = describeTopicError(*t.Topic, kerr.TopicAuthorizationFailed.Code)
			} else {
				t.AuthorizedOperations = v.ops(resTopic, *t.Topic)
			}
			kept = append(kept, t)
		}
		d.Topics = append(kept, refused...)
		// A cursor naming a topic the principal may not describe would
		// tell that it exists.
		if d.NextCursor != nil && !v.quietly(resTopic, d.NextCursor.Topic, opDescribe) {
			d.NextCursor = nil
		}
	})
	return nil
}

func describeTopicError(name string, code int16) kmsg.DescribeTopicPartitionsResponseTopic {
	t := kmsg.NewDescribeTopicPartitionsResponseTopic()
	t.Topic, t.ErrorCode = &name, code
	t.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	return t
}

func refuseDescribeTopicPartitions(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DescribeTopicPartitionsRequest)
	if !ok {
		return nil, errWrongBody(keyDescribeTopicPartitions, req)
	}
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	resp.Version = r.Version
	for _, t := range r.Topics {
		resp.Topics = append(resp.Topics, describeTopicError(t.Topic, code))
	}
	return resp, nil
}

// checkDescribeCluster: allowed to every client, as a broker allows it;
// the cluster's authorized_operations, when asked for, are the rules'.
func checkDescribeCluster(a *call) error {
	r, ok := a.req.Body.(*kmsg.DescribeClusterRequest)
	if !ok {
		return errWrongBody(wire.KeyDescribeCluster, a.req.Body)
	}
	if !r.IncludeClusterAuthorizedOperations {
		a.req.Unchanged()
		return nil
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		if d, ok := resp.(*kmsg.DescribeClusterResponse); ok {
			d.ClusterAuthorizedOperations = v.clusterOps()
		}
	})
	return nil
}

func refuseDescribeCluster(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	return resp, nil
}
