package authz

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	f := newFilter(t, append(aliceRules(),
		allow(list("idem"), "cluster", nil, "IDEMPOTENT_WRITE"),
		allow(list("reader"), "topic", list("*"), "READ"))...)
	for _, tc := range []struct {
		principal string
		txnID     *string
		want      int16 // 0: forwarded
	}{
		{"alice", ptr("alice-tx"), 0},
		{"alice", ptr("bob-tx"), codeTxnAuth},
		{"alice", nil, 0},          // WRITE on alice-*: idempotence allowed (KIP-679)
		{"idem", nil, 0},           // IDEMPOTENT_WRITE on the cluster
		{"reader", nil, 0},         // the {principal}-* rule gives reader WRITE on reader-*
		{"", nil, codeClusterAuth}, // anonymous has WRITE nowhere
		{"", ptr("alice-tx"), codeTxnAuth},
	} {
		for _, v := range versions(keyInitProducerID) {
			c, _ := testCtx(t, tc.principal)
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionalID = v, tc.txnID
			x := send(t, f, c, req)
			if tc.want == 0 {
				x.upstream()
				continue
			}
			resp := roundTrip(t, x.mustAnswer()).(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != tc.want || resp.ProducerID != -1 {
				t.Errorf("%q %v v%d: %+v", tc.principal, tc.txnID, v, resp)
			}
		}
	}
}

func TestInitProducerIDNoTopicWrite(t *testing.T) {
	f := newFilter(t, allow(list("*"), "topic", list("*"), "READ"), deny(list("x"), "topic", list("*"), "WRITE"),
		allow(list("x"), "topic", list("x-*"), "WRITE"))
	for _, p := range []string{"reader", "x"} {
		c, logs := testCtx(t, p)
		resp := send(t, f, c, kmsg.NewPtrInitProducerIDRequest()).mustAnswer().(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != codeClusterAuth {
			t.Errorf("%s: %d", p, resp.ErrorCode)
		}
		if !containsAll(logs.String(), "resource=cluster", "operation=IDEMPOTENT_WRITE") {
			t.Errorf("log:\n%s", logs)
		}
	}
}

func addPartitionsOf(v int16, txn string, topics ...string) *kmsg.AddPartitionsToTxnRequest {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.Version, r.TransactionalID = v, txn
	for _, n := range topics {
		r.Topics = append(r.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: n, Partitions: []int32{0, 1}})
	}
	return r
}

func addPartitionsCodes(resp *kmsg.AddPartitionsToTxnResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

func TestAddPartitionsToTxn(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	if x := send(t, f, c, addPartitionsOf(3, "alice-tx", "alice-a")); !x.untouched() {
		t.Error("allowed request changed")
	}
	resp := roundTrip(t, send(t, f, c, addPartitionsOf(3, "bob-tx", "alice-a")).mustAnswer()).(*kmsg.AddPartitionsToTxnResponse)
	wantCodes(t, addPartitionsCodes(resp), map[string]int16{"alice-a/0": codeTxnAuth, "alice-a/1": codeTxnAuth})
	// One refused topic fails the request, as at a broker.
	resp = roundTrip(t, send(t, f, c, addPartitionsOf(0, "alice-tx", "alice-a", "bob-x")).mustAnswer()).(*kmsg.AddPartitionsToTxnResponse)
	wantCodes(t, addPartitionsCodes(resp), map[string]int16{
		"alice-a/0": codeOpNotAttempted, "alice-a/1": codeOpNotAttempted, "bob-x/0": codeTopicAuth, "bob-x/1": codeTopicAuth,
	})
	// v4+ is the brokers' own.
	resp = roundTrip(t, send(t, f, c, addPartitionsOf(4, "alice-tx")).mustAnswer()).(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != codeClusterAuth {
		t.Errorf("v4: %d", resp.ErrorCode)
	}
}

func TestAddOffsetsAndEndTxn(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	add := func(txn, group string) kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.Group = txn, group
		return r
	}
	send(t, f, c, add("alice-tx", "alice-g")).upstream()
	for _, tc := range []struct {
		txn, group string
		want       int16
	}{{"bob-tx", "alice-g", codeTxnAuth}, {"alice-tx", "bob-g", codeGroupAuth}, {"bob-tx", "bob-g", codeTxnAuth}} {
		resp := roundTrip(t, send(t, f, c, add(tc.txn, tc.group)).mustAnswer()).(*kmsg.AddOffsetsToTxnResponse)
		if resp.ErrorCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.txn, tc.group, resp.ErrorCode, tc.want)
		}
	}
	for _, v := range versions(keyEndTxn) {
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.TransactionalID = v, "alice-tx"
		send(t, f, c, end).upstream()
		end.TransactionalID = "bob-tx"
		if resp := roundTrip(t, send(t, f, c, end).mustAnswer()).(*kmsg.EndTxnResponse); resp.ErrorCode != codeTxnAuth {
			t.Errorf("EndTxn v%d: %d", v, resp.ErrorCode)
		}
	}
}

