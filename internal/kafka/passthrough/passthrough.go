// Package passthrough is the cheapest hop Strait offers: a listener that
// does not terminate TLS. It reads the server name from the client's TLS
// ClientHello, picks the broker that name stands for, and relays bytes both
// ways without decrypting them: the client's TLS session is with the broker
// itself. No filter can run here (there are no Kafka frames to see), so no
// policy either; what it adds is routing many broker names through one port
// behind one load balancer, PROXY protocol and connection limits.
package passthrough

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/netedge"
)

// Options configure one passthrough listener.
type Options struct {
	Name   string
	Listen string
	// Routes map a TLS server name (exact, without case) to the broker
	// address (host:port) it stands for.
	Routes map[string]string
	// Pattern, if set, routes names Routes does not: a server name that
	// matches Pattern.ServerName (with $(node) a node id) goes to
	// Pattern.Upstream with the same id.
	Pattern *Pattern
	// ConnectTimeout bounds dialing the broker; default 10 s.
	ConnectTimeout time.Duration
	// HelloTimeout bounds the wait for the client's ClientHello; default
	// 10 s.
	HelloTimeout  time.Duration
	ProxyProtocol *netedge.ProxyProtocol
	// MaxConns and MaxConnsPerAddr bound the connections open at once.
	MaxConns, MaxConnsPerAddr int
	Log                       *slog.Logger
	Metrics                   *Metrics
	// Dial dials the broker; default net.Dialer (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Pattern routes a family of names: ServerName and Upstream each hold
// $(node) once.
type Pattern struct {
	ServerName string
	Upstream   string
}

// maxHello bounds a ClientHello: a TLS record is at most 16 KiB, and a
// hello that takes more than a few records is not a Kafka client's.
const maxHello = 64 << 10

// Listener is a running passthrough listener.
type Listener struct {
	opts   Options
	log    *slog.Logger
	ln     net.Listener
	limits *netedge.Limits
	m      listenerMetrics

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen binds the listener and starts serving.
func Listen(opts Options) (*Listener, error) {
	if len(opts.Routes) == 0 && opts.Pattern == nil {
		return nil, errors.New("passthrough: no routes: name the brokers in routes or route_pattern")
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Dial == nil {
		var d net.Dialer
		opts.Dial = d.DialContext
	}
	routes := make(map[string]string, len(opts.Routes))
	for name, to := range opts.Routes {
		routes[strings.ToLower(strings.TrimSuffix(name, "."))] = to
	}
	opts.Routes = routes
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("tls passthrough %s: cannot listen on %s: %w", opts.Name, opts.Listen, err)
	}
	l := &Listener{
		opts: opts, log: opts.Log.With("tls_passthrough", opts.Name), ln: ln,
		limits: netedge.NewLimits(opts.MaxConns, opts.MaxConnsPerAddr),
		m:      opts.Metrics.forListener(opts.Name),
		conns:  map[net.Conn]struct{}{},
	}
	l.wg.Add(1)
	go l.accept()
	l.log.Info("TLS passthrough listening", "listen", ln.Addr().String(), "routes", len(routes), "pattern", opts.Pattern != nil)
	return l, nil
}

// Name is the listener's name.
func (l *Listener) Name() string { return l.opts.Name }

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Route returns the broker address a TLS server name stands for.
func (l *Listener) Route(name string) (string, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if to, ok := l.opts.Routes[name]; ok {
		return to, true
	}
	p := l.opts.Pattern
	if p == nil {
		return "", false
	}
	id, ok := netedge.NodeName(p.ServerName).Node(name)
	if !ok {
		return "", false
	}
	return netedge.NodeName(p.Upstream).Name(id), true
}

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !l.track(c) {
			c.Close()
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.untrack(c)
			l.serve(c)
		}()
	}
}

func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// refuse closes a connection turned away, counted and logged.
func (l *Listener) refuse(c net.Conn, client net.Addr, reason string, err error, fix string) {
	l.m.refused(reason)
	c.Close()
	if fix == "" {
		fix = netedge.Fix(reason, l.opts.MaxConns, l.opts.MaxConnsPerAddr)
	}
	l.log.Warn("refused a client connection", "client", client.String(), "reason", reason, "err", err, "fix", fix)
}

func (l *Listener) serve(accepted net.Conn) {
	client, err := l.opts.ProxyProtocol.Accept(accepted)
	if err != nil {
		l.refuse(accepted, accepted.RemoteAddr(), netedge.RefusedProxyProtocol, err, "")
		return
	}
	addr := client.RemoteAddr()
	if reason, ok := l.limits.Admit(addr); !ok {
		l.refuse(client, addr, reason, errors.New("over the listener's limit"), "")
		return
	}
	defer l.limits.Release(addr)
	client.SetReadDeadline(time.Now().Add(l.opts.HelloTimeout))
	name, hello, err := readServerName(client)
	if err != nil {
		l.refuse(client, addr, refusedNoSNI, err, "clients must speak TLS and connect by host name (the server name picks the broker)")
		return
	}
	client.SetReadDeadline(time.Time{})
	to, ok := l.Route(name)
	if !ok {
		l.refuse(client, addr, refusedUnknownName, fmt.Errorf("no route for TLS server name %q", name), "add the name to routes, or make route_pattern match it")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.ConnectTimeout)
	up, err := l.opts.Dial(ctx, "tcp", to)
	cancel()
	if err != nil {
		l.m.refused(refusedUpstream)
		client.Close()
		l.log.Warn("cannot reach the broker; closing the client connection", "client", addr.String(), "server_name", name, "broker", to, "err", err)
		return
	}
	if !l.track(up) {
		up.Close()
		client.Close()
		return
	}
	defer l.untrack(up)
	l.m.connsTotal.Inc()
	l.m.connsOpen.Inc()
	defer l.m.connsOpen.Dec()
	l.log.Debug("relaying", "client", addr.String(), "server_name", name, "broker", to)
	if _, err := up.Write(hello); err != nil {
		up.Close()
		client.Close()
		return
	}
	l.m.bytesUp.Add(float64(len(hello)))
	relay(client, up, l.m)
}

