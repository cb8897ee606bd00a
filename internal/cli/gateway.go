package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/straitgw/strait/internal/admin"
	"github.com/straitgw/strait/internal/config"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
	"github.com/straitgw/strait/internal/kafka/passthrough"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/kms/kmsconfig"
	"github.com/straitgw/strait/internal/netedge"
	"github.com/straitgw/strait/internal/telemetry"
)

// buildFilters makes each virtual cluster's filters through the filter
// registry, reporting every bad entry in the config's error format. Filters
// with equal kms blocks share one KMS and its cache.
func buildFilters(cfg *config.Config) (map[string][]filter.Filter, error) {
	var errs config.Errors
	out := make(map[string][]filter.Filter)
	env := registry.Env{OpenKMS: new(kmsconfig.Opener).Open}
	for i, vc := range cfg.VirtualClusters {
		for j := range vc.Filters {
			f := &vc.Filters[j]
			path := f.Path
			if path == "" {
				path = fmt.Sprintf("virtual_clusters[%d].filters[%d]", i, j)
			}
			flt, err := registry.Build(f.Type, &f.Config, env)
			switch {
			case errors.Is(err, registry.ErrUnknownType):
				errs.Add(cfg.File, f.Line, path+".type", err.Error())
				continue
			case err != nil:
				errs.Add(cfg.File, f.Line, path+".config", oneLine(err))
				continue
			}
			out[vc.Name] = append(out[vc.Name], flt)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// oneLine joins a filter's errors with "; " so that each config problem
// stays one line of `strait validate`'s output.
func oneLine(err error) string {
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

// gateway is a running set of virtual clusters, the LLM gateway and the
// admin server.
type gateway struct {
	log *slog.Logger
	reg *prometheus.Registry
	km  *telemetry.KafkaMetrics
	pm  *passthrough.Metrics
	// mu guards vcs and pass, which a reload changes.
	mu    sync.Mutex
	vcs   []*proxy.VirtualCluster
	pass  []*passthrough.Listener
	llm   *llmGateway
	admin *admin.Server
	drain config.Duration
}

// built is what a config makes beyond itself: each virtual cluster's
// filters and authentication.
type built struct {
	filters map[string][]filter.Filter
	auth    map[string]*vcAuth
}

// loadConfig loads a config and builds its filters and authentication, so
// that run and validate report exactly the same errors, all at once and in
// file order.
func loadConfig(path string) (*config.Config, *built, error) {
	cfg, err := config.Load(path)
	var errs config.Errors
	if err != nil {
		if !errors.As(err, &errs) || cfg == nil {
			return nil, nil, err
		}
	}
	filters, ferr := buildFilters(cfg)
	var fes config.Errors
	if errors.As(ferr, &fes) {
		errs.Append(fes...)
	}
	auth, aerr := buildAuth(cfg)
	if errors.As(aerr, &fes) {
		errs.Append(fes...)
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, nil, errs
	}
	return cfg, &built{filters: filters, auth: auth}, nil
}

// startGateway starts every virtual cluster, the LLM gateway and the admin
// server. When one of them cannot start, the ones started before are
// stopped and the error says only what failed. The LLM listeners are bound
// first but served last, once nothing else can fail: a gateway stopped
// before it served logged that it had stopped serving, with an error of
// its own ("Serve called after Shutdown") after the real one.
// rl, if set, reloads the config (strait run): its metrics are exported,
// and POST /-/reload on the admin listener runs it.
func startGateway(cfg *config.Config, b *built, log *slog.Logger, rl *reloader) (*gateway, error) {
	filters := b.filters
	reg := telemetry.NewRegistry()
	if rl != nil {
		rl.register(reg)
	}
	km := telemetry.NewKafkaMetrics(reg)
	if err := registerFilterMetrics(reg, filters); err != nil {
		return nil, err
	}
	g := &gateway{log: log, drain: cfg.Shutdown.DrainTimeout}
	if cfg.LLM != nil {
		l, err := bindLLM(cfg.LLM, reg, log)
		if err != nil {
			g.stop(context.Background())
			return nil, err
		}
		g.llm = l
	}
	g.reg, g.km = reg, km
	for _, vcc := range cfg.VirtualClusters {
		vc, err := g.newVC(cfg, vcc, b)
		if err == nil {
			err = vc.Start()
		}
		if err != nil {
			g.stop(context.Background())
			return nil, err
		}
		g.vcs = append(g.vcs, vc)
	}
	g.pm = passthrough.NewMetrics(reg)
	for _, tp := range cfg.TLSPassthrough {
		l, err := passthrough.Listen(g.passOptions(tp))
		if err != nil {
			g.stop(context.Background())
			return nil, err
		}
		g.pass = append(g.pass, l)
	}
	if cfg.Admin.Listen != "" {
		var extra []admin.Endpoint
		if rl != nil {
			extra = append(extra, admin.Endpoint{Pattern: "POST /-/reload", Handler: rl.handler()})
		}
		if g.llm != nil {
			extra = append(extra, admin.Endpoint{Pattern: "GET /llm/keys", Handler: g.llm.g.KeysHandler()})
		}
		a, err := admin.Listen(cfg.Admin.Listen, reg, g.ready, log, extra...)
		if err != nil {
			g.stop(context.Background())
			return nil, listenError("admin listener", "admin.listen", cfg.Admin.Listen, err)
		}
		g.admin = a
	}
	if g.llm != nil {
		g.llm.serve()
	}
	return g, nil
}

// registerFilterMetrics puts the metrics of the filters that keep some (a
// filter that is a prometheus.Collector) on the gateway's registry. Filters
// of one type may share their metrics, labelled by virtual cluster: a
// collector registered already is fine.
func registerFilterMetrics(reg prometheus.Registerer, filters map[string][]filter.Filter) error {
	for _, fs := range filters {
		for _, f := range fs {
			c, ok := f.(prometheus.Collector)
			if !ok {
				continue
			}
			var dup prometheus.AlreadyRegisteredError
			if err := reg.Register(c); err != nil && !errors.As(err, &dup) {
				return fmt.Errorf("filter %s: metrics: %w", f.Name(), err)
			}
		}
	}
	return nil
}

// listenError says which listener could not listen on addr and why, and
// names the config key to change.
func listenError(what, key, addr string, err error) error {
	var why string
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%s: cannot listen on %s: the port is already in use: stop what holds it (another strait?) or change %s", what, addr, key)
	case errors.Is(err, syscall.EACCES):
		why = "permission denied (ports below 1024 need privileges)"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		why = "the address is not one of this host's"
	case errors.As(err, &oe):
		why = oe.Err.Error()
	default:
		why = err.Error()
	}
	return fmt.Errorf("%s: cannot listen on %s: %s: change %s", what, addr, why, key)
}

func (g *gateway) ready() error {
	var errs []error
	for _, vc := range g.virtualClusters() {
		if err := vc.Readiness(); err != nil {
			errs = append(errs, err)
		}
	}
	if g.llm != nil {
		errs = append(errs, g.llm.ready())
	}
	return errors.Join(errs...)
}

// stop drains every virtual cluster within the drain timeout. A timeout of
// zero means no waiting (docs/config.md): connections are closed at once.
// Config defaults an unset drain_timeout to 30s, so zero is always explicit.
func (g *gateway) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.drain.Duration)
	defer cancel()
	var errs []error
	llmDone := make(chan error, 1)
	if g.llm != nil {
		go func() { llmDone <- g.llm.stop(ctx) }()
	} else {
		llmDone <- nil
	}
	for _, vc := range g.virtualClusters() {
		if err := vc.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range g.passListeners() {
		if err := l.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := <-llmDone; err != nil {
		errs = append(errs, err)
	}
	if g.admin != nil {
		g.admin.Shutdown(ctx)
	}
	return errors.Join(errs...)
}

// proxyProtocol is a listener's PROXY protocol setting, nil when off.
func proxyProtocol(mode string, from []string) *netedge.ProxyProtocol {
	if mode != "allowed" && mode != "required" {
		return nil
	}
	pp := &netedge.ProxyProtocol{Required: mode == "required"}
	for _, n := range from {
		prefix, _ := config.ParsePrefix(n) // checked by validation
		pp.Trusted = append(pp.Trusted, prefix)
	}
	return pp
}

// virtualClusters are the virtual clusters running now.
func (g *gateway) virtualClusters() []*proxy.VirtualCluster {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.vcs)
}

// passListeners are the TLS passthrough listeners running now.
func (g *gateway) passListeners() []*passthrough.Listener {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.pass)
}

// passOptions are the options of passthrough listener tp.
func (g *gateway) passOptions(tp *config.TLSPassthrough) passthrough.Options {
	opts := passthrough.Options{
		Name: tp.Name, Listen: tp.Listen, Routes: tp.Routes, ConnectTimeout: tp.ConnectTimeout.Duration,
		MaxConns: tp.MaxConnections, MaxConnsPerAddr: tp.MaxConnectionsPerAddress, Log: g.log, Metrics: g.pm,
		ProxyProtocol: proxyProtocol(tp.ProxyProtocol, tp.ProxyProtocolFrom),
	}
	if rp := tp.RoutePattern; rp != nil {
		opts.Pattern = &passthrough.Pattern{ServerName: rp.ServerName, Upstream: rp.Upstream}
	}
	return opts
}

// newVC builds (but does not start) virtual cluster vcc of cfg, with the
// filters and authentication b built for it.
func (g *gateway) newVC(cfg *config.Config, vcc *config.VirtualCluster, b *built) (*proxy.VirtualCluster, error) {
	log, km := g.log, g.km
	cl := cfg.Clusters[vcc.Cluster]
	target := proxy.Target{
		Bootstrap:      cl.BootstrapServers,
		ConnectTimeout: cl.ConnectTimeout.Duration,
		RequestTimeout: cl.RequestTimeout.Duration,
	}
	if cl.TLS != nil && cl.TLS.Enabled {
		tc, err := cl.TLS.Build()
		if err != nil {
			return nil, fmt.Errorf("clusters.%s.tls: %w", vcc.Cluster, err)
		}
		target.TLS = tc
	}
	if cl.SASL != nil {
		m, err := cl.SASL.Build()
		if err != nil {
			return nil, fmt.Errorf("clusters.%s.sasl: %w", vcc.Cluster, err)
		}
		target.SASL = m
	}
	opts := proxy.Options{
		Name:             vcc.Name,
		Listen:           vcc.Listen,
		AdvertisedHost:   vcc.AdvertisedHost(),
		NodePortStart:    vcc.NodePorts.Start,
		NodePortEnd:      vcc.NodePorts.End,
		MaxFrame:         vcc.MaxFrameBytes,
		MaxInflight:      vcc.MaxInflight,
		IdleTimeout:      vcc.IdleTimeout.Duration,
		FrameReadTimeout: vcc.FrameReadTimeout.Duration,
		Target:           target,
		Filters:          b.filters[vcc.Name],
		SASL:             b.auth[vcc.Name].proxySASL(),
		CertPrincipal:    b.auth[vcc.Name].certPrincipal(),
		Log:              log,
		Metrics:          km,
	}
	if s := vcc.SNI; s != nil {
		opts.SNI = &proxy.SNIRouting{BootstrapHost: s.BootstrapHost, BrokerHost: s.BrokerHost, AdvertisedPort: s.AdvertisedPort}
	}
	opts.MaxConns, opts.MaxConnsPerAddr = vcc.MaxConnections, vcc.MaxConnectionsPerAddress
	opts.ClientWriteTimeout = vcc.ClientWriteTimeout.Duration
	opts.ProxyProtocol = proxyProtocol(vcc.ProxyProtocol, vcc.ProxyProtocolFrom)
	if u := vcc.UpstreamIdentity; u != nil {
		id := &proxy.UpstreamIdentity{Principals: map[string]kafkasasl.Mechanism{}, RefuseUnmapped: u.RefusesUnmapped()}
		for name, s := range u.Principals {
			m, err := s.Build()
			if err != nil {
				g.stop(context.Background())
				return nil, fmt.Errorf("virtual cluster %s upstream_identity.principals.%s: %w", vcc.Name, name, err)
			}
			id.Principals[name] = m
		}
		opts.UpstreamIdentity = id
	}
	if vcc.TLS != nil {
		tc, err := vcc.TLS.Build()
		if err != nil {
			return nil, fmt.Errorf("virtual cluster %s tls: %w", vcc.Name, err)
		}
		opts.TLS = tc
	}
	return proxy.New(opts)
}
