package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Validate checks c as Parse does: required settings, references between
// virtual clusters and clusters, unique names and addresses, port ranges,
// enumerations, and that TLS files exist and load. It reports every problem
// as Errors, or returns nil. Defaults are not applied; for a Config built in
// code, call ApplyDefaults first.
func (c *Config) Validate() error {
	errs := c.validate()
	errs.Sort()
	return errs.Err()
}

// ApplyDefaults fills in settings that were left out, as Parse does. For a
// Config built in code, zero means "left out".
func (c *Config) ApplyDefaults() { c.applyDefaults() }

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

type validator struct {
	c    *Config
	errs Errors
}

func (v *validator) add(path, msg string) {
	if v.c.isBad(path) {
		return // already reported while decoding
	}
	v.errs.Add(v.c.File, v.c.lineOf(path), path, msg)
}

// lineOf returns the line of path, or of its nearest ancestor with a known
// line (for settings that were left out).
func (c *Config) lineOf(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := c.lines[p]; ok {
			return l
		}
	}
	return 0
}

func (c *Config) isBad(path string) bool {
	for p := path; ; p = parentPath(p) {
		if c.bad[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// show quotes value for an error message, unless the setting at path came
// from a ${...} reference: then the reference is shown and the value not.
func (c *Config) show(path, value string) string {
	if orig, ok := c.secret[path]; ok {
		return fmt.Sprintf("value from %q", orig)
	}
	return strconv.Quote(value)
}

// vcInfo is what the cross-checks between virtual clusters need.
type vcInfo struct {
	host     string
	port     int
	listenOK bool
	start    int
	end      int
	rangeOK  bool
}

func (c *Config) validate() Errors {
	v := &validator{c: c}

	var admin vcInfo
	if c.Admin.Listen != "" {
		admin.host, admin.port, admin.listenOK = v.hostPort("admin.listen", c.Admin.Listen, false, "127.0.0.1:9190")
	}
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")
	if c.Shutdown.DrainTimeout.Duration < 0 {
		v.add("shutdown.drain_timeout", "must not be negative (e.g. 30s)")
	}

	// A file may configure Kafka, the LLM gateway, or both.
	if len(c.Clusters) == 0 && (len(c.VirtualClusters) > 0 || c.LLM == nil && len(c.TLSPassthrough) == 0) {
		v.add("clusters", `at least one target cluster is required (e.g. clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"]}})`)
	}
	names := make([]string, 0, len(c.Clusters))
	for name := range c.Clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v.cluster(joinKey("clusters", name), name, c.Clusters[name])
	}

	if len(c.VirtualClusters) == 0 && c.LLM == nil && len(c.TLSPassthrough) == 0 {
		v.add("virtual_clusters", `at least one virtual cluster is required (e.g. virtual_clusters: [{name: demo, cluster: local, listen: "127.0.0.1:19092"}]), or an llm section for the LLM gateway`)
	}
	infos := make([]vcInfo, len(c.VirtualClusters))
	seen := map[string]int{}
	for i, vc := range c.VirtualClusters {
		infos[i] = v.virtualCluster(i, vc, names, seen)
	}
	v.crossCheck(infos, admin)
	v.llm(infos, admin)
	for i, tp := range c.TLSPassthrough {
		v.tlsPassthrough(joinIndex("tls_passthrough", i), tp)
	}
	return v.errs
}

func (v *validator) cluster(p, name string, cl *Cluster) {
	if name == "" {
		v.add(p, "a cluster name must not be empty")
	}
	if cl == nil {
		v.add(p, "has no settings: set bootstrap_servers (e.g. [127.0.0.1:9092])")
		return
	}
	bp := p + ".bootstrap_servers"
	if len(cl.BootstrapServers) == 0 {
		v.add(bp, "at least one broker address is required (e.g. bootstrap_servers: [127.0.0.1:9092])")
	}
	for i, s := range cl.BootstrapServers {
		sp := joinIndex(bp, i)
		if s == "" {
			v.add(sp, "is empty: give a broker host:port (e.g. 127.0.0.1:9092)")
			continue
		}
		v.hostPort(sp, s, true, "127.0.0.1:9092")
	}
	if cl.ConnectTimeout.Duration <= 0 {
		v.add(p+".connect_timeout", "must be greater than zero (e.g. 10s)")
	}
	if cl.RequestTimeout.Duration <= 0 {
		v.add(p+".request_timeout", "must be greater than zero (e.g. 5m)")
	}
	v.tlsClient(p+".tls", cl.TLS)
	v.clusterSASL(p+".sasl", cl.SASL)
}

func (v *validator) virtualCluster(i int, vc *VirtualCluster, clusters []string, seen map[string]int) vcInfo {
	c := v.c
	p := joinIndex("virtual_clusters", i)
	var info vcInfo
	if vc == nil {
		v.add(p, "is empty: set name, cluster and listen")
		return info
	}

	switch {
	case vc.Name == "":
		v.add(p+".name", "is required: give the virtual cluster a unique name (e.g. name: demo)")
	case !nameRE.MatchString(vc.Name):
		v.add(p+".name", c.show(p+".name", vc.Name)+" is not a valid name: use only letters, digits, '_', '.' and '-'")
	default:
		if j, dup := seen[vc.Name]; dup {
			v.add(p+".name", fmt.Sprintf("%s is already the name of virtual_clusters[%d]: names must be unique", c.show(p+".name", vc.Name), j))
		} else {
			seen[vc.Name] = i
		}
	}

	known := "no clusters are defined under clusters"
	if len(clusters) > 0 {
		known = "known clusters: " + strings.Join(clusters, ", ")
	}
	if vc.Cluster == "" {
		v.add(p+".cluster", "is required: name the target cluster to proxy ("+known+")")
	} else if _, ok := c.Clusters[vc.Cluster]; !ok {
		v.add(p+".cluster", fmt.Sprintf("%s is not defined under clusters (%s)", c.show(p+".cluster", vc.Cluster), known))
	}

	lp := p + ".listen"
	if vc.Listen == "" {
		v.add(lp, "is required: the host:port clients bootstrap from (e.g. 127.0.0.1:19092)")
	} else {
		info.host, info.port, info.listenOK = v.hostPort(lp, vc.Listen, false, "127.0.0.1:19092")
	}

	ap := p + ".advertised_host"
	if vc.Advertised != "" {
		if _, _, err := net.SplitHostPort(vc.Advertised); err == nil || strings.ContainsAny(vc.Advertised, " \t/[]") {
			v.add(ap, c.show(ap, vc.Advertised)+" is not a host name or IP address: write it without port, scheme or brackets (e.g. kafka.example.com)")
		}
	} else if info.listenOK && isWildcard(info.host) && vc.SNI == nil {
		v.add(ap, fmt.Sprintf("is required because listen %s accepts connections on every interface: set the host name clients should connect to (e.g. kafka.example.com)", c.show(lp, vc.Listen)))
	}

	if vc.SNI == nil {
		v.nodePorts(p, vc, &info)
	}
	v.tlsServer(p+".tls", vc.TLS)
	v.sni(p, vc)
	v.upstreamIdentity(p+".upstream_identity", vc)
	v.edge(p, vc)
	if cl, ok := c.Clusters[vc.Cluster]; ok && cl != nil && cl.SASL != nil && vc.SASL.Kind == 0 && (vc.TLS == nil || vc.TLS.Principal == nil) {
		v.add(p+".sasl", fmt.Sprintf("is required: cluster %s has sasl (the gateway logs in to its brokers as itself), so clients must authenticate to the gateway: add a sasl block (mechanisms, credentials), or name clients by certificate with tls.principal", vc.Cluster))
	}

	if vc.MaxFrameBytes <= 0 {
		v.add(p+".max_frame_bytes", fmt.Sprintf("must be greater than 0 (the default is %d, 100 MiB)", DefaultMaxFrameBytes))
	} else if vc.MaxFrameBytes > math.MaxInt32 {
		v.add(p+".max_frame_bytes", fmt.Sprintf("%d is too large: Kafka frame sizes are 32-bit, so at most %d", vc.MaxFrameBytes, math.MaxInt32))
	}
	if vc.IdleTimeout.Duration < 0 {
		v.add(p+".idle_timeout", "must not be negative (e.g. 10m; 0s keeps idle connections open)")
	}
	if vc.FrameReadTimeout.Duration <= 0 {
		v.add(p+".frame_read_timeout", fmt.Sprintf("must be greater than 0 (the default is %s): it is how long a client may take to send the rest of a request once its size has arrived, and without it a stalled client holds a broker connection until idle_timeout", DefaultFrameReadTimeout))
	}
	if vc.MaxInflight < 1 || vc.MaxInflight > 65536 {
		v.add(p+".max_inflight", fmt.Sprintf("%d is out of range: must be 1-65536 (the default is %d)", vc.MaxInflight, DefaultMaxInflight))
	}

	for k, f := range vc.Filters {
		if strings.TrimSpace(f.Type) == "" {
			v.add(joinIndex(p+".filters", k)+".type", "is required: name the filter to run")
		}
	}
	return info
}

func (v *validator) nodePorts(p string, vc *VirtualCluster, info *vcInfo) {
	np := p + ".node_ports"
	s, e := vc.NodePorts.Start, vc.NodePorts.End
	if s < 1 || s > 65535 {
		switch {
		case !v.c.set[np+".start"] && s == 0:
			// Left out and not derivable: the listen error says why.
		case !v.c.set[np+".start"] && info.listenOK:
			v.add(np+".start", fmt.Sprintf("the default, listen port + 1 = %d, is not a valid port: set node_ports.start to a port in 1-65535", s))
		default:
			v.add(np+".start", fmt.Sprintf("%d is not a valid port: must be 1-65535", s))
		}
		return
	}
	if e < s || e > 65535 {
		v.add(np+".end", fmt.Sprintf("%d is out of range: must be from node_ports.start (%d) to 65535", e, s))
		return
	}
	info.start, info.end, info.rangeOK = s, e, true
}

// crossCheck reports listen addresses and port ranges that clash.
func (v *validator) crossCheck(infos []vcInfo, admin vcInfo) {
	c := v.c
	for j, b := range infos {
		pj := joinIndex("virtual_clusters", j)
		for i, a := range infos[:j] {
			sameListen := a.listenOK && b.listenOK && a.port == b.port && sameHost(a.host, b.host)
			if sameListen {
				v.add(pj+".listen", fmt.Sprintf("%s is already the listen address of virtual_clusters[%d]: give each virtual cluster its own", c.show(pj+".listen", c.VirtualClusters[j].Listen), i))
			}
			if !sameListen && a.rangeOK && b.rangeOK && sameHost(a.host, b.host) && a.start <= b.end && b.start <= a.end {
				v.add(pj+".node_ports", fmt.Sprintf("%d-%d overlaps node_ports %d-%d of virtual_clusters[%d] on the same host: give each virtual cluster its own port range", b.start, b.end, a.start, a.end, i))
			}
		}
	}
	for i, a := range infos {
		if !a.rangeOK {
			continue
		}
		for j, b := range infos {
			if b.listenOK && a.start <= b.port && b.port <= a.end {
				whose := fmt.Sprintf("virtual_clusters[%d]", j)
				if i == j {
					whose = "this virtual cluster"
				}
				v.add(joinIndex("virtual_clusters", i)+".node_ports", fmt.Sprintf("%d-%d contains port %d, the listen port of %s: move node_ports or the listen port", a.start, a.end, b.port, whose))
			}
		}
	}
	if !admin.listenOK {
		return
	}
	for j, b := range infos {
		if !sameHost(admin.host, b.host) {
			continue
		}
		if b.listenOK && admin.port == b.port {
			v.add("admin.listen", fmt.Sprintf("port %d is also the listen port of virtual_clusters[%d]: use another port for admin", admin.port, j))
		}
		if b.rangeOK && b.start <= admin.port && admin.port <= b.end {
			v.add("admin.listen", fmt.Sprintf("port %d is inside node_ports %d-%d of virtual_clusters[%d]: use a port outside that range for admin", admin.port, b.start, b.end, j))
		}
	}
}

func isWildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}

// sameHost reports whether listeners on a and b could collide; a wildcard
// host collides with every host.
func sameHost(a, b string) bool {
	return a == b || isWildcard(a) || isWildcard(b)
}

func (v *validator) oneOf(path, value string, allowed ...string) bool {
	if slices.Contains(allowed, value) {
		return true
	}
	v.add(path, fmt.Sprintf("%s is not allowed: use one of %s", v.c.show(path, value), strings.Join(allowed, ", ")))
	return false
}

// tlsPassthrough checks one TLS passthrough listener.
func (v *validator) tlsPassthrough(p string, tp *TLSPassthrough) {
	if tp == nil {
		v.add(p, "is empty: set name, listen and routes (or route_pattern)")
		return
	}
	if tp.Name == "" {
		v.add(p+".name", "is required: it names the listener in logs and metrics")
	}
	if tp.Listen == "" {
		v.add(p+".listen", "is required: the host:port TLS clients connect to (e.g. 0.0.0.0:9093)")
	} else {
		v.hostPort(p+".listen", tp.Listen, false, "0.0.0.0:9093")
	}
	if len(tp.Filters) > 0 {
		v.add(p+".filters", "cannot run on a TLS passthrough listener: it never decrypts its traffic, so there are no Kafka requests to filter; terminate TLS on a virtual cluster (tls, with sni for one port) to run filters")
	}
	if len(tp.Routes) == 0 && tp.RoutePattern == nil {
		v.add(p+".routes", "is required (or route_pattern): map each TLS server name clients use to the broker's host:port")
	}
	names := make([]string, 0, len(tp.Routes))
	for name := range tp.Routes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !validHostName(strings.TrimSuffix(name, ".")) {
			v.add(p+".routes", fmt.Sprintf("%q is not a host name: routes are keyed by the TLS server name clients send", name))
		}
		if _, _, err := splitHostPort(tp.Routes[name]); err != nil || !strings.Contains(tp.Routes[name], ":") {
			v.add(p+".routes."+name, fmt.Sprintf("%q is not a host:port: give the broker's address", tp.Routes[name]))
		}
	}
	if rp := tp.RoutePattern; rp != nil {
		if strings.Count(rp.ServerName, "$(node)") != 1 {
			v.add(p+".route_pattern.server_name", fmt.Sprintf("%q must contain $(node) once (e.g. broker-$(node).kafka.example.com)", rp.ServerName))
		}
		if strings.Count(rp.Upstream, "$(node)") != 1 || !strings.Contains(rp.Upstream, ":") {
			v.add(p+".route_pattern.upstream", fmt.Sprintf("%q must be a host:port with $(node) once (e.g. b-$(node).kafka.internal:9093)", rp.Upstream))
		}
	}
	if tp.ConnectTimeout.Duration < 0 {
		v.add(p+".connect_timeout", "must not be negative (e.g. 10s)")
	}
	v.edge(p, &VirtualCluster{ProxyProtocol: tp.ProxyProtocol, ProxyProtocolFrom: tp.ProxyProtocolFrom,
		MaxConnections: tp.MaxConnections, MaxConnectionsPerAddress: tp.MaxConnectionsPerAddress})
}

