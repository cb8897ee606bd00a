// Package proxy is the Kafka-protocol proxy: it listens for clients on a
// virtual cluster's bootstrap and per-node addresses, opens one broker
// connection per client connection, and relays frames in both directions.
// A frame whose API key no filter subscribes to is forwarded as bytes after
// its header is read; the rest are decoded, passed through the filter chain,
// and encoded again.
//
// Data flows one way: listener → conn → filter chain → upstream, and back.
// Filters see only the filter package's types, never this package.
package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	kafkasasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filters/addresses"
	"github.com/straitgw/strait/internal/kafka/filters/apiversions"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/netedge"
	"github.com/straitgw/strait/internal/telemetry"
)

// Target is the Kafka cluster a virtual cluster fronts.
type Target struct {
	Bootstrap      []string
	TLS            *tls.Config // nil: plaintext to the brokers
	ConnectTimeout time.Duration
	// RequestTimeout bounds the wait for the broker's answer to one
	// request; past it the connection is closed.
	RequestTimeout time.Duration
	// SASL, if set, is how the gateway authenticates itself to the
	// brokers: every broker connection, and the side client filters use.
	// It needs client SASL terminated at the gateway (Options.SASL), or
	// clients' own handshakes would reach an authenticated connection.
	SASL kafkasasl.Mechanism
}

// Options configure one virtual cluster.
type Options struct {
	Name           string
	Listen         string // bootstrap host:port
	AdvertisedHost string // host clients are told to dial; default: Listen's host
	// Node N is served on NodePortStart+N, which must not exceed NodePortEnd.
	NodePortStart, NodePortEnd int
	TLS                        *tls.Config // nil: plaintext to clients
	MaxFrame                   int         // default wire.DefaultMaxFrame
	MaxInflight                int         // pipelined requests per connection; default 256
	// IdleTimeout closes a client connection that sends nothing for this
	// long (about: renewed every quarter of it); 0 never does.
	IdleTimeout time.Duration
	// FrameReadTimeout bounds how long the rest of a client frame may take
	// to arrive once its size has; default DefaultFrameReadTimeout.
	FrameReadTimeout time.Duration
	Target           Target
	Filters          []filter.Filter // policy filters, after the built-in ones
	// SASL, if set, terminates client authentication at the gateway.
	SASL *SASL
	// CertPrincipal, if set, names each client by its TLS certificate
	// (mutual TLS): a client without one, or whose certificate it cannot
	// map, is refused. A SASL principal, if the client authenticates with
	// SASL too, takes its place.
	CertPrincipal func(*x509.Certificate) (string, error)
	// UpstreamIdentity, if set, gives client principals broker
	// credentials of their own. It needs a principal: SASL or
	// CertPrincipal.
	UpstreamIdentity *UpstreamIdentity
	// SNI, if set, serves every broker on Listen, picked by the TLS
	// server name: no node ports. It needs TLS.
	SNI *SNIRouting
	// ProxyProtocol, if set, reads a PROXY protocol header before
	// anything else on every connection.
	ProxyProtocol *ProxyProtocol
	// MaxConns and MaxConnsPerAddr bound the client connections open at
	// once, in all and from one client address (after the PROXY header);
	// 0: no bound. A connection past either is closed at once.
	MaxConns, MaxConnsPerAddr int
	// ClientWriteTimeout disconnects a client that has not taken its
	// answers for this long (it stopped reading); 0: never.
	ClientWriteTimeout time.Duration
	// VersionLimit, if set, lowers the highest version of an API key the
	// gateway offers clients in ApiVersions (a filter that cannot handle a
	// newer version of some key needs it). It returns the version to
	// offer, or -1 to drop the key.
	VersionLimit func(key, max int16) int16
	// SkipBrokerDiscovery leaves node listeners to open only as clients
	// fetch metadata, instead of asking the cluster at Start.
	SkipBrokerDiscovery bool
	Log                 *slog.Logger
	Metrics             *telemetry.KafkaMetrics

	// nodeRetry overrides nodeRetryInterval (tests).
	nodeRetry time.Duration
	// respondLinger overrides defaultRespondLinger (tests).
	respondLinger time.Duration
}

