package proxy

import (
	"net"
	"time"

	"github.com/straitgw/strait/internal/netedge"
)

// ProxyProtocol and the connection limits are shared with every listener
// (internal/netedge).
type ProxyProtocol = netedge.ProxyProtocol

const (
	refusedProxyProtocol  = netedge.RefusedProxyProtocol
	refusedMaxConns       = netedge.RefusedMaxConns
	refusedMaxConnsPerIP  = netedge.RefusedMaxConnsPerIP
	errClientWriteTimeout = "client_write_timeout"
)

// refuse closes a connection the edge turned away, counted by reason and
// logged with the fix.
func (v *VirtualCluster) refuse(c net.Conn, client net.Addr, reason string, err error) {
	v.m.refused(reason)
	c.Close()
	fix := netedge.Fix(reason, v.opts.MaxConns, v.opts.MaxConnsPerAddr)
	switch reason {
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