// sni checks a virtual cluster's SNI routing.
func (v *validator) sni(p string, vc *VirtualCluster) {
	s := vc.SNI
	if s == nil {
		return
	}
	sp := p + ".sni"
	if vc.TLS == nil {
		v.add(sp, "needs tls: clients name the broker they want in the TLS handshake, so the listener must terminate TLS (cert_file and key_file, or certificates for each name)")
	}
	if v.c.set[p+".node_ports.start"] || v.c.set[p+".node_ports.end"] {
		v.add(p+".node_ports", "is for a port per broker; with sni every broker is served on the listen port: remove node_ports")
	}
	if s.BootstrapHost == "" {
		v.add(sp+".bootstrap_host", "is required: the name clients bootstrap from (e.g. kafka.example.com)")
	} else if !validHostName(s.BootstrapHost) {
		v.add(sp+".bootstrap_host", fmt.Sprintf("%q is not a host name", s.BootstrapHost))
	}
	switch n := strings.Count(s.BrokerHost, "$(node)"); {
	case s.BrokerHost == "":
		v.add(sp+".broker_host", "is required: the name of broker N, with $(node) for N (e.g. broker-$(node).kafka.example.com)")
	case n != 1:
		v.add(sp+".broker_host", fmt.Sprintf("%q must contain $(node) once: it stands for the broker's node id", s.BrokerHost))
	case !validHostName(strings.Replace(s.BrokerHost, "$(node)", "0", 1)):
		v.add(sp+".broker_host", fmt.Sprintf("%q is not a host name pattern", s.BrokerHost))
	case strings.EqualFold(strings.Replace(s.BrokerHost, "$(node)", "", 1), s.BootstrapHost):
		v.add(sp+".broker_host", "cannot be told apart from bootstrap_host: give brokers names of their own")
	}
	if s.AdvertisedPort < 0 || s.AdvertisedPort > 65535 {
		v.add(sp+".advertised_port", fmt.Sprintf("%d is not a port: use 1-65535, or leave it out for the listen port", s.AdvertisedPort))
	}
}

