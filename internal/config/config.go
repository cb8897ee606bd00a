// Package config loads and validates Strait's YAML configuration: the
// target clusters, the virtual clusters clients connect to, their filter
// chains, TLS, logging, the admin listener, shutdown behaviour and the LLM
// gateway (listeners, keys, providers, routes). It
// expands ${env:NAME} and ${file:PATH} references, decodes strictly,
// applies defaults and reports every problem at once with file, line and
// field path. Only internal/cli imports it; it imports nothing of Strait's.
package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults applied to settings left out of the file.
const (
	DefaultLogLevel       = "info"
	DefaultLogFormat      = "text"
	DefaultDrainTimeout   = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultRequestTimeout = 5 * time.Minute
	DefaultMaxFrameBytes  = 100 << 20 // 100 MiB
	DefaultMaxInflight    = 256
	DefaultIdleTimeout    = 10 * time.Minute
	// DefaultFrameReadTimeout matches a Kafka client's default
	// request.timeout.ms: by then the client has given up on the request.
	DefaultFrameReadTimeout = 30 * time.Second
	// DefaultClientWriteTimeout is how long a client may leave its answers
	// unread before it is disconnected: far beyond any client that is
	// reading (even a paused consumer's library reads its socket).
	DefaultClientWriteTimeout = time.Minute
	// DefaultNodePortCount is how many node ports a virtual cluster gets
	// when node_ports.end is left out (node ids 0..999).
	DefaultNodePortCount = 1000
	DefaultClientAuth    = "none"
	DefaultMinVersion    = "1.2"
)

// Config is a whole Strait configuration file.
type Config struct {
	Admin    Admin    `yaml:"admin"`
	Log      Log      `yaml:"log"`
	Shutdown Shutdown `yaml:"shutdown"`
	// Clusters are the real Kafka clusters Strait connects to, by name.
	Clusters map[string]*Cluster `yaml:"clusters"`
	// VirtualClusters are what clients connect to, in file order.
	VirtualClusters []*VirtualCluster `yaml:"virtual_clusters"`
	// LLM configures the LLM gateway; nil when the section is absent.
	LLM *LLM `yaml:"llm,omitempty"`
	// TLSPassthrough are listeners that relay TLS connections to brokers
	// by server name, without terminating them.
	TLSPassthrough []*TLSPassthrough `yaml:"tls_passthrough,omitempty"`

	// File is the file name the configuration was loaded from, as given
	// to Load or Parse; it prefixes error messages.
	File string `yaml:"-"`

	lines  map[string]int    // field path -> line of its key (or list item)
	set    map[string]bool   // field paths given a non-null value in the file
	secret map[string]string // field path -> text before ${...} expansion
	bad    map[string]bool   // field paths that already failed to decode
}

// Admin configures the admin listener.
type Admin struct {
	// Listen is the host:port of the admin listener; empty disables it.
	Listen string `yaml:"listen,omitempty"`
}

