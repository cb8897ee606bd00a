package addresses

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

type fakeMapper struct{ advertised map[int32]string }

func (m *fakeMapper) Advertise(id int32, host string, port int32) (string, int32, error) {
	m.advertised[id] = host
	return "gw", 19093 + id, nil
}

func (m *fakeMapper) Bootstrap() (string, int32) { return "gw", 19092 }

func TestControllersGoToBootstrapWithoutBecomingNodes(t *testing.T) {
	m := &fakeMapper{advertised: map[int32]string{}}
	f := New(m)

	dc := kmsg.NewPtrDescribeClusterResponse()
	dc.Version = 1
	dc.EndpointType = 2
	dc.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 3000, Host: "controller-1", Port: 9093}}
	if err := f.OnResponse(&filter.Context{}, &filter.Response{Body: dc}); err != nil {
		t.Fatal(err)
	}
	if b := dc.Brokers[0]; b.Host != "gw" || b.Port != 19092 {
		t.Errorf("controller endpoint = %s:%d, want gw:19092", b.Host, b.Port)
	}

	dq := kmsg.NewPtrDescribeQuorumResponse()
	dq.Version = 2
	dq.Nodes = []kmsg.DescribeQuorumResponseNode{{NodeID: 1, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "CONTROLLER", Host: "controller-1", Port: 9093}}}}
	if err := f.OnResponse(&filter.Context{}, &filter.Response{Body: dq}); err != nil {
		t.Fatal(err)
	}
	if l := dq.Nodes[0].Listeners[0]; l.Host != "gw" || l.Port != 19092 {
		t.Errorf("quorum listener = %s:%d, want gw:19092", l.Host, l.Port)
	}
	if len(m.advertised) != 0 {
		t.Errorf("controller endpoints were recorded as broker nodes: %v", m.advertised)
	}

	dc.EndpointType = 1 // brokers
	dc.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 2, Host: "broker-2", Port: 9092}}
	if err := f.OnResponse(&filter.Context{}, &filter.Response{Body: dc}); err != nil {
		t.Fatal(err)
	}
	if b := dc.Brokers[0]; b.Host != "gw" || b.Port != 19095 || m.advertised[2] != "broker-2" {
		t.Errorf("broker endpoint = %s:%d (advertised %v), want gw:19095 recorded for node 2", b.Host, b.Port, m.advertised)
	}
}