// validHostName reports whether s is a DNS name (letters, digits, '-',
// dots between labels).
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// edge checks a virtual cluster's PROXY protocol and connection limits.
func (v *validator) edge(p string, vc *VirtualCluster) {
	switch vc.ProxyProtocol {
	case "", "off":
		if len(vc.ProxyProtocolFrom) > 0 {
			v.add(p+".proxy_protocol_from", "is set, but proxy_protocol is off: set proxy_protocol: allowed or required, or remove it")
		}
	case "allowed", "required":
		if len(vc.ProxyProtocolFrom) == 0 {
			v.add(p+".proxy_protocol_from", "is required with proxy_protocol: list the networks of the load balancers that send the header (e.g. [10.0.0.0/8]); a header from anywhere else is refused, since it would let a client name itself someone else")
		}
		for i, n := range vc.ProxyProtocolFrom {
			if _, err := ParsePrefix(n); err != nil {
				v.add(joinIndex(p+".proxy_protocol_from", i), fmt.Sprintf("%q is not a network: write a CIDR such as 10.0.0.0/8, or an address such as 10.1.2.3", n))
			}
		}
	default:
		v.oneOf(p+".proxy_protocol", vc.ProxyProtocol, "off", "allowed", "required")
	}
	if vc.MaxConnections < 0 {
		v.add(p+".max_connections", "must not be negative: leave it out (or 0) for no bound")
	}
	if vc.MaxConnectionsPerAddress < 0 {
		v.add(p+".max_connections_per_address", "must not be negative: leave it out (or 0) for no bound")
	}
	if vc.MaxConnections > 0 && vc.MaxConnectionsPerAddress > vc.MaxConnections {
		v.add(p+".max_connections_per_address", fmt.Sprintf("%d is above max_connections (%d): lower it, or raise max_connections", vc.MaxConnectionsPerAddress, vc.MaxConnections))
	}
	if vc.ClientWriteTimeout.Duration < 0 {
		v.add(p+".client_write_timeout", "must not be negative (e.g. 30s; 0s never disconnects a client that stops reading)")
	}
}

