package authz

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys of committed offsets.
const (
	keyOffsetCommit int16 = 8
	keyOffsetFetch  int16 = 9
	keyOffsetDelete int16 = 47
)

// checkOffsetCommit: READ on the group, or every partition is answered
// GROUP_AUTHORIZATION_FAILED; then READ on each topic, whose refused
// partitions are answered TOPIC_AUTHORIZATION_FAILED while the others are
// committed.
func checkOffsetCommit(a *call) error {
	r, ok := a.req.Body.(*kmsg.OffsetCommitRequest)
	if !ok {
		return errWrongBody(keyOffsetCommit, a.req.Body)
	}
	if !a.may(resGroup, r.Group, opRead) {
		return respondWith(a, refuseOffsetCommit, kerr.GroupAuthorizationFailed.Code)
	}
	var refused []kmsg.OffsetCommitResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.OffsetCommitRequestTopic) int16 {
		return a.topicIDCode(r.Version, 10, t.Topic, t.TopicID, opRead)
	}, offsetCommitError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrOffsetCommitResponse,
		func(resp *kmsg.OffsetCommitResponse) *[]kmsg.OffsetCommitResponseTopic { return &resp.Topics })
}

func offsetCommitError(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	rt := kmsg.NewOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func refuseOffsetCommit(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.OffsetCommitRequest)
	if !ok {
		return nil, errWrongBody(keyOffsetCommit, req)
	}
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, offsetCommitError)
	return resp, nil
}

// respondWith answers the whole request with refuse's code.
func respondWith(a *call, refuse func(kmsg.Request, int16) (kmsg.Response, error), code int16) error {
	resp, err := refuse(a.req.Body, code)
	if err != nil {
		return err
	}
	a.respond(resp)
	return nil
}

// checkOffsetFetch: DESCRIBE on each group, or it is answered
// GROUP_AUTHORIZATION_FAILED; DESCRIBE on each topic named, whose refused
// partitions are answered TOPIC_AUTHORIZATION_FAILED; and a group's
// offsets for all topics are cut to the topics the principal may
// describe. Before v8 the request has one group, from v8 a list.
func checkOffsetFetch(a *call) error {
	r, ok := a.req.Body.(*kmsg.OffsetFetchRequest)
	if !ok {
		return errWrongBody(keyOffsetFetch, a.req.Body)
	}
	if r.Version < 8 {
		return checkOffsetFetchOne(a, r)
	}
	var refusedGroups []kmsg.OffsetFetchResponseGroup
	refusedTopics := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
	allTopics := map[string]bool{}
	ng := 0
	for _, g := range r.Groups {
		if !a.may(resGroup, g.Group, opDescribe) {
			refusedGroups = append(refusedGroups, offsetFetchGroupError(g, kerr.GroupAuthorizationFailed.Code))
			continue
		}
		if g.Topics == nil {
			allTopics[g.Group] = true
		}
		var refused []kmsg.OffsetFetchResponseGroupTopic
		g.Topics, refused = splitRefused(g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) int16 {
			return a.topicIDCode(r.Version, 10, t.Topic, t.TopicID, opDescribe)
		}, offsetFetchGroupTopicError)
		if len(refused) > 0 {
			refusedTopics[g.Group] = append(refusedTopics[g.Group], refused...)
		}
		r.Groups[ng] = g
		ng++
	}
	r.Groups = r.Groups[:ng]
	switch {
	case ng == 0 && len(refusedGroups) > 0:
		resp := kmsg.NewPtrOffsetFetchResponse()
		resp.Groups = refusedGroups
		a.respond(resp)
		return nil
	case len(refusedGroups) == 0 && len(refusedTopics) == 0 && len(allTopics) == 0:
		a.req.Unchanged()
		return nil
	}
	v := a.view()
	version := r.Version
	a.later(func(resp kmsg.Response) {
		o, ok := resp.(*kmsg.OffsetFetchResponse)
		if !ok {
			return
		}
		for i := range o.Groups {
			g := &o.Groups[i]
			if allTopics[g.Group] {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
					return !v.describable(version, 10, t.Topic, t.TopicID)
				})
			}
			g.Topics = append(g.Topics, refusedTopics[g.Group]...)
		}
		o.Groups = append(o.Groups, refusedGroups...)
	})
	return nil
}