// VirtualCluster serves one virtual cluster.
type VirtualCluster struct {
	opts  Options
	chain *filter.Chain
	log   *slog.Logger
	m     *vcMetrics
	host  string // advertised host
	bind  string // host the listeners bind

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[int32]net.Listener // node id → listener; -1 is bootstrap
	upstream  map[int32]string       // node id → broker host:port
	unbound   map[int32]*unboundNode // nodes whose port could not be bound
	conns     map[*conn]struct{}
	closed    bool
	// started is set once Start has checked every known node's port: from
	// then on a port that cannot be bound is logged, not returned by Start.
	started bool

	draining atomic.Bool
	wg       sync.WaitGroup

	// failures is the failure budget of client addresses, when SASL is
	// terminated here.
	failures *failureBudget
	// limits counts connections against MaxConns and MaxConnsPerAddr;
	// nil without either.
	limits *netedge.Limits

	sideOnce sync.Once
	side     *kgo.Client
	sideErr  error

	topicsMu sync.RWMutex
	topics   map[[16]byte]string
}

const bootstrapNode = -1

// DefaultFrameReadTimeout is Options.FrameReadTimeout when left zero: the
// time a Kafka client waits for a whole request's answer by default
// (request.timeout.ms), so a client still waiting on a frame would itself
// have given up by then.
const DefaultFrameReadTimeout = 30 * time.Second

// nodeRetryInterval is how often a node port that could not be bound is
// tried again (on the next Advertise or readiness check after it).
const nodeRetryInterval = 5 * time.Second

// unboundNode is a broker node whose port could not be bound.
type unboundNode struct {
	listen string // the address that failed
	broker string // the broker's own address
	err    error
	tried  time.Time
}

// New builds a virtual cluster; Start binds it.
func New(opts Options) (*VirtualCluster, error) {
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = wire.DefaultMaxFrame
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = 256
	}
	if opts.FrameReadTimeout <= 0 {
		opts.FrameReadTimeout = DefaultFrameReadTimeout
	}
	if opts.nodeRetry <= 0 {
		opts.nodeRetry = nodeRetryInterval
	}
	if opts.respondLinger <= 0 {
		opts.respondLinger = defaultRespondLinger
	}
	if opts.Target.ConnectTimeout <= 0 {
		opts.Target.ConnectTimeout = 10 * time.Second
	}
	if opts.Target.RequestTimeout <= 0 {
		opts.Target.RequestTimeout = 5 * time.Minute
	}
	if len(opts.Target.Bootstrap) == 0 {
		return nil, errors.New("target cluster has no bootstrap servers")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	bindHost, port, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", opts.Listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("listen %q: bad port", opts.Listen)
	}
	if opts.NodePortStart == 0 {
		opts.NodePortStart = p + 1
	}
	if opts.NodePortEnd == 0 {
		opts.NodePortEnd = opts.NodePortStart + 999
	}
	host := opts.AdvertisedHost
	if host == "" {
		host = bindHost
	}
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return nil, fmt.Errorf("listen %q binds every address: set the advertised host clients should dial", opts.Listen)
	}
	v := &VirtualCluster{
		opts:      opts,
		log:       opts.Log.With("virtual_cluster", opts.Name),
		m:         newVCMetrics(opts.Metrics, opts.Name),
		host:      host,
		bind:      bindHost,
		listeners: make(map[int32]net.Listener),
		upstream:  make(map[int32]string),
		unbound:   make(map[int32]*unboundNode),
		conns:     make(map[*conn]struct{}),
		topics:    make(map[[16]byte]string),
	}
	if opts.SASL != nil {
		v.failures = &failureBudget{budget: opts.SASL.FailureBudget}
	}
	if opts.SNI != nil && opts.TLS == nil {
		return nil, errors.New("SNI routing needs TLS: clients name the broker they want in the TLS handshake")
	}
	v.limits = netedge.NewLimits(opts.MaxConns, opts.MaxConnsPerAddr)
	if opts.UpstreamIdentity != nil && opts.SASL == nil && opts.CertPrincipal == nil {
		return nil, errors.New("upstream identity maps client principals, but the virtual cluster names none: terminate SASL or map TLS client certificates to principals")
	}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	// Built-ins first: ApiVersions sees requests before any policy filter
	// and, responses running in reverse, has the last word on them.
	av := apiversions.New()
	av.Limit = opts.VersionLimit
	if opts.SASL != nil {
		// The authentication stage answers these itself, at the versions
		// it reads: offer them whether or not the broker has SASL on.
		av.Offer = []kmsg.ApiVersionsResponseApiKey{
			{ApiKey: wire.KeySASLHandshake, MinVersion: 0, MaxVersion: 1},
			{ApiKey: wire.KeySASLAuthenticate, MinVersion: 0, MaxVersion: 2},
		}
	}
	fs := append([]filter.Filter{av, addresses.New(v)}, opts.Filters...)
	if v.chain, err = filter.NewChain(fs...); err != nil {
		return nil, err
	}
	return v, nil
}

