// Package addresses is the built-in filter that keeps broker addresses
// inside the gateway: every host and port a broker tells a client about is
// replaced with the gateway's address for that node, so a client never
// learns, and never dials, an upstream address.
//
// It rewrites Metadata (all versions), FindCoordinator (v0-3 single and v4+
// batched), DescribeCluster, and the KIP-951 NodeEndpoints of Produce
// (v10+), Fetch (v16+), ShareFetch and ShareAcknowledge.
//
// Controllers are not served through the gateway. Their endpoints, which
// DescribeCluster (asked for controllers, KIP-919) and DescribeQuorum v2+
// report, are replaced with the virtual cluster's bootstrap address: no
// upstream address leaks, and a client that dials one reaches a broker
// through the gateway.
package addresses

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// Mapper is the gateway's side of the mapping. The proxy implements it.
type Mapper interface {
	// Advertise records that upstream node nodeID is reachable at
	// host:port and returns the address clients must use for that node,
	// making sure the gateway listens there before the client can dial it.
	Advertise(nodeID int32, host string, port int32) (string, int32, error)
	// Bootstrap returns the virtual cluster's bootstrap address.
	Bootstrap() (string, int32)
}

const (
	keyDescribeQuorum   int16 = 55
	endpointControllers int8  = 2 // DescribeCluster EndpointType (KIP-919)
)

// Filter rewrites broker addresses in responses.
type Filter struct{ m Mapper }

// New returns the address-rewriting filter for one virtual cluster.
func New(m Mapper) *Filter { return &Filter{m: m} }

// Name implements filter.Filter.
func (*Filter) Name() string { return "addresses" }

// Interest implements filter.Filter.
func (*Filter) Interest() filter.Interest {
	return filter.Interest{Responses: []filter.KeyRange{
		{Key: wire.KeyMetadata},
		{Key: wire.KeyFindCoordinator},
		{Key: wire.KeyDescribeCluster},
		{Key: keyDescribeQuorum, MinVersion: 2},
		{Key: wire.KeyProduce, MinVersion: 10},
		{Key: wire.KeyFetch, MinVersion: 16},
		{Key: wire.KeyShareFetch},
		{Key: wire.KeyShareAcknowledge},
	}}
}

// WantsResponse keeps Produce and Fetch on the fast path: their
// NodeEndpoints are a top-level tagged field, present only when a partition
// reports a moved leader, so a response without top-level tags holds no
// address. A body the skimmer cannot parse is decoded, to be safe.
func (*Filter) WantsResponse(key, version int16, body []byte) bool {
	switch key {
	case wire.KeyProduce:
		has, ok := wire.ProduceResponseHasTopLevelTags(body, version)
		return has || !ok
	case wire.KeyFetch:
		has, ok := wire.FetchResponseHasTopLevelTags(body, version)
		return has || !ok
	}
	return true
}

// OnResponse implements filter.ResponseHandler.
func (f *Filter) OnResponse(_ *filter.Context, resp *filter.Response) error {
	var err error
	adv := func(id int32, host *string, port *int32) {
		if err != nil || id < 0 || *host == "" {
			return // an error answer carries no address
		}
		h, p, e := f.m.Advertise(id, *host, *port)
		if e != nil {
			err = fmt.Errorf("node %d: %w", id, e)
			return
		}
		*host, *port = h, p
	}
	switch r := resp.Body.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			adv(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.FindCoordinatorResponse:
		adv(r.NodeID, &r.Host, &r.Port)
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			adv(c.NodeID, &c.Host, &c.Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			if r.EndpointType == endpointControllers {
				if b.Host != "" {
					b.Host, b.Port = f.m.Bootstrap()
				}
				continue
			}
			adv(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.DescribeQuorumResponse:
		host, port := f.m.Bootstrap()
		for i := range r.Nodes {
			for j := range r.Nodes[i].Listeners {
				l := &r.Nodes[i].Listeners[j]
				l.Host, l.Port = host, uint16(port)
			}
		}
	case *kmsg.ProduceResponse:
		if len(r.Brokers) == 0 {
			// Decoded for another filter; nothing here to rewrite.
			resp.Unchanged()
		}
		for i := range r.Brokers {
			b := &r.Brokers[i]
			adv(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.FetchResponse:
		if len(r.Brokers) == 0 {
			resp.Unchanged()
		}
		for i := range r.Brokers {
			b := &r.Brokers[i]
			adv(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			b := &r.NodeEndpoints[i]
			adv(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.ShareAcknowledgeResponse:
		for i := range r.NodeEndpoints {
			b := &r.NodeEndpoints[i]
			adv(b.NodeID, &b.Host, &b.Port)
		}
	}
	return err
}

var (
	_ filter.ResponseHandler = (*Filter)(nil)
	_ filter.ResponseSkimmer = (*Filter)(nil)
)
