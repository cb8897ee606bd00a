package authz

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// API keys of the group protocol.
const (
	keyJoinGroup              int16 = 11
	keyHeartbeat              int16 = 12
	keyLeaveGroup             int16 = 13
	keySyncGroup              int16 = 14
	keyDescribeGroups         int16 = 15
	keyListGroups             int16 = 16
	keyDeleteGroups           int16 = 42
	keyConsumerGroupHeartbeat int16 = 68
)

// Coordinator types of FindCoordinator.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// groupRead answers a request of key, of type R, with refuse's
// GROUP_AUTHORIZATION_FAILED unless the principal may READ the group it
// names: what a member of a group does (join, sync, heartbeat, leave)
// needs READ on it.
func groupRead[R kmsg.Request](a *call, key int16, group func(R) string, refuse func(kmsg.Request, int16) (kmsg.Response, error)) error {
	r, ok := a.req.Body.(R)
	if !ok {
		return errWrongBody(key, a.req.Body)
	}
	if !a.may(resGroup, group(r), opRead) {
		return respondWith(a, refuse, kerr.GroupAuthorizationFailed.Code)
	}
	a.req.Unchanged()
	return nil
}

func checkJoinGroup(a *call) error {
	return groupRead(a, keyJoinGroup, func(r *kmsg.JoinGroupRequest) string { return r.Group }, refuseJoinGroup)
}

func refuseJoinGroup(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode, resp.Generation = code, -1
	if resp.Version < 7 {
		resp.Protocol = ptrTo("") // not nullable before v7
	}
	resp.Members = []kmsg.JoinGroupResponseMember{}
	return resp, nil
}

func checkSyncGroup(a *call) error {
	return groupRead(a, keySyncGroup, func(r *kmsg.SyncGroupRequest) string { return r.Group }, refuseSyncGroup)
}

func refuseSyncGroup(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode, resp.MemberAssignment = code, []byte{}
	return resp, nil
}

func checkHeartbeat(a *call) error {
	return groupRead(a, keyHeartbeat, func(r *kmsg.HeartbeatRequest) string { return r.Group }, refuseHeartbeat)
}

func refuseHeartbeat(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	return resp, nil
}

func checkLeaveGroup(a *call) error {
	return groupRead(a, keyLeaveGroup, func(r *kmsg.LeaveGroupRequest) string { return r.Group }, refuseLeaveGroup)
}

// refuseLeaveGroup answers with the top-level error and no members, as a
// broker does.
func refuseLeaveGroup(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	resp.Members = []kmsg.LeaveGroupResponseMember{}
	return resp, nil
}

// checkConsumerGroupHeartbeat (KIP-848): READ on the group, and DESCRIBE
// on every topic subscribed by name, or the heartbeat is refused with
// TOPIC_AUTHORIZATION_FAILED naming them, as a broker does. A
// regular-expression subscription is matched by the broker, out of the
// gateway's sight, so it is allowed only to a principal that may describe
// every topic.
func checkConsumerGroupHeartbeat(a *call) error {
	r, ok := a.req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !ok {
		return errWrongBody(keyConsumerGroupHeartbeat, a.req.Body)
	}
	if !a.may(resGroup, r.Group, opRead) {
		a.respond(consumerHeartbeatError(r.Version, kerr.GroupAuthorizationFailed.Code, deniedMessage(opRead, resGroup)))
		return nil
	}
	var denied []string
	for _, name := range r.SubscribedTopicNames {
		if !a.may(resTopic, name, opDescribe) {
			denied = append(denied, name)
		}
	}
	if len(denied) > 0 {
		msg := "not authorized to describe the subscribed topics " + strings.Join(denied, ", ")
		a.respond(consumerHeartbeatError(r.Version, kerr.TopicAuthorizationFailed.Code, msg))
		return nil
	}
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != "" && !a.eng.allowsEvery(a.principal, resTopic, opDescribe) {
		a.denied++
		a.logDenied(resTopic, *r.SubscribedTopicRegex, opDescribe)
		a.respond(consumerHeartbeatError(r.Version, kerr.TopicAuthorizationFailed.Code,
			"a regular-expression subscription needs DESCRIBE on every topic through this gateway: subscribe to topics by name"))
		return nil
	}
	a.req.Unchanged()
	return nil
}