// Start binds the bootstrap listener and starts accepting clients, then
// asks the cluster for its brokers (for up to the target's connect
// timeout) and binds each one's node port, so that clients that remember
// the nodes from before can reconnect, and so that a node port something
// else holds is found now rather than by the first client that needs it.
// A port that cannot be bound fails Start; a cluster that cannot be reached
// does not (node listeners then open as clients fetch metadata).
func (v *VirtualCluster) Start() error {
	ln, err := net.Listen("tcp", v.opts.Listen)
	if err != nil {
		return fmt.Errorf("virtual cluster %s: cannot listen on %s: %s: stop what holds it or change the virtual cluster's listen",
			v.opts.Name, v.opts.Listen, bindProblem(err))
	}
	v.mu.Lock()
	v.listeners[bootstrapNode] = ln
	v.mu.Unlock()
	v.wg.Add(1)
	go v.accept(ln, bootstrapNode)
	v.log.Info("virtual cluster listening", "bootstrap", ln.Addr().String(), "advertised_host", v.host,
		"node_ports", fmt.Sprintf("%d-%d", v.opts.NodePortStart, v.opts.NodePortEnd),
		"target", v.opts.Target.Bootstrap, "tls", v.opts.TLS != nil)
	if !v.opts.SkipBrokerDiscovery {
		ctx, cancel := context.WithTimeout(v.ctx, v.opts.Target.ConnectTimeout)
		err := v.refreshBrokers(ctx)
		cancel()
		if err != nil && v.ctx.Err() == nil {
			v.log.Warn("could not learn the cluster's brokers at start; node listeners will open as clients fetch metadata", "err", err)
		}
	}
	v.mu.Lock()
	err = v.unboundErrLocked()
	v.started = err == nil
	v.mu.Unlock()
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v.Shutdown(ctx)
		return err
	}
	return nil
}

// bindProblem says briefly why binding a port failed.
func bindProblem(err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "address already in use (another program, or another Strait, holds the port)"
	case errors.Is(err, syscall.EACCES):
		return "permission denied (ports below 1024 need privileges)"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "the address is not one of this host's"
	}
	return err.Error()
}

// Addr returns the bootstrap listener's address (useful with port 0).
func (v *VirtualCluster) Addr() net.Addr {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ln := v.listeners[bootstrapNode]; ln != nil {
		return ln.Addr()
	}
	return nil
}

