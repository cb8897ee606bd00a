package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// ProxyProtocol reads the PROXY protocol header (v1 or v2) that a load
// balancer in front of the gateway sends before anything else, so that the
// client's own address, not the balancer's, is the one logs, metrics,
// authorization and connection limits see. It is read before TLS.
type ProxyProtocol struct {
	// Required refuses a connection without a valid header; otherwise
	// (allowed) a connection may come with one or without.
	Required bool
	// Trusted are the networks headers are believed from. A connection
	// from elsewhere that sends a header is refused (it would be a client
	// naming itself someone else); with Required, every connection from
	// elsewhere is refused.
	Trusted []netip.Prefix
	// HeaderTimeout bounds the wait for the header; default 10 s.
	HeaderTimeout time.Duration
}

// trusts reports whether a header may be believed from addr.
func (p *ProxyProtocol) trusts(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, n := range p.Trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// Errors that refuse a connection at the edge, and the reason label of
// strait_kafka_connections_refused_total each counts under.
var (
	errProxyUntrusted = errors.New("the PROXY protocol is required and the connection comes from outside proxy_protocol_from")
	errProxyMissing   = errors.New("no valid PROXY protocol header (required on this listener)")
	errProxySpoofed   = errors.New("a PROXY protocol header from outside proxy_protocol_from (only the networks listed may name another client address)")
)

const (
	refusedProxyProtocol  = "proxy_protocol"
	refusedMaxConns       = "max_connections"
	refusedMaxConnsPerIP  = "max_connections_per_address"
	defaultHeaderTimeout  = 10 * time.Second
	errClientWriteTimeout = "client_write_timeout"
)

// acceptProxy reads the PROXY header of a new connection, if the virtual
// cluster expects one: it returns the connection to use from then on (the
// header consumed; its RemoteAddr the client's own).
func (v *VirtualCluster) acceptProxy(raw net.Conn) (net.Conn, error) {
	pp := v.opts.ProxyProtocol
	if pp == nil {
		return raw, nil
	}
	trusted := pp.trusts(raw.RemoteAddr())
	policy := proxyproto.USE
	switch {
	case trusted && pp.Required:
		policy = proxyproto.REQUIRE
	case !trusted && pp.Required:
		return nil, errProxyUntrusted
	case !trusted:
		policy = proxyproto.REJECT
	}
	timeout := pp.HeaderTimeout
	if timeout <= 0 {
		timeout = defaultHeaderTimeout
	}
	pc := proxyproto.NewConn(raw, proxyproto.WithPolicy(policy), proxyproto.SetReadHeaderTimeout(timeout))
	// A read of nothing processes the header and reports its error.
	if _, err := pc.Read(nil); err != nil {
		switch {
		case errors.Is(err, proxyproto.ErrSuperfluousProxyHeader):
			return nil, errProxySpoofed
		case errors.Is(err, proxyproto.ErrNoProxyProtocol):
			return nil, errProxyMissing
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, fmt.Errorf("%w: none within %s", errProxyMissing, timeout)
		}
		return nil, fmt.Errorf("%w: %v", errProxyMissing, err)
	}
	return pc, nil
}

// connLimits counts a virtual cluster's client connections, in all and by
// client address, against max_connections and
// max_connections_per_address.
type connLimits struct {
	max, perAddr int
	mu           sync.Mutex
	total        int
	byAddr       map[netip.Addr]int
}

// admit counts a new connection from addr, or returns the limit it would
// break.
func (l *connLimits) admit(addr net.Addr) (string, bool) {
	if l == nil {
		return "", true
	}
	ip := addrIP(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.total >= l.max {
		return refusedMaxConns, false
	}
	if l.perAddr > 0 && l.byAddr[ip] >= l.perAddr {
		return refusedMaxConnsPerIP, false
	}
	l.total++
	if l.perAddr > 0 {
		l.byAddr[ip]++
	}
	return "", true
}

// release uncounts a connection admit counted.
func (l *connLimits) release(addr net.Addr) {
	if l == nil {
		return
	}
	ip := addrIP(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perAddr > 0 {
		if l.byAddr[ip]--; l.byAddr[ip] <= 0 {
			delete(l.byAddr, ip)
		}
	}
}

func addrIP(addr net.Addr) netip.Addr {
	if ta, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// refuse closes a connection the edge turned away, counted by reason and
// logged with the fix.
func (v *VirtualCluster) refuse(c net.Conn, client net.Addr, reason string, err error) {
	v.m.refused(reason)
	c.Close()
	fix := ""
	switch reason {
	case refusedMaxConns:
		fix = fmt.Sprintf("raise max_connections (now %d) or add gateway instances", v.opts.MaxConns)
	case refusedMaxConnsPerIP:
		fix = fmt.Sprintf("raise max_connections_per_address (now %d) if one address legitimately holds that many", v.opts.MaxConnsPerAddr)
	case refusedProxyProtocol:
		fix = "send the PROXY header from a network listed in proxy_protocol_from, or set proxy_protocol: allowed"
	case refusedSNI:
		fix = "connect by the bootstrap host name (sni.bootstrap_host) and the broker names the gateway advertises (sni.broker_host), resolving to the gateway"
	}
	v.log.Warn("refused a client connection", "client", client.String(), "reason", reason, "err", err, "fix", fix)
}

// armClientWrite renews the client socket's write deadline when
// client_write_timeout is set, at most every quarter of it, so a client
// that stops reading is let go within about that time instead of holding
// its buffers and its broker connection. Owned by the responder.
func (c *conn) armClientWrite() {
	t := c.v.opts.ClientWriteTimeout
	if t <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(c.clientWriteArmed) >= t/4 {
		c.client.SetWriteDeadline(now.Add(t))
		c.clientWriteArmed = now
	}
}
