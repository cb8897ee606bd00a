package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

const nodeVar = "$(node)"

// brokerHost is the name clients are told for node id.
func (s *SNIRouting) brokerHost(id int32) string {
	return strings.Replace(s.BrokerHost, nodeVar, strconv.Itoa(int(id)), 1)
}

// node inverts the names: the node a TLS server name stands for, or
// bootstrapNode for the bootstrap name. Names compare without case, as DNS
// does.
func (s *SNIRouting) node(name string) (int32, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == strings.ToLower(s.BootstrapHost) {
		return bootstrapNode, true
	}
	pattern := strings.ToLower(s.BrokerHost)
	i := strings.Index(pattern, nodeVar)
	if i < 0 {
		return 0, false
	}
	prefix, suffix := pattern[:i], pattern[i+len(nodeVar):]
	if len(name) <= len(prefix)+len(suffix) || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	digits := name[len(prefix) : len(name)-len(suffix)]
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false // "broker-01" is not what the gateway advertised
	}
	id, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || id < 0 {
		return 0, false
	}
	return int32(id), true
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
