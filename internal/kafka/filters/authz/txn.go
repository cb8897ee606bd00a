package authz

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys of producers and transactions.
const (
	keyInitProducerID       int16 = 22
	keyAddPartitionsToTxn   int16 = 24
	keyAddOffsetsToTxn      int16 = 25
	keyEndTxn               int16 = 26
	keyTxnOffsetCommit      int16 = 28
	keyDescribeTransactions int16 = 65
	keyListTransactions     int16 = 66
)

// checkInitProducerID: a transactional producer needs WRITE on its
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
// one IDEMPOTENT_WRITE on the cluster or, as since Kafka 3.0 (KIP-679),
// WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
func checkInitProducerID(a *call) error {
	r, ok := a.req.Body.(*kmsg.InitProducerIDRequest)
	if !ok {
		return errWrongBody(keyInitProducerID, a.req.Body)
	}
	if r.TransactionalID != nil {
		if !a.may(resTransactionalID, *r.TransactionalID, opWrite) {
			return respondWith(a, refuseInitProducerID, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		a.req.Unchanged()
		return nil
	}
	if a.quietly(resCluster, clusterName, opIdempotentWrite) || a.eng.allowsSome(a.principal, resTopic, opWrite) {
		a.allowed++
		a.req.Unchanged()
		return nil
	}
	a.denied++
	a.logDenied(resCluster, clusterName, opIdempotentWrite)
	return respondWith(a, refuseInitProducerID, kerr.ClusterAuthorizationFailed.Code)
}

func refuseInitProducerID(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp, nil
}

// checkAddPartitionsToTxn: WRITE on the transactional id, or every
// partition is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then WRITE
// on each topic. A partition refused fails the whole request, as at a
// broker: the refused get TOPIC_AUTHORIZATION_FAILED, the others
// OPERATION_NOT_ATTEMPTED, and nothing is added. From v4 the request is
// the brokers' own (KIP-890), which needs CLUSTER_ACTION.
func checkAddPartitionsToTxn(a *call) error {
	r, ok := a.req.Body.(*kmsg.AddPartitionsToTxnRequest)
	if !ok {
		return errWrongBody(keyAddPartitionsToTxn, a.req.Body)
	}
	if r.Version >= 4 {
		a.denied++
		a.logDenied(resCluster, clusterName, opClusterAction)
		return respondWith(a, refuseAddPartitionsToTxn, kerr.ClusterAuthorizationFailed.Code)
	}
	if !a.may(resTransactionalID, r.TransactionalID, opWrite) {
		return respondWith(a, refuseAddPartitionsToTxn, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	codes := make([]int16, len(r.Topics))
	refused := false
	for i, t := range r.Topics {
		if !a.may(resTopic, t.Topic, opWrite) {
			codes[i], refused = kerr.TopicAuthorizationFailed.Code, true
		}
	}
	if !refused {
		a.req.Unchanged()
		return nil
	}
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	for i, t := range r.Topics {
		code := codes[i]
		if code == 0 {
			code = kerr.OperationNotAttempted.Code
		}
		resp.Topics = append(resp.Topics, addPartitionsError(t, code))
	}
	a.respond(resp)
	return nil
}

func addPartitionsError(t kmsg.AddPartitionsToTxnRequestTopic, code int16) kmsg.AddPartitionsToTxnResponseTopic {
	rt := kmsg.NewAddPartitionsToTxnResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: code})
	}
	return rt
}

func refuseAddPartitionsToTxn(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.AddPartitionsToTxnRequest)
	if !ok {
		return nil, errWrongBody(keyAddPartitionsToTxn, req)
	}
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = r.Version
	resp.ErrorCode = code // v4+
	resp.Topics = refusals(r.Topics, code, addPartitionsError)
	return resp, nil
}

// checkAddOffsetsToTxn: WRITE on the transactional id, then READ on the
// group whose offsets join the transaction.
func checkAddOffsetsToTxn(a *call) error {
	r, ok := a.req.Body.(*kmsg.AddOffsetsToTxnRequest)
	if !ok {
		return errWrongBody(keyAddOffsetsToTxn, a.req.Body)
	}
	switch {
	case !a.may(resTransactionalID, r.TransactionalID, opWrite):
		return respondWith(a, refuseAddOffsetsToTxn, kerr.TransactionalIDAuthorizationFailed.Code)
	case !a.may(resGroup, r.Group, opRead):
		return respondWith(a, refuseAddOffsetsToTxn, kerr.GroupAuthorizationFailed.Code)
	}
	a.req.Unchanged()
	return nil
}

