package authz

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrip encodes resp at its version and reads it back, as the client
// will: an answer the filter builds must be valid at every version.
func roundTrip(t *testing.T, resp kmsg.Response) kmsg.Response {
	t.Helper()
	back := kmsg.ResponseForKey(resp.Key())
	back.SetVersion(resp.GetVersion())
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("%T v%d does not read back: %v", resp, resp.GetVersion(), err)
	}
	return back
}

// versions are the first and last versions of key the filter checks.
func versions(key int16) []int16 { return []int16{0, handlers[key].maxVersion} }

func TestGroupMembership(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	cases := []struct {
		key  int16
		make func(group string) kmsg.Request
		code func(kmsg.Response) int16
	}{
		{keyJoinGroup, func(g string) kmsg.Request { r := kmsg.NewPtrJoinGroupRequest(); r.Group = g; return r },
			func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }},
		{keySyncGroup, func(g string) kmsg.Request { r := kmsg.NewPtrSyncGroupRequest(); r.Group = g; return r },
			func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }},
		{keyHeartbeat, func(g string) kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Group = g; return r },
			func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }},
		{keyLeaveGroup, func(g string) kmsg.Request { r := kmsg.NewPtrLeaveGroupRequest(); r.Group = g; return r },
			func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }},
	}
	for _, tc := range cases {
		for _, v := range versions(tc.key) {
			c, logs := testCtx(t, "alice")
			req := tc.make("alice-g")
			req.SetVersion(v)
			if x := send(t, f, c, req); !x.untouched() {
				t.Errorf("%T v%d for alice-g was changed", req, v)
			}
			req = tc.make("bob-g")
			req.SetVersion(v)
			resp := roundTrip(t, send(t, f, c, req).mustAnswer())
			if got := tc.code(resp); got != codeGroupAuth {
				t.Errorf("%T v%d for bob-g: code %d, want %d", req, v, got, codeGroupAuth)
			}
			if !containsAll(logs.String(), "resource=group", "name=bob-g", "operation=READ") {
				t.Errorf("%T: log:\n%s", req, logs)
			}
		}
	}
}

func TestJoinGroupAnswerAtOldVersions(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	for v := int16(0); v <= 9; v++ {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID = v, "bob-g", "m-1"
		resp := roundTrip(t, send(t, f, c, req).mustAnswer()).(*kmsg.JoinGroupResponse)
		if resp.ErrorCode != codeGroupAuth || resp.Generation != -1 || resp.MemberID != "" {
			t.Errorf("v%d: %+v", v, resp)
		}
	}
}

func heartbeat848(group string, topics []string, regex *string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.SubscribedTopicNames, r.SubscribedTopicRegex = 1, group, topics, regex
	return r
}

