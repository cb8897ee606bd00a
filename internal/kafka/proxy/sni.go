package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/straitgw/strait/internal/netedge"
)

// SNIRouting serves every broker of a virtual cluster on its one listen
// port: clients are told a host name per broker (BrokerHost with $(node)
// replaced by the node id), all resolving to the gateway (or the load
// balancer in front of it), and the TLS server name a client sends picks
// the broker. The listener must terminate TLS.
type SNIRouting struct {
	BootstrapHost string
	// BrokerHost names broker N, with "$(node)" standing for N.
	BrokerHost string
	// AdvertisedPort is the port clients are told; 0: the listen port.
	AdvertisedPort int
}

// brokerHost is the name clients are told for node id.
func (s *SNIRouting) brokerHost(id int32) string { return netedge.NodeName(s.BrokerHost).Name(id) }

// node inverts the names: the node a TLS server name stands for, or
// bootstrapNode for the bootstrap name.
func (s *SNIRouting) node(name string) (int32, bool) {
	if strings.EqualFold(strings.TrimSuffix(name, "."), s.BootstrapHost) {
		return bootstrapNode, true
	}
	return netedge.NodeName(s.BrokerHost).Node(name)
}

const refusedSNI = "sni"

// errNoServerName refuses a client on an SNI-routed listener that named
// no server, or a name no route serves.
var errNoServerName = errors.New("the client sent no TLS server name: on an SNI-routed listener clients must connect by host name (bootstrap_host), not by address")

// sniNode picks the node a TLS client asked for by name.
func (v *VirtualCluster) sniNode(tc *tls.Conn) (int32, error) {
	name := tc.ConnectionState().ServerName
	if name == "" {
		return 0, errNoServerName
	}
	node, ok := v.opts.SNI.node(name)
	if !ok {
		return 0, fmt.Errorf("TLS server name %q is neither the bootstrap host %s nor a broker name %s", name, v.opts.SNI.BootstrapHost, v.opts.SNI.BrokerHost)
	}
	return node, nil
}