// ParsePrefix reads a network in CIDR notation, or one address (a /32 or
// /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// hostPort checks a host:port setting and returns its parts.
func (v *validator) hostPort(path, s string, needHost bool, example string) (string, int, bool) {
	host, port, err := splitHostPort(s)
	if err == nil && needHost && host == "" {
		err = errors.New("the host is missing")
	}
	if err != nil {
		v.add(path, fmt.Sprintf("%s is not a valid host:port: %v (e.g. %s)", v.c.show(path, s), err, example))
		return "", 0, false
	}
	return host, port, true
}

// splitHostPort splits s like net.SplitHostPort and checks the port. Its
// errors do not repeat s.
func splitHostPort(s string) (string, int, error) {
	if strings.Contains(s, "://") {
		return "", 0, errors.New("leave out the scheme")
	}
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if !errors.As(err, &ae) {
			return "", 0, errors.New("malformed address")
		}
		switch ae.Err {
		case "missing port in address":
			return "", 0, errors.New("the port is missing")
		case "too many colons in address":
			return "", 0, errors.New("write IPv6 addresses in brackets, like [::1]:9092")
		default:
			return "", 0, errors.New(ae.Err)
		}
	}
	if ps == "" {
		return "", 0, errors.New("the port is missing")
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, errors.New("the port must be a number")
	}
	if port < 1 || port > 65535 {
		return "", 0, errors.New("port must be 1-65535")
	}
	if strings.ContainsAny(host, " \t/") {
		return "", 0, errors.New("the host must not contain spaces or slashes")
	}
	return host, port, nil
}

