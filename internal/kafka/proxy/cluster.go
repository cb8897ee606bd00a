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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filters/addresses"
	"github.com/straitgw/strait/internal/kafka/filters/apiversions"
	"github.com/straitgw/strait/internal/kafka/wire"
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
	Target      Target
	Filters     []filter.Filter // policy filters, after the built-in ones
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
	conns     map[*conn]struct{}
	closed    bool

	draining atomic.Bool
	wg       sync.WaitGroup

	sideOnce sync.Once
	side     *kgo.Client
	sideErr  error

	topicsMu sync.RWMutex
	topics   map[[16]byte]string
}

const bootstrapNode = -1

// New builds a virtual cluster; Start binds it.
func New(opts Options) (*VirtualCluster, error) {
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = wire.DefaultMaxFrame
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = 256
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
		conns:     make(map[*conn]struct{}),
		topics:    make(map[[16]byte]string),
	}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	// Built-ins first: ApiVersions sees requests before any policy filter
	// and, responses running in reverse, has the last word on them.
	av := apiversions.New()
	av.Limit = opts.VersionLimit
	fs := append([]filter.Filter{av, addresses.New(v)}, opts.Filters...)
	if v.chain, err = filter.NewChain(fs...); err != nil {
		return nil, err
	}
	return v, nil
}

// Start binds the bootstrap listener and starts accepting clients. In the
// background it asks the cluster for its brokers so that the node listeners
// are open before clients that remember them reconnect.
func (v *VirtualCluster) Start() error {
	ln, err := net.Listen("tcp", v.opts.Listen)
	if err != nil {
		return fmt.Errorf("virtual cluster %s: %w", v.opts.Name, err)
	}
	v.mu.Lock()
	v.listeners[bootstrapNode] = ln
	v.mu.Unlock()
	v.wg.Add(1)
	go v.accept(ln, bootstrapNode)
	v.log.Info("virtual cluster listening", "bootstrap", ln.Addr().String(), "advertised_host", v.host,
		"node_ports", fmt.Sprintf("%d-%d", v.opts.NodePortStart, v.opts.NodePortEnd),
		"target", v.opts.Target.Bootstrap, "tls", v.opts.TLS != nil)
	if v.opts.SkipBrokerDiscovery {
		return nil
	}
	go func() {
		ctx, cancel := context.WithTimeout(v.ctx, v.opts.Target.ConnectTimeout)
		defer cancel()
		if err := v.refreshBrokers(ctx); err != nil && v.ctx.Err() == nil {
			v.log.Warn("could not learn the cluster's brokers at start; node listeners will open as clients fetch metadata", "err", err)
		}
	}()
	return nil
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

// Ready reports whether the virtual cluster accepts clients.
func (v *VirtualCluster) Ready() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.closed && v.listeners[bootstrapNode] != nil && !v.draining.Load()
}

// Advertise implements addresses.Mapper: it records where node id lives
// upstream and returns the gateway's address for it, opening the node's
// listener if this is the first time the node is seen.
func (v *VirtualCluster) Advertise(id int32, host string, port int32) (string, int32, error) {
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
		ln, err := net.Listen("tcp", net.JoinHostPort(v.bind, strconv.Itoa(p)))
		if err != nil {
			return "", 0, fmt.Errorf("open listener for node %d: %w", id, err)
		}
		v.listeners[id] = ln
		v.wg.Add(1)
		go v.accept(ln, id)
		v.log.Info("node listener open", "node", id, "listen", ln.Addr().String(), "broker", addr)
	}
	return v.host, int32(p), nil
}

// Bootstrap implements addresses.Mapper.
func (v *VirtualCluster) Bootstrap() (string, int32) {
	port := 0
	if a, ok := v.Addr().(*net.TCPAddr); ok {
		port = a.Port
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
		v.side, v.sideErr = kgo.NewClient(
			kgo.SeedBrokers(v.opts.Target.Bootstrap...),
			kgo.Dialer(v.dialer()),
			kgo.ClientID("strait-"+v.opts.Name),
			kgo.DialTimeout(v.opts.Target.ConnectTimeout),
		)
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
