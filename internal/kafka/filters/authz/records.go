package authz

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// Produce and Fetch are the hot path: a request whose topics are all
// allowed costs a cached decision per topic, and goes upstream as the
// client's bytes.

// errDeniedAcks0 ends the connection of a producer with acks=0 that wrote
// to a topic it may not: with no answer to carry the error, closing the
// connection is how a broker tells it (the producer then refreshes its
// metadata and sees the refusal there).
var errDeniedAcks0 = errors.New("authorization: produce with acks=0 refused: there is no answer to carry the error, so the connection is closed, as a broker does")

// checkProduce: WRITE on each topic; a transactional producer also needs
// WRITE on its transactional id, or the whole request is refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Idempotent producers need no
// more: their producer id came from InitProducerId, which checked
// IDEMPOTENT_WRITE, and since Kafka 3.0 a broker's Produce checks only
// topics.
func checkProduce(a *call) error {
	r, ok := a.req.Body.(*kmsg.ProduceRequest)
	if !ok {
		return errWrongBody(wire.KeyProduce, a.req.Body)
	}
	if r.TransactionID != nil || hasTransactionalBatch(r) {
		if r.TransactionID == nil || !a.may(resTransactionalID, *r.TransactionID, opWrite) {
			if r.Acks == 0 {
				return errDeniedAcks0
			}
			filter.RefuseProduce(a.req, r, kerr.TransactionalIDAuthorizationFailed.Code, deniedMessage(opWrite, resTransactionalID))
			return nil
		}
	}
	var refused []filter.Refused
	n := 0
	for _, t := range r.Topics {
		name, code := a.topicName(r.Version, 13, t.Topic, t.TopicID)
		if code == 0 && a.may(resTopic, name, opWrite) {
			r.Topics[n] = t
			n++
			continue
		}
		if code == 0 {
			code = kerr.TopicAuthorizationFailed.Code
		}
		msg := deniedMessage(opWrite, resTopic)
		for _, p := range t.Partitions {
			refused = append(refused, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: code, Message: msg})
		}
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	if r.Acks == 0 {
		return errDeniedAcks0
	}
	clear(r.Topics[n:]) // drop the refused records' references to the frame
	r.Topics = r.Topics[:n]
	filter.AnswerProduce(a.c, a.req, r, refused, &a.f.refused)
	return nil
}

// hasTransactionalBatch reports whether a partition's first batch has the
// transactional flag, as a broker checks: a transactional batch without a
// transactional id is refused.
func hasTransactionalBatch(r *kmsg.ProduceRequest) bool {
	const (
		magicAt       = 16 // base offset 8, length 4, leader epoch 4
		attributesAt  = 21 // then magic 1, CRC 4
		transactional = 0x10
	)
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			b := p.Records
			if len(b) >= attributesAt+2 && b[magicAt] >= 2 && binary.BigEndian.Uint16(b[attributesAt:])&transactional != 0 {
				return true
			}
		}
	}
	return false
}

func refuseProduce(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return nil, errWrongBody(wire.KeyProduce, req)
	}
	var refused []filter.Refused
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			refused = append(refused, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: code})
		}
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = r.Version
	filter.AddProduceRefused(resp, refused)
	return resp, nil
}

// checkFetch: READ on each topic. A follower's fetch (a replica id set)
// needs CLUSTER_ACTION, which no rule grants: every partition is refused.
//
// A request with refused partitions is made sessionless (KIP-227): in a
// fetch session a partition is named once, when it joins, so a refused one
// left out of the broker's session would never be answered again, and the
// consumer would wait on it for good. Without a session the client names
// every partition in every request, and each answer refuses it again, as a
// broker does.
func checkFetch(a *call) error {
	r, ok := a.req.Body.(*kmsg.FetchRequest)
	if !ok {
		return errWrongBody(wire.KeyFetch, a.req.Body)
	}
	follower := r.ReplicaID >= 0
	if r.Version >= 15 {
		follower = r.ReplicaState.ID >= 0
	}
	var refused []filter.Refused
	n := 0
	for _, t := range r.Topics {
		name, code := a.topicName(r.Version, 13, t.Topic, t.TopicID)
		switch {
		case code != 0:
		case follower:
			a.denied++
			a.logDenied(resCluster, clusterName, opClusterAction)
			code = kerr.TopicAuthorizationFailed.Code
		case a.may(resTopic, name, opRead):
			r.Topics[n] = t
			n++
			continue
		default:
			code = kerr.TopicAuthorizationFailed.Code
		}
		for _, p := range t.Partitions {
			refused = append(refused, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: code})
		}
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Topics = r.Topics[:n]
	if r.Version >= 7 {
		r.SessionID, r.SessionEpoch, r.ForgottenTopics = 0, -1, nil
	}
	if n > 0 {
		a.f.refused.Add(a.c, a.req.Header.CorrelationID, refused...)
		return nil
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = r.Version
	filter.AddFetchRefused(resp, refused)
	a.respond(resp)
	return nil
}

func refuseFetch(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.FetchRequest)
	if !ok {
		return nil, errWrongBody(wire.KeyFetch, req)
	}
	var refused []filter.Refused
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			refused = append(refused, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: code})
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = r.Version
	resp.ErrorCode = code // v7+: the whole request failed
	filter.AddFetchRefused(resp, refused)
	return resp, nil
}