func txnCommitOf(v int16, txn, group string, topics ...string) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group = v, txn, group
	for _, n := range topics {
		r.Topics = append(r.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: n, TopicID: idOf(n), Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}})
	}
	return r
}

func txnCommitCodes(resp *kmsg.TxnOffsetCommitResponse, byID bool) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		name := t.Topic
		if byID {
			name = string(trimID(t.TopicID))
		}
		out[name] = t.Partitions[0].ErrorCode
	}
	return out
}

func TestTxnOffsetCommit(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice", "alice-a", "bob-x")
	resp := roundTrip(t, send(t, f, c, txnCommitOf(3, "bob-tx", "alice-g", "alice-a")).mustAnswer()).(*kmsg.TxnOffsetCommitResponse)
	wantCodes(t, txnCommitCodes(resp, false), map[string]int16{"alice-a": codeTxnAuth})
	resp = roundTrip(t, send(t, f, c, txnCommitOf(3, "alice-tx", "bob-g", "alice-a")).mustAnswer()).(*kmsg.TxnOffsetCommitResponse)
	wantCodes(t, txnCommitCodes(resp, false), map[string]int16{"alice-a": codeGroupAuth})

	for _, v := range []int16{3, 6} {
		x := send(t, f, c, txnCommitOf(v, "alice-tx", "alice-g", "alice-a", "bob-x"))
		up := x.upstream().(*kmsg.TxnOffsetCommitRequest)
		if len(up.Topics) != 1 {
			t.Fatalf("v%d: upstream %+v", v, up.Topics)
		}
		broker := kmsg.NewPtrTxnOffsetCommitResponse()
		broker.Topics = []kmsg.TxnOffsetCommitResponseTopic{{Topic: "alice-a", TopicID: idOf("alice-a"), Partitions: []kmsg.TxnOffsetCommitResponseTopicPartition{{Partition: 0}}}}
		resp = roundTrip(t, x.reply(broker)).(*kmsg.TxnOffsetCommitResponse)
		wantCodes(t, txnCommitCodes(resp, v >= 6), map[string]int16{"alice-a": 0, "bob-x": codeTopicAuth})
	}
	resp = send(t, f, c, txnCommitOf(3, "alice-tx", "alice-g", "bob-x")).mustAnswer().(*kmsg.TxnOffsetCommitResponse)
	wantCodes(t, txnCommitCodes(resp, false), map[string]int16{"bob-x": codeTopicAuth})
}

func TestDescribeTransactions(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = list("alice-tx", "bob-tx")
	x := send(t, f, c, req)
	if up := x.upstream().(*kmsg.DescribeTransactionsRequest); len(up.TransactionalIDs) != 1 {
		t.Fatalf("upstream %v", up.TransactionalIDs)
	}
	broker := kmsg.NewPtrDescribeTransactionsResponse()
	st := kmsg.NewDescribeTransactionsResponseTransactionState()
	st.TransactionalID = "alice-tx"
	st.Topics = []kmsg.DescribeTransactionsResponseTransactionStateTopic{{Topic: "alice-a"}, {Topic: "bob-x"}}
	broker.TransactionStates = append(broker.TransactionStates, st)
	resp := roundTrip(t, x.reply(broker)).(*kmsg.DescribeTransactionsResponse)
	got := map[string]int16{}
	for _, s := range resp.TransactionStates {
		got[s.TransactionalID] = s.ErrorCode
		for _, tt := range s.Topics {
			got[s.TransactionalID+"/"+tt.Topic] = 0
		}
	}
	wantCodes(t, got, map[string]int16{"alice-tx": 0, "alice-tx/alice-a": 0, "bob-tx": codeTxnAuth})

	req.TransactionalIDs = list("bob-tx")
	resp = send(t, f, c, req).mustAnswer().(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != codeTxnAuth {
		t.Errorf("all refused: %+v", resp.TransactionStates)
	}
}

func TestListTransactions(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	x := send(t, f, c, kmsg.NewPtrListTransactionsRequest())
	broker := kmsg.NewPtrListTransactionsResponse()
	for _, id := range list("alice-tx", "bob-tx", "alice-other") {
		broker.TransactionStates = append(broker.TransactionStates, kmsg.ListTransactionsResponseTransactionState{TransactionalID: id})
	}
	resp := x.reply(broker).(*kmsg.ListTransactionsResponse)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].TransactionalID != "alice-tx" {
		t.Errorf("alice lists %+v", resp.TransactionStates)
	}
}