// Ready reports whether the virtual cluster accepts clients and serves
// every broker it knows of; Readiness says why not.
func (v *VirtualCluster) Ready() bool { return v.Readiness() == nil }

// Readiness returns nil when the virtual cluster accepts clients and serves
// every broker it knows of, or else why not. A node port that could not be
// bound is tried again here (at most every few seconds), so readiness
// comes back once the port is free, without waiting for a client.
func (v *VirtualCluster) Readiness() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.closed || v.draining.Load():
		return fmt.Errorf("virtual cluster %s is shutting down", v.opts.Name)
	case v.listeners[bootstrapNode] == nil:
		return fmt.Errorf("virtual cluster %s is not listening on %s", v.opts.Name, v.opts.Listen)
	}
	for id := range v.unbound {
		v.openNodeLocked(id, time.Now())
	}
	return v.unboundErrLocked()
}

// unboundErrLocked describes every node whose port could not be bound, or
// returns nil if there are none.
func (v *VirtualCluster) unboundErrLocked() error {
	ids := make([]int32, 0, len(v.unbound))
	for id := range v.unbound {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		u := v.unbound[id]
		errs = append(errs, fmt.Errorf("virtual cluster %s cannot serve broker node %d (%s) on %s: %s: free that port, or change node_ports (now %d-%d; node N is served on node_ports.start + N)",
			v.opts.Name, id, u.broker, u.listen, bindProblem(u.err), v.opts.NodePortStart, v.opts.NodePortEnd))
	}
	return errors.Join(errs...)
}

// Advertise implements addresses.Mapper: it records where node id lives
// upstream and returns the gateway's address for it, opening the node's
// listener if this is the first time the node is seen.
//
// If the node's port cannot be bound (something else holds it), clients
// are given the bootstrap address for that node instead, and the virtual
// cluster reports not ready until the port can be bound: every other node
// goes on being served, and no client is sent to a port the gateway does
// not own, where whatever listens would see its requests and credentials.
// Requests for the node's partitions that reach another broker through the
// bootstrap address are refused by it with retriable errors.
func (v *VirtualCluster) Advertise(id int32, host string, port int32) (string, int32, error) {
	if v.opts.SNI != nil {
		return v.advertiseSNI(id, host, port)
	}
	// Compare the id with the port range's width, not start+id with its
	// end: on a 32-bit platform start+id can wrap.
	if id < 0 || int64(id) > int64(v.opts.NodePortEnd)-int64(v.opts.NodePortStart) {
		return "", 0, fmt.Errorf("node id %d is outside virtual cluster %s's node ports %d-%d: widen node_ports",
			id, v.opts.Name, v.opts.NodePortStart, v.opts.NodePortEnd)
	}
	p := v.opts.NodePortStart + int(id)
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.upstream[id]; !ok || old != addr {
		if ok {
			v.log.Info("broker moved", "node", id, "from", old, "to", addr)
		}
		v.upstream[id] = addr
	}
	// While draining, answers still in flight get their addresses, but
	// no new listener opens.
	if _, ok := v.listeners[id]; !ok && !v.closed {
		if !v.openNodeLocked(id, time.Now()) {
			if ln := v.listeners[bootstrapNode]; ln != nil {
				if a, ok := ln.Addr().(*net.TCPAddr); ok {
					return v.host, int32(a.Port), nil
				}
			}
			return "", 0, v.unboundErrLocked() // nothing to fall back to
		}
	}
	return v.host, int32(p), nil
}