func (v *validator) tlsClient(p string, t *TLSClient) {
	if t == nil {
		return
	}
	if !t.Enabled {
		var given []string
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ca_file", t.CAFile != ""},
			{"cert_file", t.CertFile != ""},
			{"key_file", t.KeyFile != ""},
			{"server_name", t.ServerName != ""},
			{"insecure_skip_verify", t.InsecureSkipVerify},
		} {
			if f.set {
				given = append(given, f.name)
			}
		}
		if len(given) > 0 {
			v.add(p+".enabled", fmt.Sprintf("must be true when other tls settings are given (%s): add enabled: true, or remove the tls block", strings.Join(given, ", ")))
		}
		return
	}
	switch {
	case t.CertFile == "" && t.KeyFile != "":
		v.add(p+".cert_file", "is required when key_file is set: client TLS authentication needs the certificate and its key")
	case t.CertFile != "" && t.KeyFile == "":
		v.add(p+".key_file", "is required when cert_file is set: client TLS authentication needs the certificate and its key")
	case t.CertFile != "":
		v.keyPair(p, t.CertFile, t.KeyFile)
	}
	if t.CAFile != "" {
		v.caFile(p+".ca_file", t.CAFile)
	}
}

func (v *validator) tlsServer(p string, t *TLSServer) {
	if t == nil {
		return
	}
	if t.CertFile == "" && len(t.Certificates) == 0 {
		v.add(p+".cert_file", "is required when tls is set: the PEM certificate presented to clients (or list several under certificates)")
	}
	if t.KeyFile == "" && (t.CertFile != "" || len(t.Certificates) == 0) {
		v.add(p+".key_file", "is required when tls is set: the PEM private key of cert_file")
	}
	if t.KeyFile != "" && t.CertFile == "" && len(t.Certificates) > 0 {
		v.add(p+".cert_file", "is required with key_file: its PEM certificate (or move both into certificates)")
	}
	if t.CertFile != "" && t.KeyFile != "" {
		v.keyPair(p, t.CertFile, t.KeyFile)
	}
	for i, c := range t.Certificates {
		cp := joinIndex(p+".certificates", i)
		switch {
		case c.CertFile == "":
			v.add(cp+".cert_file", "is required: the PEM certificate")
		case c.KeyFile == "":
			v.add(cp+".key_file", "is required: the PEM private key of cert_file")
		default:
			v.keyPair(cp, c.CertFile, c.KeyFile)
		}
	}
	if v.oneOf(p+".client_auth", t.ClientAuth, "none", "request", "require") && t.ClientAuth != "none" && t.ClientCAFile == "" {
		v.add(p+".client_ca_file", fmt.Sprintf("is required when client_auth is %q: the PEM CA bundle client certificates are verified against", t.ClientAuth))
	}
	if t.ClientCAFile != "" {
		v.caFile(p+".client_ca_file", t.ClientCAFile)
	}
	v.oneOf(p+".min_version", t.MinVersion, "1.2", "1.3")
	if t.Principal != nil {
		if t.ClientAuth != "require" {
			v.add(p+".principal", "needs client_auth: require: a client is named by its certificate, so every client must present one")
		}
		if t.Principal.From != "" {
			v.oneOf(p+".principal.from", t.Principal.From, "subject", "san_dns", "san_email", "san_uri")
		}
	}
}