// Log configures logging.
type Log struct {
	// Level is one of debug, info, warn, error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// Shutdown configures graceful shutdown.
type Shutdown struct {
	// DrainTimeout is how long in-flight requests get to finish on
	// shutdown before connections are closed.
	DrainTimeout Duration `yaml:"drain_timeout"`
}

// Cluster is a target Kafka cluster.
type Cluster struct {
	// Name is the cluster's key under clusters; it is not read from YAML.
	Name string `yaml:"-"`
	// BootstrapServers are host:port addresses of brokers to bootstrap
	// from.
	BootstrapServers []string `yaml:"bootstrap_servers"`
	// ConnectTimeout bounds opening one broker connection.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// RequestTimeout bounds waiting for the broker's answer to one request.
	RequestTimeout Duration `yaml:"request_timeout"`
	// TLS configures TLS toward the brokers; nil means plaintext.
	TLS *TLSClient `yaml:"tls,omitempty"`
	// SASL is the gateway's own identity toward the brokers; nil: none.
	SASL *ClusterSASL `yaml:"sasl,omitempty"`
}

// TLSClient configures TLS from Strait to a cluster's brokers.
type TLSClient struct {
	// Enabled must be true for TLS to be used.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of CAs to trust; the system roots when empty.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile and KeyFile are Strait's client certificate and key (PEM)
	// for mutual TLS; both or neither.
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
	// ServerName overrides the name used for SNI and certificate
	// verification.
	ServerName string `yaml:"server_name,omitempty"`
	// InsecureSkipVerify disables verification of the broker certificate.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty"`
}

// VirtualCluster is one cluster as clients see it: a bootstrap listener, one
// port per broker node and a filter chain, in front of a target cluster.
type VirtualCluster struct {
	// Name identifies the virtual cluster in logs and metrics.
	Name string `yaml:"name"`
	// Cluster is the key of the target cluster under clusters.
	Cluster string `yaml:"cluster"`
	// Listen is the host:port of the bootstrap listener.
	Listen string `yaml:"listen"`
	// Advertised is the advertised_host setting as written; use the
	// AdvertisedHost method, which falls back to the host of Listen.
	Advertised string `yaml:"advertised_host,omitempty"`
	// NodePorts is the port range on which broker nodes are served.
	NodePorts NodePorts `yaml:"node_ports"`
	// TLS configures TLS termination toward clients; nil means plaintext.
	TLS *TLSServer `yaml:"tls,omitempty"`
	// SNI, if set, serves every broker on the listen port, routed by the
	// TLS server name, instead of a port per broker (node_ports).
	SNI *SNIRouting `yaml:"sni,omitempty"`
	// MaxFrameBytes is the largest Kafka frame, in bytes, accepted on a
	// connection.
	MaxFrameBytes int `yaml:"max_frame_bytes"`
	// MaxInflight is how many pipelined requests one client connection may
	// have outstanding.
	MaxInflight int `yaml:"max_inflight"`
	// IdleTimeout closes a client connection that sends nothing for this
	// long, as a broker's connections.max.idle.ms does; 0 never does.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// FrameReadTimeout is how long the rest of a request frame may take to
	// arrive once its size has; a client that stalls part-way through a
	// frame is disconnected then (with its broker connection) instead of
	// at IdleTimeout.
	FrameReadTimeout Duration `yaml:"frame_read_timeout"`
	// SASL terminates client authentication at the gateway: the
	// mechanisms offered, their credential store or token issuer, session
	// bounds. Undecoded here (its settings belong to internal/auth); the
	// CLI decodes and checks it, reporting problems at its line. Kind 0:
	// absent, and clients' SASL is relayed to the brokers.
	SASL yaml.Node `yaml:"sasl,omitempty"`
	// ProxyProtocol is off (the default), allowed or required: whether the
	// listeners read a PROXY protocol header (v1 or v2) before anything
	// else, believed only from ProxyProtocolFrom.
	ProxyProtocol     string   `yaml:"proxy_protocol,omitempty"`
	ProxyProtocolFrom []string `yaml:"proxy_protocol_from,omitempty"`
	// MaxConnections and MaxConnectionsPerAddress bound the client
	// connections open at once, in all and from one client address; 0:
	// no bound.
	MaxConnections           int `yaml:"max_connections,omitempty"`
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address,omitempty"`
	// ClientWriteTimeout disconnects a client that has not read its
	// answers for this long; 0s: never.
	ClientWriteTimeout Duration `yaml:"client_write_timeout"`
	// UpstreamIdentity gives client principals broker credentials of
	// their own, in place of the gateway's (clusters.*.sasl); nil: every
	// broker connection is the gateway's.
	UpstreamIdentity *UpstreamIdentity `yaml:"upstream_identity,omitempty"`
	// Filters is the ordered filter chain.
	Filters []Filter `yaml:"filters"`
}

// NodePorts is an inclusive port range: broker node id N is served on
// Start+N.
type NodePorts struct {
	Start int `yaml:"start"`
	End   int `yaml:"end"`
}

// TLSServer configures TLS termination on a virtual cluster's listeners.
type TLSServer struct {
	// CertFile and KeyFile are the PEM certificate and key presented to
	// clients.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// Certificates are more certificates, each with its key; a client's
	// TLS server name picks among all of them (wildcards allowed), the
	// first (cert_file, if set) serving names none matches. Every file is
	// re-read when it changes.
	Certificates []CertPair `yaml:"certificates,omitempty"`
	// ClientCAFile is a PEM bundle of CAs that client certificates are
	// verified against.
	ClientCAFile string `yaml:"client_ca_file,omitempty"`
	// ClientAuth is none, request (verify a certificate if the client
	// sends one) or require.
	ClientAuth string `yaml:"client_auth"`
	// MinVersion is the lowest TLS version accepted: "1.2" or "1.3".
	MinVersion string `yaml:"min_version"`
	// Principal names each client by its certificate (with client_auth:
	// require); nil: clients on TLS have no principal unless SASL gives
	// them one.
	Principal *TLSPrincipal `yaml:"principal,omitempty"`
}

// TLSPassthrough is a listener that reads the TLS server name of each
// connection and relays its bytes, still encrypted, to the broker the name
// stands for: the client's TLS session is with the broker.
type TLSPassthrough struct {
	// Name identifies the listener in logs and metrics.
	Name   string `yaml:"name"`
	Listen string `yaml:"listen"`
	// Routes map server names to broker addresses (host:port).
	Routes map[string]string `yaml:"routes,omitempty"`
	// RoutePattern routes a family of names to a family of brokers.
	RoutePattern *RoutePattern `yaml:"route_pattern,omitempty"`
	// ConnectTimeout bounds dialing a broker; default 10s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// As on a virtual cluster.
	ProxyProtocol            string   `yaml:"proxy_protocol,omitempty"`
	ProxyProtocolFrom        []string `yaml:"proxy_protocol_from,omitempty"`
	MaxConnections           int      `yaml:"max_connections,omitempty"`
	MaxConnectionsPerAddress int      `yaml:"max_connections_per_address,omitempty"`
	// Filters cannot run here; the field exists to say so.
	Filters []Filter `yaml:"filters,omitempty"`
}

// RoutePattern maps server_name (with $(node)) to upstream (with the same
// $(node)), e.g. broker-$(node).kafka.example.com to
// b-$(node).kafka.internal:9093.
type RoutePattern struct {
	ServerName string `yaml:"server_name"`
	Upstream   string `yaml:"upstream"`
}

// CertPair is a PEM certificate file and its key file.
type CertPair struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// SNIRouting serves a virtual cluster on one port: clients reach every
// broker through the listen address, and the TLS server name they send
// says which broker they mean.
type SNIRouting struct {
	// BootstrapHost is the name clients bootstrap from.
	BootstrapHost string `yaml:"bootstrap_host"`
	// BrokerHost names broker N, with $(node) standing for N (e.g.
	// broker-$(node).kafka.example.com); clients are told these names.
	BrokerHost string `yaml:"broker_host"`
	// AdvertisedPort is the port clients are told; default the listen
	// port (set it when a load balancer's port differs).
	AdvertisedPort int `yaml:"advertised_port,omitempty"`
}

// TLSPrincipal maps client certificates to principals.
type TLSPrincipal struct {
	// From is what the rules read: subject (the default), san_dns,
	// san_email or san_uri.
	From string `yaml:"from,omitempty"`
	// Rules are in the syntax of Kafka's ssl.principal.mapping.rules:
	// RULE:pattern/replacement/[LU], ..., DEFAULT. Empty: DEFAULT.
	Rules string `yaml:"rules,omitempty"`
}

// Filter is one entry of a filter chain. This package does not know filter
// types; the filter registry decodes Config and reports problems at
// File/Line/Path (see NewFieldError).
type Filter struct {
	// Type names the filter.
	Type string `yaml:"type"`
	// Config is the filter's settings, undecoded; its Kind is 0 when the
	// config key is absent (Decode then leaves the target untouched).
	Config yaml.Node `yaml:"config,omitempty"`
	// Line is the line of the filter's list item, Path its field path
	// (e.g. virtual_clusters[0].filters[1]). Neither is read from YAML.
	Line int    `yaml:"-"`
	Path string `yaml:"-"`
}

// Duration is a time.Duration written in YAML as a Go duration string such
// as "30s", "5m" or "1m30s".
type Duration struct {
	time.Duration
}

// UnmarshalYAML decodes a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a duration such as \"30s\", not %s", kindName(n))
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%q %v", n.Value, err)
	}
	d.Duration = v
	return nil
}

