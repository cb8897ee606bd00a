package proxy

import (
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// clientAddrs records the client address filters see on each connection.
type clientAddrs struct {
	mu   sync.Mutex
	seen []string
}

func (*clientAddrs) Name() string { return "client-addrs" }
func (*clientAddrs) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(wire.KeyMetadata)}
}
func (a *clientAddrs) OnRequest(c *filter.Context, req *filter.Request) error {
	a.mu.Lock()
	a.seen = append(a.seen, c.ClientAddr.String())
	a.mu.Unlock()
	req.Unchanged()
	return nil
}

func (a *clientAddrs) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return ""
	}
	return a.seen[len(a.seen)-1]
}

// proxyHeader is a PROXY protocol v2 (or v1) header naming src.
func proxyHeader(t *testing.T, version byte, src string) []byte {
	t.Helper()
	s, err := net.ResolveTCPAddr("tcp", src)
	if err != nil {
		t.Fatal(err)
	}
	h := proxyproto.HeaderProxyFromAddrs(version, s, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 9092})
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// metadataWorks sends Metadata on c (after any header already written)
// and reports whether it was answered.
func metadataAnswered(c *rawConn, corr int32) bool {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(requestFrame(md, corr, "strait-test")); err != nil {
		return false
	}
	_, err := c.readFrame()
	return err == nil
}

// TestProxyProtocol: behind a balancer the client's address comes from
// the PROXY header (v1 and v2), only from trusted networks; "required"
// refuses a connection without one, "allowed" takes both; each refusal is
// counted.
func TestProxyProtocol(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tc := range []struct {
		name     string
		pp       ProxyProtocol
		header   []byte
		answered bool
		client   string // the address filters see; "" for the socket's own
	}{
		{"allowed, v2 header from a trusted network", ProxyProtocol{Trusted: loopback}, proxyHeader(t, 2, "203.0.113.7:40000"), true, "203.0.113.7:40000"},
		{"allowed, v1 header", ProxyProtocol{Trusted: loopback}, proxyHeader(t, 1, "198.51.100.2:5000"), true, "198.51.100.2:5000"},
		{"allowed, no header", ProxyProtocol{Trusted: loopback}, nil, true, ""},
		{"allowed, header from an untrusted network", ProxyProtocol{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, proxyHeader(t, 2, "203.0.113.7:40000"), false, ""},
		{"required, header", ProxyProtocol{Required: true, Trusted: loopback}, proxyHeader(t, 2, "203.0.113.7:40000"), true, "203.0.113.7:40000"},
		{"required, no header", ProxyProtocol{Required: true, Trusted: loopback, HeaderTimeout: 300 * time.Millisecond}, nil, false, ""},
		{"required, untrusted network", ProxyProtocol{Required: true, Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, proxyHeader(t, 2, "203.0.113.7:40000"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &clientAddrs{}
			pp := tc.pp
			g := startGateway(t, func(o *Options) {
				o.ProxyProtocol = &pp
				o.Filters = []filter.Filter{rec}
			})
			c := dialRaw(t, g.addr)
			if tc.header != nil {
				c.Write(tc.header) // the gateway may have closed already
			}
			if got := metadataAnswered(c, 1); got != tc.answered {
				t.Fatalf("answered %v, want %v", got, tc.answered)
			}
			refused := g.metric("strait_kafka_connections_refused_total", "reason", refusedProxyProtocol)
			if !tc.answered {
				if refused != 1 {
					t.Errorf("%v refusals counted, want 1", refused)
				}
				return
			}
			want := tc.client
			if want == "" {
				want = c.LocalAddr().String()
			}
			if got := rec.last(); got != want {
				t.Errorf("filters saw client %s, want %s", got, want)
			}
		})
	}
}

// TestConnectionLimits: past max_connections_per_address one address is
// refused while another is served; past max_connections everyone is; a
// closed connection frees its place.
func TestConnectionLimits(t *testing.T) {
	g := startGateway(t, func(o *Options) {
		o.MaxConns, o.MaxConnsPerAddr = 3, 2
		o.ProxyProtocol = &ProxyProtocol{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	})
	from := func(src string) *rawConn {
		c := dialRaw(t, g.addr)
		c.write(proxyHeader(t, 2, src))
		return c
	}
	a1, a2 := from("192.0.2.1:1"), from("192.0.2.1:2")
	if !metadataAnswered(a1, 1) || !metadataAnswered(a2, 1) {
		t.Fatal("the first two connections of an address were not served")
	}
	if metadataAnswered(from("192.0.2.1:3"), 1) {
		t.Error("a third connection from one address was served (max_connections_per_address 2)")
	}
	b1 := from("192.0.2.2:1")
	if !metadataAnswered(b1, 1) {
		t.Error("another address was refused while under both limits")
	}
	if metadataAnswered(from("192.0.2.3:1"), 1) {
		t.Error("a fourth connection was served (max_connections 3)")
	}
	a1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !metadataAnswered(from("192.0.2.4:1"), 1) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection did not free its place")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := g.metric("strait_kafka_connections_refused_total", "reason", refusedMaxConnsPerIP); n != 1 {
		t.Errorf("%v refusals per address, want 1", n)
	}
	if n := g.metric("strait_kafka_connections_refused_total", "reason", refusedMaxConns); n < 1 {
		t.Errorf("%v refusals over max_connections, want at least 1", n)
	}
}

// TestClientWriteTimeout: a client that keeps asking but stops reading is
// disconnected after client_write_timeout, and it is counted; a client
// that reads is not, however long it idles.
func TestClientWriteTimeout(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.ClientWriteTimeout = 300 * time.Millisecond })
	idle := dialRaw(t, g.addr)
	if !metadataAnswered(idle, 1) {
		t.Fatal("metadata not answered")
	}
	// A small receive window, set before connecting, so that the
	// gateway's writes back up soon.
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	sc, err := d.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	stuck := &rawConn{t: t, Conn: sc}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	frame := requestFrame(md, 1, "strait-test")
	deadline := time.Now().Add(60 * time.Second)
	for g.errCount(errClientWriteTimeout) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a client that stopped reading was not disconnected")
		}
		stuck.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := stuck.Write(frame); err != nil && !isTimeout(err) {
			break // the gateway closed the connection
		}
	}
	time.Sleep(500 * time.Millisecond) // idle past the timeout
	if !metadataAnswered(idle, 2) {
		t.Error("a client that reads its answers was disconnected after idling")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