// advertiseSNI records where node id lives and returns its name: every
// node is served on the listen port, so nothing opens.
func (v *VirtualCluster) advertiseSNI(id int32, host string, port int32) (string, int32, error) {
	if id < 0 {
		return "", 0, fmt.Errorf("node id %d cannot be named by %s", id, v.opts.SNI.BrokerHost)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	v.mu.Lock()
	if old, ok := v.upstream[id]; !ok || old != addr {
		if ok {
			v.log.Info("broker moved", "node", id, "from", old, "to", addr)
		}
		v.upstream[id] = addr
	}
	v.mu.Unlock()
	_, p := v.Bootstrap()
	return v.opts.SNI.brokerHost(id), p, nil
}

// openNodeLocked binds node id's port and starts accepting on it, unless
// the last attempt failed less than Options.nodeRetry ago. It reports
// whether the node has a listener. The first failure for a node is logged
// (once Start has returned; before, Start reports it) and the node is
// recorded as unbound until an attempt succeeds.
func (v *VirtualCluster) openNodeLocked(id int32, now time.Time) bool {
	if _, ok := v.listeners[id]; ok {
		return true
	}
	if v.closed {
		return false
	}
	u := v.unbound[id]
	if u != nil && now.Sub(u.tried) < v.opts.nodeRetry {
		return false
	}
	listen := net.JoinHostPort(v.bind, strconv.Itoa(v.opts.NodePortStart+int(id)))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		if u == nil {
			u = &unboundNode{listen: listen}
			v.unbound[id] = u
			if v.started {
				v.log.Error("cannot open the listener of a broker node; clients are given the bootstrap address for it and /readyz reports not ready until the port can be bound",
					"node", id, "listen", listen, "broker", v.upstream[id], "err", bindProblem(err),
					"fix", fmt.Sprintf("free port %d or change node_ports (now %d-%d)", v.opts.NodePortStart+int(id), v.opts.NodePortStart, v.opts.NodePortEnd))
			}
		}
		u.broker, u.err, u.tried = v.upstream[id], err, now
		return false
	}
	if u != nil {
		delete(v.unbound, id)
	}
	v.listeners[id] = ln
	v.wg.Add(1)
	go v.accept(ln, id)
	v.log.Info("node listener open", "node", id, "listen", ln.Addr().String(), "broker", v.upstream[id])
	return true
}

// Bootstrap implements addresses.Mapper.
func (v *VirtualCluster) Bootstrap() (string, int32) {
	port := 0
	if a, ok := v.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	if s := v.opts.SNI; s != nil {
		if s.AdvertisedPort > 0 {
			port = s.AdvertisedPort
		}
		return s.BootstrapHost, int32(port)
	}
	return v.host, int32(port)
}

func (v *VirtualCluster) accept(ln net.Listener, node int32) {
	defer v.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if v.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			v.log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond) // e.g. out of file descriptors: don't spin
			continue
		}
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			v.serve(c, node)
		}()
	}
}

func (v *VirtualCluster) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

// upstreamAddr returns the broker address for a node, asking the cluster
// if the node is not yet known (a client that kept its metadata across a
// gateway restart dials a node port directly).
func (v *VirtualCluster) upstreamAddr(ctx context.Context, node int32) (string, error) {
	v.mu.Lock()
	addr, ok := v.upstream[node]
	v.mu.Unlock()
	if ok {
		return addr, nil
	}
	if err := v.refreshBrokers(ctx); err != nil {
		return "", err
	}
	v.mu.Lock()
	addr, ok = v.upstream[node]
	v.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("the cluster has no node %d", node)
	}
	return addr, nil
}

// refreshBrokers learns the cluster's brokers and opens their listeners.
func (v *VirtualCluster) refreshBrokers(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics: brokers only
	resp, err := v.Send(ctx, req)
	if err != nil {
		return err
	}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		if _, _, err := v.Advertise(b.NodeID, b.Host, b.Port); err != nil {
			v.log.Error("cannot serve broker", "err", err)
		}
	}
	return nil
}

func (v *VirtualCluster) dialer() func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: v.opts.Target.ConnectTimeout, KeepAlive: 30 * time.Second}
	if v.opts.Target.TLS == nil {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg := v.opts.Target.TLS.Clone()
		if cfg.ServerName == "" {
			h, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = h
		}
		td := &tls.Dialer{NetDialer: d, Config: cfg}
		return td.DialContext(ctx, network, addr)
	}
}