func refuseAddOffsetsToTxn(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	return resp, nil
}

// checkEndTxn: WRITE on the transactional id.
func checkEndTxn(a *call) error {
	r, ok := a.req.Body.(*kmsg.EndTxnRequest)
	if !ok {
		return errWrongBody(keyEndTxn, a.req.Body)
	}
	if !a.may(resTransactionalID, r.TransactionalID, opWrite) {
		return respondWith(a, refuseEndTxn, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	a.req.Unchanged()
	return nil
}

func refuseEndTxn(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrEndTxnResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp, nil
}

// checkTxnOffsetCommit: WRITE on the transactional id, READ on the group
// (else every partition gets the error), then READ on each topic, whose
// refused partitions are answered TOPIC_AUTHORIZATION_FAILED while the
// others are committed.
func checkTxnOffsetCommit(a *call) error {
	r, ok := a.req.Body.(*kmsg.TxnOffsetCommitRequest)
	if !ok {
		return errWrongBody(keyTxnOffsetCommit, a.req.Body)
	}
	switch {
	case !a.may(resTransactionalID, r.TransactionalID, opWrite):
		return respondWith(a, refuseTxnOffsetCommit, kerr.TransactionalIDAuthorizationFailed.Code)
	case !a.may(resGroup, r.Group, opRead):
		return respondWith(a, refuseTxnOffsetCommit, kerr.GroupAuthorizationFailed.Code)
	}
	var refused []kmsg.TxnOffsetCommitResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int16 {
		return a.topicIDCode(r.Version, 6, t.Topic, t.TopicID, opRead)
	}, txnOffsetCommitError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrTxnOffsetCommitResponse,
		func(resp *kmsg.TxnOffsetCommitResponse) *[]kmsg.TxnOffsetCommitResponseTopic { return &resp.Topics })
}

func txnOffsetCommitError(t kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
	rt := kmsg.NewTxnOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
	}
	return rt
}

func refuseTxnOffsetCommit(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.TxnOffsetCommitRequest)
	if !ok {
		return nil, errWrongBody(keyTxnOffsetCommit, req)
	}
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, txnOffsetCommitError)
	return resp, nil
}

// checkDescribeTransactions: DESCRIBE on each transactional id; the
// topics of a described transaction are cut to those the principal may
// describe, as a broker does.
func checkDescribeTransactions(a *call) error {
	r, ok := a.req.Body.(*kmsg.DescribeTransactionsRequest)
	if !ok {
		return errWrongBody(keyDescribeTransactions, a.req.Body)
	}
	var refused []kmsg.DescribeTransactionsResponseTransactionState
	r.TransactionalIDs, refused = splitRefused(r.TransactionalIDs, func(id string) int16 {
		if a.may(resTransactionalID, id, opDescribe) {
			return 0
		}
		return kerr.TransactionalIDAuthorizationFailed.Code
	}, describeTxnError)
	if len(r.TransactionalIDs) == 0 && len(refused) > 0 {
		resp := kmsg.NewPtrDescribeTransactionsResponse()
		resp.TransactionStates = refused
		a.respond(resp)
		return nil
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		d, ok := resp.(*kmsg.DescribeTransactionsResponse)
		if !ok {
			return
		}
		for i := range d.TransactionStates {
			s := &d.TransactionStates[i]
			s.Topics = slices.DeleteFunc(s.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
				return !v.quietly(resTopic, t.Topic, opDescribe)
			})
		}
		d.TransactionStates = append(d.TransactionStates, refused...)
	})
	return nil
}

func describeTxnError(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = id, code, -1, -1
	s.Topics = []kmsg.DescribeTransactionsResponseTransactionStateTopic{}
	return s
}

func refuseDescribeTransactions(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DescribeTransactionsRequest)
	if !ok {
		return nil, errWrongBody(keyDescribeTransactions, req)
	}
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	resp.Version = r.Version
	resp.TransactionStates = refusals(r.TransactionalIDs, code, describeTxnError)
	return resp, nil
}

// checkListTransactions: the answer lists the transactional ids the
// principal may describe.
func checkListTransactions(a *call) error {
	if _, ok := a.req.Body.(*kmsg.ListTransactionsRequest); !ok {
		return errWrongBody(keyListTransactions, a.req.Body)
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		if l, ok := resp.(*kmsg.ListTransactionsResponse); ok {
			l.TransactionStates = slices.DeleteFunc(l.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
				return !v.quietly(resTransactionalID, s.TransactionalID, opDescribe)
			})
		}
	})
	return nil
}

func refuseListTransactions(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrListTransactionsResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	return resp, nil
}