// describable reports whether the principal may describe a topic of an
// answer: named, or (from version idsFrom) by an ID that must resolve.
func (v view) describable(version, idsFrom int16, name string, id [16]byte) bool {
	if version >= idsFrom {
		n, err := v.c.TopicName(id)
		if err != nil {
			return false
		}
		name = n
	}
	return v.quietly(resTopic, name, opDescribe)
}

// checkOffsetFetchOne is OffsetFetch before v8: one group.
func checkOffsetFetchOne(a *call, r *kmsg.OffsetFetchRequest) error {
	if !a.may(resGroup, r.Group, opDescribe) {
		return respondWith(a, refuseOffsetFetch, kerr.GroupAuthorizationFailed.Code)
	}
	v := a.view()
	if r.Topics == nil && r.Version >= 2 {
		a.later(func(resp kmsg.Response) {
			if o, ok := resp.(*kmsg.OffsetFetchResponse); ok {
				o.Topics = slices.DeleteFunc(o.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
					return !v.quietly(resTopic, t.Topic, opDescribe)
				})
			}
		})
		return nil
	}
	var refused []kmsg.OffsetFetchResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.OffsetFetchRequestTopic) int16 {
		return a.topicCode(t.Topic, opDescribe)
	}, offsetFetchTopicError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrOffsetFetchResponse,
		func(resp *kmsg.OffsetFetchResponse) *[]kmsg.OffsetFetchResponseTopic { return &resp.Topics })
}

// The entry of a refused partition: no offset, no metadata.
func offsetFetchTopicError(t kmsg.OffsetFetchRequestTopic, code int16) kmsg.OffsetFetchResponseTopic {
	rt := kmsg.NewOffsetFetchResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, ptrTo(""), code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func offsetFetchGroupTopicError(t kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
	rt := kmsg.NewOffsetFetchResponseGroupTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, ptrTo(""), code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func offsetFetchGroupError(g kmsg.OffsetFetchRequestGroup, code int16) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group, rg.ErrorCode = g.Group, code
	rg.Topics = []kmsg.OffsetFetchResponseGroupTopic{}
	return rg
}

// refuseOffsetFetch answers the whole request with code: per group from
// v8, in the top-level error code from v2, and per partition before (v0
// and v1 have no other place for it), as a broker does.
func refuseOffsetFetch(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.OffsetFetchRequest)
	if !ok {
		return nil, errWrongBody(keyOffsetFetch, req)
	}
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = r.Version
	resp.ErrorCode = code
	switch {
	case r.Version >= 8:
		resp.Groups = refusals(r.Groups, code, offsetFetchGroupError)
	case r.Version < 2:
		resp.Topics = refusals(r.Topics, code, offsetFetchTopicError)
	}
	return resp, nil
}

// checkOffsetDelete: DELETE on the group, or the request is answered
// GROUP_AUTHORIZATION_FAILED; then READ on each topic, as a broker checks.
func checkOffsetDelete(a *call) error {
	r, ok := a.req.Body.(*kmsg.OffsetDeleteRequest)
	if !ok {
		return errWrongBody(keyOffsetDelete, a.req.Body)
	}
	if !a.may(resGroup, r.Group, opDelete) {
		return respondWith(a, refuseOffsetDelete, kerr.GroupAuthorizationFailed.Code)
	}
	var refused []kmsg.OffsetDeleteResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.OffsetDeleteRequestTopic) int16 {
		return a.topicCode(t.Topic, opRead)
	}, offsetDeleteTopicError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrOffsetDeleteResponse,
		func(resp *kmsg.OffsetDeleteResponse) *[]kmsg.OffsetDeleteResponseTopic { return &resp.Topics })
}

func offsetDeleteTopicError(t kmsg.OffsetDeleteRequestTopic, code int16) kmsg.OffsetDeleteResponseTopic {
	rt := kmsg.NewOffsetDeleteResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
	}
	return rt
}

func refuseOffsetDelete(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	return resp, nil
}