// MarshalYAML encodes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) {
	return d.Duration.String(), nil
}

// parseDuration parses s, describing what is wrong in a way that can follow
// the offending value: `"30" is not a valid duration: ...`.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil {
		return v, nil
	}
	if isNumber(strings.TrimSpace(s)) {
		return 0, fmt.Errorf("is not a valid duration: add a unit (e.g. \"%ss\"; units are ms, s, m, h)", strings.TrimSpace(s))
	}
	return 0, fmt.Errorf("is not a valid duration (e.g. \"30s\", \"5m\" or \"1m30s\")")
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if (r < '0' || r > '9') && r != '.' && !(i == 0 && r == '-') {
			return false
		}
	}
	return true
}

// AdvertisedHost returns the host clients are told to connect to: the
// advertised_host setting, or else the host of Listen.
func (vc *VirtualCluster) AdvertisedHost() string {
	if vc.Advertised != "" {
		return vc.Advertised
	}
	host, _, err := net.SplitHostPort(vc.Listen)
	if err != nil {
		return ""
	}
	return host
}

// NodePort returns the port on which broker node nodeID is served,
// NodePorts.Start+nodeID, and false if that falls outside the range.
func (vc *VirtualCluster) NodePort(nodeID int32) (int, bool) {
	if nodeID < 0 || vc.NodePorts.Start <= 0 {
		return 0, false
	}
	p := vc.NodePorts.Start + int(nodeID)
	if p > vc.NodePorts.End {
		return 0, false
	}
	return p, true
}