func (v *validator) readable(path, file string) bool {
	f, err := os.Open(file)
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil && st.IsDir() {
			err = errors.New("is a directory")
		}
		f.Close()
	}
	if err != nil {
		v.add(path, fmt.Sprintf("cannot read %s: %s; check the path and its permissions", v.c.show(path, file), fileErrReason(err)))
		return false
	}
	return true
}

func (v *validator) caFile(path, file string) {
	if !v.readable(path, file) {
		return
	}
	if _, err := loadCertPool(file); err != nil {
		v.add(path, fmt.Sprintf("%s %v: it must hold one or more PEM \"-----BEGIN CERTIFICATE-----\" blocks", v.c.show(path, file), err))
	}
}

// keyPair checks tls.cert_file and tls.key_file under p.
func (v *validator) keyPair(p, certFile, keyFile string) {
	okCert := v.readable(p+".cert_file", certFile)
	okKey := v.readable(p+".key_file", keyFile)
	if !okCert || !okKey {
		return
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		v.add(p+".cert_file", fmt.Sprintf("the certificate and key do not load (%v): cert_file must hold a PEM certificate and key_file its matching PEM private key", err))
	}
}

// loadCertPool reads a PEM CA bundle. Its errors do not repeat the path.
func loadCertPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, errors.New(fileErrReason(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("contains no PEM certificates")
	}
	return pool, nil
}
