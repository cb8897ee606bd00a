package proxy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// stampGroups changes every ListGroups response it handles; when it
// claims Unchanged anyway, the proxy must forward the broker's bytes, so
// the change never reaches the client. (A filter that changes a response
// must not claim Unchanged: this one lies to show what the claim does.)
type stampGroups struct{ claim bool }

func (stampGroups) Name() string { return "stamp-groups" }
func (stampGroups) Interest() filter.Interest {
	return filter.Interest{Responses: filter.Keys(int16(kmsg.ListGroups))}
}

func (s stampGroups) OnResponse(_ *filter.Context, resp *filter.Response) error {
	resp.Body.(*kmsg.ListGroupsResponse).ErrorCode = kerr.GroupAuthorizationFailed.Code
	if s.claim {
		resp.Unchanged()
	}
	return nil
}

func TestUnchangedResponsesAreForwardedAsReceived(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		filters []filter.Filter
		want    int16
	}{
		{"every filter unchanged: the broker's bytes", []filter.Filter{stampGroups{claim: true}}, 0},
		{"one filter changed it: re-encoded", []filter.Filter{stampGroups{claim: false}}, kerr.GroupAuthorizationFailed.Code},
		{"unchanged and changed: re-encoded", []filter.Filter{stampGroups{claim: true}, stampGroups{claim: false}}, kerr.GroupAuthorizationFailed.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, func(o *Options) { o.Filters = tc.filters })
			c := dialRaw(t, g.addr)
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = 3
			resp := c.roundTrip(req, 7).(*kmsg.ListGroupsResponse)
			if resp.ErrorCode != tc.want {
				t.Errorf("client got error code %d, want %d", resp.ErrorCode, tc.want)
			}
		})
	}
}

// renameTopics renames the topics of every CreateTopics request; claiming
// Unchanged anyway makes the proxy send the client's bytes, so the broker
// never sees the rename.
type renameTopics struct{ claim bool }

func (renameTopics) Name() string { return "rename-topics" }
func (renameTopics) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(int16(kmsg.CreateTopics))}
}

func (r renameTopics) OnRequest(_ *filter.Context, req *filter.Request) error {
	for i := range req.Body.(*kmsg.CreateTopicsRequest).Topics {
		req.Body.(*kmsg.CreateTopicsRequest).Topics[i].Topic = "renamed"
	}
	if r.claim {
		req.Unchanged()
	}
	return nil
}

func TestUnchangedRequestsAreForwardedAsReceived(t *testing.T) {
	t.Parallel()
	for _, claim := range []bool{true, false} {
		g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{renameTopics{claim: claim}} })
		seen := make(chan string, 4)
		g.broker.ControlKey(int16(kmsg.CreateTopics), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			g.broker.KeepControl()
			for _, tp := range kr.(*kmsg.CreateTopicsRequest).Topics {
				seen <- tp.Topic
			}
			return nil, nil, false
		})
		c := dialRaw(t, g.addr)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 4
		tp := kmsg.NewCreateTopicsRequestTopic()
		tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "original", 1, 1
		req.Topics = append(req.Topics, tp)
		c.roundTrip(req, 3)
		want := "renamed"
		if claim {
			want = "original"
		}
		select {
		case got := <-seen:
			if got != want {
				t.Errorf("claim %v: the broker saw topic %q, want %q", claim, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("claim %v: the CreateTopics request never reached the broker", claim)
		}
	}
}