func consumerHeartbeatError(version, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = version
	resp.ErrorCode, resp.ErrorMessage = code, &msg
	return resp
}

func refuseConsumerGroupHeartbeat(req kmsg.Request, code int16) (kmsg.Response, error) {
	return consumerHeartbeatError(req.GetVersion(), code, kerr.ErrorForCode(code).Error()), nil
}

// checkDescribeGroups: DESCRIBE on each group; a refused group is answered
// GROUP_AUTHORIZATION_FAILED, the others go to the broker, and their
// authorized_operations, when asked for, are the rules'.
func checkDescribeGroups(a *call) error {
	r, ok := a.req.Body.(*kmsg.DescribeGroupsRequest)
	if !ok {
		return errWrongBody(keyDescribeGroups, a.req.Body)
	}
	var refused []kmsg.DescribeGroupsResponseGroup
	r.Groups, refused = splitRefused(r.Groups, func(g string) int16 {
		return a.groupCode(g, opDescribe)
	}, describeGroupError)
	withOps := r.Version >= 3 && r.IncludeAuthorizedOperations
	switch {
	case len(r.Groups) == 0 && len(refused) > 0:
		resp := kmsg.NewPtrDescribeGroupsResponse()
		resp.Groups = refused
		a.respond(resp)
		return nil
	case len(refused) == 0 && !withOps:
		a.req.Unchanged()
		return nil
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		d, ok := resp.(*kmsg.DescribeGroupsResponse)
		if !ok {
			return
		}
		if withOps {
			for i := range d.Groups {
				if g := &d.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = v.ops(resGroup, g.Group)
				}
			}
		}
		d.Groups = append(d.Groups, refused...)
	})
	return nil
}

func describeGroupError(group string, code int16) kmsg.DescribeGroupsResponseGroup {
	g := kmsg.NewDescribeGroupsResponseGroup()
	g.Group, g.ErrorCode = group, code
	g.Members = []kmsg.DescribeGroupsResponseGroupMember{}
	return g
}

func refuseDescribeGroups(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DescribeGroupsRequest)
	if !ok {
		return nil, errWrongBody(keyDescribeGroups, req)
	}
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = r.Version
	resp.Groups = refusals(r.Groups, code, describeGroupError)
	return resp, nil
}

// checkListGroups: the answer lists the groups the principal may
// describe; with DESCRIBE on the cluster, all of them, as a broker does.
func checkListGroups(a *call) error {
	if _, ok := a.req.Body.(*kmsg.ListGroupsRequest); !ok {
		return errWrongBody(keyListGroups, a.req.Body)
	}
	if a.quietly(resCluster, clusterName, opDescribe) {
		a.req.Unchanged()
		return nil
	}
	v := a.view()
	a.later(func(resp kmsg.Response) {
		l, ok := resp.(*kmsg.ListGroupsResponse)
		if !ok {
			return
		}
		l.Groups = slices.DeleteFunc(l.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !v.quietly(resGroup, g.Group, opDescribe)
		})
	})
	return nil
}

func refuseListGroups(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.GetVersion()
	resp.ErrorCode = code
	return resp, nil
}