func TestConsumerGroupHeartbeat(t *testing.T) {
	f := newFilter(t, append(aliceRules(), allow(list("ops"), "topic", list("*"), "DESCRIBE"), allow(list("ops"), "group", list("*"), "READ"))...)
	c, _ := testCtx(t, "alice")
	if x := send(t, f, c, heartbeat848("alice-g", list("alice-a", "shared"), nil)); !x.untouched() {
		t.Error("an allowed heartbeat was changed")
	}
	answer := func(req kmsg.Request) *kmsg.ConsumerGroupHeartbeatResponse {
		return roundTrip(t, send(t, f, c, req).mustAnswer()).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	if r := answer(heartbeat848("bob-g", list("alice-a"), nil)); r.ErrorCode != codeGroupAuth {
		t.Errorf("bob-g: %d", r.ErrorCode)
	}
	r := answer(heartbeat848("alice-g", list("alice-a", "bob-x", "bob-y"), nil))
	if r.ErrorCode != codeTopicAuth || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "bob-x, bob-y") {
		t.Errorf("bob's topics: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if r := answer(heartbeat848("alice-g", nil, ptr("alice-.*"))); r.ErrorCode != codeTopicAuth || !strings.Contains(*r.ErrorMessage, "by name") {
		t.Errorf("regex: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	// A regex from a principal that may describe every topic goes on.
	cOps, _ := testCtx(t, "ops")
	send(t, f, cOps, heartbeat848("any", nil, ptr(".*"))).upstream()
	// An empty regex is no subscription.
	send(t, f, c, heartbeat848("alice-g", nil, ptr(""))).upstream()
}

func TestDescribeGroups(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups, req.IncludeAuthorizedOperations = 5, list("alice-g", "bob-g", "alice-h"), true
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.DescribeGroupsRequest)
	if strings.Join(up.Groups, ",") != "alice-g,alice-h" {
		t.Fatalf("upstream %v", up.Groups)
	}
	broker := kmsg.NewPtrDescribeGroupsResponse()
	for _, g := range up.Groups {
		bg := kmsg.NewDescribeGroupsResponseGroup()
		bg.Group, bg.State = g, "Stable"
		broker.Groups = append(broker.Groups, bg)
	}
	broker.Groups[1].ErrorCode = codeNotCoordinator
	resp := roundTrip(t, x.reply(broker)).(*kmsg.DescribeGroupsResponse)
	got := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range resp.Groups {
		got[g.Group] = g
	}
	if g := got["bob-g"]; g.ErrorCode != codeGroupAuth || g.State != "" || g.AuthorizedOperations != authorizedOpsOmitted {
		t.Errorf("bob-g: %+v", g)
	}
	if g := got["alice-g"]; g.ErrorCode != 0 || g.AuthorizedOperations != f.engine.Load().authorizedOps("alice", resGroup, "alice-g") {
		t.Errorf("alice-g: %+v", g)
	}
	if g := got["alice-h"]; g.ErrorCode != codeNotCoordinator || g.AuthorizedOperations != authorizedOpsOmitted {
		t.Errorf("alice-h, failed at the broker, got authorized operations: %+v", g)
	}

	req = kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = 0, list("bob-g")
	resp = roundTrip(t, send(t, f, c, req).mustAnswer()).(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != codeGroupAuth {
		t.Errorf("all refused: %+v", resp.Groups)
	}

	req.Groups = list("alice-g")
	if x := send(t, f, c, req); !x.untouched() {
		t.Error("an allowed DescribeGroups without authorized operations was changed")
	}
}

func TestListGroups(t *testing.T) {
	f := newFilter(t, append(aliceRules(), allow(list("ops"), "cluster", nil, "DESCRIBE"))...)
	broker := func() *kmsg.ListGroupsResponse {
		resp := kmsg.NewPtrListGroupsResponse()
		for _, g := range list("alice-g", "bob-g", "alice-h", "other") {
			resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: g})
		}
		return resp
	}
	c, _ := testCtx(t, "alice")
	x := send(t, f, c, kmsg.NewPtrListGroupsRequest())
	resp := x.reply(broker()).(*kmsg.ListGroupsResponse)
	var names []string
	for _, g := range resp.Groups {
		names = append(names, g.Group)
	}
	if strings.Join(names, ",") != "alice-g,alice-h" {
		t.Errorf("alice lists %v", names)
	}
	cOps, _ := testCtx(t, "ops")
	if x := send(t, f, cOps, kmsg.NewPtrListGroupsRequest()); !x.untouched() || f.fixups.Len() != 0 {
		t.Error("with DESCRIBE on the cluster, ListGroups should pass untouched")
	}
}

func TestDeleteGroups(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 3, list("alice-g", "bob-g")
	x := send(t, f, c, req)
	if up := x.upstream().(*kmsg.DeleteGroupsRequest); strings.Join(up.Groups, ",") != "alice-g" {
		t.Fatalf("upstream %v", up.Groups)
	}
	broker := kmsg.NewPtrDeleteGroupsResponse()
	broker.Groups = []kmsg.DeleteGroupsResponseGroup{{Group: "alice-g"}}
	resp := roundTrip(t, x.reply(broker)).(*kmsg.DeleteGroupsResponse)
	codes := map[string]int16{}
	for _, g := range resp.Groups {
		codes[g.Group] = g.ErrorCode
	}
	wantCodes(t, codes, map[string]int16{"alice-g": 0, "bob-g": codeGroupAuth})

	req.Version, req.Groups = 0, list("bob-g", "carol-g")
	resp = roundTrip(t, send(t, f, c, req).mustAnswer()).(*kmsg.DeleteGroupsResponse)
	if len(resp.Groups) != 2 || resp.Groups[0].ErrorCode != codeGroupAuth {
		t.Errorf("all refused: %+v", resp.Groups)
	}
}

func TestFindCoordinatorOneKey(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	for _, tc := range []struct {
		keyType int8
		key     string
		want    int16 // 0: forwarded
	}{
		{coordinatorGroup, "alice-g", 0},
		{coordinatorGroup, "bob-g", codeGroupAuth},
		{coordinatorTransaction, "alice-tx", 0},
		{coordinatorTransaction, "bob-tx", codeTxnAuth},
		{2, "share:x:0", codeClusterAuth},
	} {
		for _, v := range []int16{1, 3} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType, req.CoordinatorKey = v, tc.keyType, tc.key
			x := send(t, f, c, req)
			if tc.want == 0 {
				x.upstream()
				continue
			}
			resp := roundTrip(t, x.mustAnswer()).(*kmsg.FindCoordinatorResponse)
			if resp.ErrorCode != tc.want || resp.NodeID != -1 || resp.Port != -1 {
				t.Errorf("v%d %s: %+v", v, tc.key, resp)
			}
		}
	}
	// v0 has no key type: a group.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey = 0, "bob-g"
	if resp := send(t, f, c, req).mustAnswer().(*kmsg.FindCoordinatorResponse); resp.ErrorCode != codeGroupAuth {
		t.Errorf("v0: %d", resp.ErrorCode)
	}
}

