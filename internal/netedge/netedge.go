// Package netedge is what every Strait listener does with a connection
// before it speaks any protocol: read the PROXY protocol header a load
// balancer sends (so that the client's own address is the one logs,
// metrics, authorization and limits see), and count the connection against
// the listener's limits.
package netedge

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

// ProxyProtocol reads the PROXY protocol header (v1 or v2) before
// anything else on a connection (before TLS).
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

// Errors of Accept.
var (
	ErrUntrusted = errors.New("the PROXY protocol is required and the connection comes from outside proxy_protocol_from")
	ErrMissing   = errors.New("no valid PROXY protocol header (required on this listener)")
	ErrSpoofed   = errors.New("a PROXY protocol header from outside proxy_protocol_from (only the networks listed may name another client address)")
)

// DefaultHeaderTimeout bounds the wait for a PROXY header.
const DefaultHeaderTimeout = 10 * time.Second

// Accept reads the PROXY header of a new connection, if p expects one: it
// returns the connection to use from then on (the header consumed; its
// RemoteAddr the client's own). A nil p returns raw.
func (p *ProxyProtocol) Accept(raw net.Conn) (net.Conn, error) {
	if p == nil {
		return raw, nil
	}
	trusted := p.trusts(raw.RemoteAddr())
	policy := proxyproto.USE
	switch {
	case trusted && p.Required:
		policy = proxyproto.REQUIRE
	case !trusted && p.Required:
		return nil, ErrUntrusted
	case !trusted:
		policy = proxyproto.REJECT
	}
	timeout := p.HeaderTimeout
	if timeout <= 0 {
		timeout = DefaultHeaderTimeout
	}
	pc := proxyproto.NewConn(raw, proxyproto.WithPolicy(policy), proxyproto.SetReadHeaderTimeout(timeout))
	// A read of nothing processes the header and reports its error.
	if _, err := pc.Read(nil); err != nil {
		switch {
		case errors.Is(err, proxyproto.ErrSuperfluousProxyHeader):
			return nil, ErrSpoofed
		case errors.Is(err, proxyproto.ErrNoProxyProtocol):
			return nil, ErrMissing
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, fmt.Errorf("%w: none within %s", ErrMissing, timeout)
		}
		return nil, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return pc, nil
}

func (p *ProxyProtocol) trusts(addr net.Addr) bool {
	ip := AddrIP(addr)
	for _, n := range p.Trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// Reasons a connection is refused, the reason label of the refusal
// metrics.
const (
	RefusedProxyProtocol = "proxy_protocol"
	RefusedMaxConns      = "max_connections"
	RefusedMaxConnsPerIP = "max_connections_per_address"
)

// Limits counts a listener's connections, in all and by client address,
// against Max and PerAddr (0: no bound). A nil *Limits admits everything.
type Limits struct {
	Max, PerAddr int

	mu     sync.Mutex
	total  int
	byAddr map[netip.Addr]int
}

// NewLimits returns limits of max and perAddr, or nil when both are 0.
func NewLimits(max, perAddr int) *Limits {
	if max <= 0 && perAddr <= 0 {
		return nil
	}
	return &Limits{Max: max, PerAddr: perAddr, byAddr: map[netip.Addr]int{}}
}

// Admit counts a new connection from addr, or returns the reason it
// would break a limit.
func (l *Limits) Admit(addr net.Addr) (string, bool) {
	if l == nil {
		return "", true
	}
	ip := AddrIP(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Max > 0 && l.total >= l.Max {
		return RefusedMaxConns, false
	}
	if l.PerAddr > 0 && l.byAddr[ip] >= l.PerAddr {
		return RefusedMaxConnsPerIP, false
	}
	l.total++
	if l.PerAddr > 0 {
		l.byAddr[ip]++
	}
	return "", true
}

// Release uncounts a connection Admit counted.
func (l *Limits) Release(addr net.Addr) {
	if l == nil {
		return
	}
	ip := AddrIP(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.PerAddr > 0 {
		if l.byAddr[ip]--; l.byAddr[ip] <= 0 {
			delete(l.byAddr, ip)
		}
	}
}

// AddrIP is the IP address of a TCP address (IPv4 unmapped), or the zero
// Addr.
func AddrIP(addr net.Addr) netip.Addr {
	if ta, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// Fix says how to stop a refusal of reason, for the log line.
func Fix(reason string, max, perAddr int) string {
	switch reason {
	case RefusedMaxConns:
		return fmt.Sprintf("raise max_connections (now %d) or add gateway instances", max)
	case RefusedMaxConnsPerIP:
		return fmt.Sprintf("raise max_connections_per_address (now %d) if one address legitimately holds that many", perAddr)
	case RefusedProxyProtocol:
		return "send the PROXY header from a network listed in proxy_protocol_from, or set proxy_protocol: allowed"
	}
	return ""
}