// checkDeleteGroups: DELETE on each group.
func checkDeleteGroups(a *call) error {
	r, ok := a.req.Body.(*kmsg.DeleteGroupsRequest)
	if !ok {
		return errWrongBody(keyDeleteGroups, a.req.Body)
	}
	var refused []kmsg.DeleteGroupsResponseGroup
	r.Groups, refused = splitRefused(r.Groups, func(g string) int16 {
		return a.groupCode(g, opDelete)
	}, func(g string, code int16) kmsg.DeleteGroupsResponseGroup {
		return deleteGroupError(g, code, deniedMessage(opDelete, resGroup))
	})
	return answerRefused(a, len(r.Groups), refused, kmsg.NewPtrDeleteGroupsResponse,
		func(resp *kmsg.DeleteGroupsResponse) *[]kmsg.DeleteGroupsResponseGroup { return &resp.Groups })
}

func deleteGroupError(group string, code int16, msg string) kmsg.DeleteGroupsResponseGroup {
	g := kmsg.NewDeleteGroupsResponseGroup()
	g.Group, g.ErrorCode, g.ErrorMessage = group, code, &msg
	return g
}

func refuseDeleteGroups(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DeleteGroupsRequest)
	if !ok {
		return nil, errWrongBody(keyDeleteGroups, req)
	}
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = r.Version
	for _, g := range r.Groups {
		resp.Groups = append(resp.Groups, deleteGroupError(g, code, kerr.ErrorForCode(code).Error()))
	}
	return resp, nil
}

// coordinatorCode is the error for finding the coordinator of key, or 0:
// a group needs DESCRIBE on it, a transactional id DESCRIBE on it. Other
// coordinators (share groups' state) are for brokers, and need
// CLUSTER_ACTION, which no rule grants.
func coordinatorCode(a *call, keyType int8, key string) int16 {
	switch keyType {
	case coordinatorGroup:
		if !a.may(resGroup, key, opDescribe) {
			return kerr.GroupAuthorizationFailed.Code
		}
	case coordinatorTransaction:
		if !a.may(resTransactionalID, key, opDescribe) {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
	default:
		a.denied++
		a.logDenied(resCluster, clusterName, opClusterAction)
		return kerr.ClusterAuthorizationFailed.Code
	}
	return 0
}

// checkFindCoordinator: before v4 one key, answered whole; from v4 a
// list, of which the refused keys are answered and the others go to the
// broker.
func checkFindCoordinator(a *call) error {
	r, ok := a.req.Body.(*kmsg.FindCoordinatorRequest)
	if !ok {
		return errWrongBody(wire.KeyFindCoordinator, a.req.Body)
	}
	if r.Version < 4 {
		if code := coordinatorCode(a, r.CoordinatorType, r.CoordinatorKey); code != 0 {
			a.respond(findCoordinatorError(r, code))
			return nil
		}
		a.req.Unchanged()
		return nil
	}
	var refused []kmsg.FindCoordinatorResponseCoordinator
	r.CoordinatorKeys, refused = splitRefused(r.CoordinatorKeys, func(k string) int16 {
		return coordinatorCode(a, r.CoordinatorType, k)
	}, coordinatorError)
	return answerRefused(a, len(r.CoordinatorKeys), refused, kmsg.NewPtrFindCoordinatorResponse,
		func(resp *kmsg.FindCoordinatorResponse) *[]kmsg.FindCoordinatorResponseCoordinator {
			return &resp.Coordinators
		})
}

func coordinatorError(key string, code int16) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
	msg := kerr.ErrorForCode(code).Error()
	c.ErrorMessage = &msg
	return c
}

// findCoordinatorError is the answer before v4: the error, and no node.
func findCoordinatorError(r *kmsg.FindCoordinatorRequest, code int16) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = r.Version
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	msg := kerr.ErrorForCode(code).Error()
	resp.ErrorMessage = &msg
	resp.Coordinators = refusals(r.CoordinatorKeys, code, coordinatorError)
	return resp
}

func refuseFindCoordinator(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.FindCoordinatorRequest)
	if !ok {
		return nil, errWrongBody(wire.KeyFindCoordinator, req)
	}
	return findCoordinatorError(r, code), nil
}

func ptrTo[T any](v T) *T { return &v }