// NodeID is the inverse of NodePort: the broker node id served on port,
// and false if port is outside the range.
func (vc *VirtualCluster) NodeID(port int) (int32, bool) {
	if vc.NodePorts.Start <= 0 || port < vc.NodePorts.Start || port > vc.NodePorts.End {
		return 0, false
	}
	return int32(port - vc.NodePorts.Start), true
}

// applyDefaults fills settings left out of the file. A setting written
// explicitly (even as 0) is left for Validate to judge.
func (c *Config) applyDefaults() {
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if !c.set["shutdown.drain_timeout"] && c.Shutdown.DrainTimeout.Duration == 0 {
		c.Shutdown.DrainTimeout.Duration = DefaultDrainTimeout
	}
	for name, cl := range c.Clusters {
		if cl == nil {
			continue
		}
		p := "clusters." + name
		if !c.set[p+".connect_timeout"] && cl.ConnectTimeout.Duration == 0 {
			cl.ConnectTimeout.Duration = DefaultConnectTimeout
		}
		if !c.set[p+".request_timeout"] && cl.RequestTimeout.Duration == 0 {
			cl.RequestTimeout.Duration = DefaultRequestTimeout
		}
	}
	for i, vc := range c.VirtualClusters {
		if vc == nil {
			continue
		}
		p := fmt.Sprintf("virtual_clusters[%d]", i)
		if !c.set[p+".max_frame_bytes"] && vc.MaxFrameBytes == 0 {
			vc.MaxFrameBytes = DefaultMaxFrameBytes
		}
		if !c.set[p+".max_inflight"] && vc.MaxInflight == 0 {
			vc.MaxInflight = DefaultMaxInflight
		}
		if !c.set[p+".idle_timeout"] && vc.IdleTimeout.Duration == 0 {
			vc.IdleTimeout.Duration = DefaultIdleTimeout
		}
		if !c.set[p+".frame_read_timeout"] && vc.FrameReadTimeout.Duration == 0 {
			vc.FrameReadTimeout.Duration = DefaultFrameReadTimeout
		}
		if !c.set[p+".client_write_timeout"] && vc.ClientWriteTimeout.Duration == 0 {
			vc.ClientWriteTimeout.Duration = DefaultClientWriteTimeout
		}
		if vc.TLS != nil {
			if vc.TLS.ClientAuth == "" {
				vc.TLS.ClientAuth = DefaultClientAuth
			}
			if vc.TLS.MinVersion == "" {
				vc.TLS.MinVersion = DefaultMinVersion
			}
		}
		if vc.SNI != nil {
			continue // one port for every broker: no node ports
		}
		if !c.set[p+".node_ports.start"] && vc.NodePorts.Start == 0 {
			if _, port, err := splitHostPort(vc.Listen); err == nil {
				vc.NodePorts.Start = port + 1
			}
		}
		if !c.set[p+".node_ports.end"] && vc.NodePorts.End == 0 &&
			vc.NodePorts.Start >= 1 && vc.NodePorts.Start <= 65535 {
			vc.NodePorts.End = min(vc.NodePorts.Start+DefaultNodePortCount-1, 65535)
		}
	}
	c.applyLLMDefaults()
}