// relay copies both ways until either side closes; on Linux, between two
// TCP sockets, io.Copy splices.
func relay(client, up net.Conn, m listenerMetrics) {
	done := make(chan struct{})
	go func() {
		n, _ := io.Copy(up, client)
		m.bytesUp.Add(float64(n))
		closeWrite(up)
		close(done)
	}()
	n, _ := io.Copy(client, up)
	m.bytesDown.Add(float64(n))
	closeWrite(client)
	<-done
	client.Close()
	up.Close()
}

// closeWrite half-closes c when it can, so that the other side sees the
// end of this direction while the other may still flow.
func closeWrite(c net.Conn) {
	type writeCloser interface{ CloseWrite() error }
	if pc, ok := c.(interface{ Raw() net.Conn }); ok {
		c = pc.Raw() // the socket under a PROXY protocol header
	}
	if wc, ok := c.(writeCloser); ok {
		wc.CloseWrite()
		return
	}
	c.Close()
}

// errHelloRead ends the ClientHello read once the server name is known.
var errHelloRead = errors.New("hello read")

// readServerName reads the client's ClientHello and returns its server
// name and the bytes read, to be replayed to the broker. crypto/tls parses
// the hello; the handshake is abandoned as soon as it has.
func readServerName(c net.Conn) (string, []byte, error) {
	var buf bytes.Buffer
	r := io.TeeReader(io.LimitReader(c, maxHello), &buf)
	var name string
	var got bool
	err := tls.Server(helloConn{r: r, Conn: c}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name, got = h.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	switch {
	case !got:
		return "", nil, fmt.Errorf("no TLS ClientHello: %w", err)
	case name == "":
		return "", nil, errors.New("the TLS ClientHello names no server: on a passthrough listener clients must connect by host name")
	}
	return name, buf.Bytes(), nil
}

// helloConn lets crypto/tls read a ClientHello and write nothing.
type helloConn struct {
	r io.Reader
	net.Conn
}

func (h helloConn) Read(b []byte) (int, error)  { return h.r.Read(b) }
func (h helloConn) Write(b []byte) (int, error) { return 0, io.ErrClosedPipe }

// StopAccepting closes the listener: no client connects any more, the
// connections relayed carry on until Shutdown. A reload calls it so that
// the listener replacing this one can bind the same port.
func (l *Listener) StopAccepting() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.ln.Close()
}

// Shutdown stops accepting, waits for connections to end until ctx ends,
// then closes the rest.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.ln.Close()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	<-done
	return ctx.Err()
}

// Refusal reasons of this listener, besides netedge's.
const (
	refusedNoSNI       = "no_server_name"
	refusedUnknownName = "unknown_server_name"
	refusedUpstream    = "upstream_connect"
)

// Metrics are the passthrough listeners' metrics.
type Metrics struct {
	ConnsOpen  *prometheus.GaugeVec
	ConnsTotal *prometheus.CounterVec
	Refused    *prometheus.CounterVec
	Bytes      *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ConnsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strait_tls_passthrough_connections_open", Help: "Client connections relayed now, by passthrough listener.",
		}, []string{"listener"}),
		ConnsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_tls_passthrough_connections_total", Help: "Client connections relayed to a broker, by passthrough listener.",
		}, []string{"listener"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_tls_passthrough_refused_total", Help: "Client connections refused, by passthrough listener and reason: no_server_name, unknown_server_name, upstream_connect, proxy_protocol, max_connections, max_connections_per_address.",
		}, []string{"listener", "reason"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_tls_passthrough_bytes_total", Help: "Bytes relayed (counted when a connection ends), by passthrough listener and direction: client_to_broker or broker_to_client.",
		}, []string{"listener", "direction"}),
	}
	reg.MustRegister(m.ConnsOpen, m.ConnsTotal, m.Refused, m.Bytes)
	return m
}

type listenerMetrics struct {
	name               string
	vec                *Metrics
	connsOpen          prometheus.Gauge
	connsTotal         prometheus.Counter
	bytesUp, bytesDown prometheus.Counter
}

func (m *Metrics) forListener(name string) listenerMetrics {
	if m == nil {
		m = NewMetrics(prometheus.NewRegistry())
	}
	return listenerMetrics{
		name: name, vec: m,
		connsOpen: m.ConnsOpen.WithLabelValues(name), connsTotal: m.ConnsTotal.WithLabelValues(name),
		bytesUp: m.Bytes.WithLabelValues(name, "client_to_broker"), bytesDown: m.Bytes.WithLabelValues(name, "broker_to_client"),
	}
}

func (m listenerMetrics) refused(reason string) { m.vec.Refused.WithLabelValues(m.name, reason).Inc() }