func TestFindCoordinatorBatched(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, list("alice-g", "bob-g", "alice-h")
	x := send(t, f, c, req)
	up := x.upstream().(*kmsg.FindCoordinatorRequest)
	if strings.Join(up.CoordinatorKeys, ",") != "alice-g,alice-h" {
		t.Fatalf("upstream %v", up.CoordinatorKeys)
	}
	broker := kmsg.NewPtrFindCoordinatorResponse()
	for _, k := range up.CoordinatorKeys {
		broker.Coordinators = append(broker.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: 1, Host: "h", Port: 9092})
	}
	resp := roundTrip(t, x.reply(broker)).(*kmsg.FindCoordinatorResponse)
	codes := map[string]int16{}
	for _, co := range resp.Coordinators {
		codes[co.Key] = co.ErrorCode
		if co.ErrorCode != 0 && (co.NodeID != -1 || co.Host != "") {
			t.Errorf("%s refused with a node: %+v", co.Key, co)
		}
	}
	wantCodes(t, codes, map[string]int16{"alice-g": 0, "alice-h": 0, "bob-g": codeGroupAuth})

	req.CoordinatorKeys = list("bob-g")
	resp = send(t, f, c, req).mustAnswer().(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != codeGroupAuth {
		t.Errorf("all refused: %+v", resp.Coordinators)
	}
}

// Every answer the filter builds for a whole request reads back at every
// version of its key.
func TestRefusalsEncodeAtEveryVersion(t *testing.T) {
	for key, h := range handlers {
		for v := int16(0); v <= h.maxVersion; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			resp, err := h.refuse(req, codeTopicAuth)
			if err != nil {
				t.Fatalf("%T v%d: %v", req, v, err)
			}
			resp.SetVersion(v)
			roundTrip(t, resp)
		}
	}
}