// Send implements filter.Sender over a client of the gateway's own, apart
// from every client connection.
func (v *VirtualCluster) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	v.sideOnce.Do(func() {
		opts := []kgo.Opt{
			kgo.SeedBrokers(v.opts.Target.Bootstrap...),
			kgo.Dialer(v.dialer()),
			kgo.ClientID("strait-" + v.opts.Name),
			kgo.DialTimeout(v.opts.Target.ConnectTimeout),
		}
		if v.opts.Target.SASL != nil {
			// The gateway's own identity toward the cluster.
			opts = append(opts, kgo.SASL(v.opts.Target.SASL))
		}
		v.side, v.sideErr = kgo.NewClient(opts...)
	})
	if v.sideErr != nil {
		return nil, v.sideErr
	}
	return v.side.Request(ctx, req)
}

// TopicName implements filter.TopicResolver, asking the cluster on a miss.
func (v *VirtualCluster) TopicName(ctx context.Context, id [16]byte) (string, error) {
	v.topicsMu.RLock()
	name, ok := v.topics[id]
	v.topicsMu.RUnlock()
	if ok {
		return name, nil
	}
	req := kmsg.NewPtrMetadataRequest() // nil topics: all of them
	resp, err := v.Send(ctx, req)
	if err != nil {
		return "", fmt.Errorf("resolve topic id: %w", err)
	}
	v.topicsMu.Lock()
	defer v.topicsMu.Unlock()
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil {
			v.topics[t.TopicID] = *t.Topic
		}
	}
	if name, ok := v.topics[id]; ok {
		return name, nil
	}
	return "", fmt.Errorf("unknown topic id %x", id)
}

// StopAccepting closes the listeners: no client connects any more, the
// ones connected carry on until Shutdown drains them. A reload calls it so
// that the virtual cluster replacing this one can bind the same ports
// while this one drains.
func (v *VirtualCluster) StopAccepting() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed = true
	for _, ln := range v.listeners {
		ln.Close()
	}
}

// Name is the virtual cluster's name.
func (v *VirtualCluster) Name() string { return v.opts.Name }

// Shutdown stops accepting, lets connections finish the requests they have
// in flight, and closes them. Connections still busy when ctx ends are
// closed anyway.
func (v *VirtualCluster) Shutdown(ctx context.Context) error {
	v.draining.Store(true)
	v.mu.Lock()
	v.closed = true
	for _, ln := range v.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(v.conns))
	for c := range v.conns {
		conns = append(conns, c)
	}
	v.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() { v.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		v.mu.Lock()
		n := len(v.conns)
		for c := range v.conns {
			c.close()
		}
		v.mu.Unlock()
		err = fmt.Errorf("virtual cluster %s: drain timed out; closed %d connections with requests in flight", v.opts.Name, n)
		// Closing sockets does not stop a filter waiting on a request of
		// its own upstream; cancelling the connections' context does.
		v.cancel()
		<-done
	}
	v.cancel()
	// Wait for a client still being made; if none was, make sure none will
	// be: a later Send gets an error, not a nil client or a leaked one.
	v.sideOnce.Do(func() { v.sideErr = errors.New("virtual cluster is shut down") })
	if v.side != nil {
		v.side.Close()
	}
	return err
}

func (v *VirtualCluster) track(c *conn) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false
	}
	v.conns[c] = struct{}{}
	return true
}

func (v *VirtualCluster) untrack(c *conn) {
	v.mu.Lock()
	delete(v.conns, c)
	v.mu.Unlock()
}

var (
	_ addresses.Mapper     = (*VirtualCluster)(nil)
	_ filter.Sender        = (*VirtualCluster)(nil)
	_ filter.TopicResolver = (*VirtualCluster)(nil)
)
