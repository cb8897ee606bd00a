// Package gateway is Strait's LLM gateway runtime: HTTP listeners that speak
// the OpenAI chat-completions and Anthropic messages APIs to clients, client
// authentication by gateway keys, routing by model name to providers of
// either dialect, and the relay between them.
//
// When the client's dialect is the provider's, a request takes the fast
// path: only the top-level "model" and "stream" members are read
// (jsonscan), the model is spliced in when a route renames it, and the body
// and the response (JSON or event stream) are forwarded as bytes. Across
// dialects the translate package converts requests, responses, errors and
// streams.
//
// Every request is timed stage by stage (see Stage), so that the time spent
// inside the gateway is measured rather than estimated; the overhead (total
// time minus time blocked on the provider) is sent back in a header and,
// on request, a per-stage trace.
//
// It builds on jsonscan, sse, translate and telemetry-level libraries. It
// never imports the config (the CLI turns the config into Options) or a
// mock provider.
package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/straitgw/strait/internal/h2sched"
	"github.com/straitgw/strait/internal/llm/h1server"
	"github.com/straitgw/strait/internal/llm/h2server"
	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/prefacelisten"
	"github.com/straitgw/strait/internal/writebatch"
)

// DefaultMaxBodyBytes is the largest request body accepted when
// Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 10 << 20

// DefaultBodyReadTimeout bounds reading a request body when
// Options.BodyReadTimeout is 0.
const DefaultBodyReadTimeout = 30 * time.Second

// maxResponseBytes bounds a non-streaming provider response held in memory
// (a streamed one is relayed event by event, each bounded by the sse
// reader).
const maxResponseBytes = 64 << 20

// maxErrorBytes bounds the provider error body read for mapping.
const maxErrorBytes = 1 << 20

// Options configure a Gateway.
type Options struct {
	// Providers are the upstream APIs, by unique name.
	Providers []Provider
	// Routes are tried in order; the first whose Match matches the
	// requested model wins.
	Routes []Route
	// Keys are the gateway keys clients may present. At least one is
	// required.
	Keys []Key
	// MaxBodyBytes is the largest request body accepted (413 above it);
	// 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the time a client may take to send its whole
	// request body, from the end of its headers (408 past it), so that
	// slow clients cannot hold requests open; 0 means
	// DefaultBodyReadTimeout, below 0 no limit.
	BodyReadTimeout time.Duration
	// Translate tunes cross-dialect request translation.
	Translate translate.Options
	// Log receives the access log (one Info line per request) and errors;
	// nil discards them. Every provider's API key is masked in what it
	// receives.
	Log *slog.Logger
	// Metrics records the gateway's metrics; nil records into a private
	// registry nobody reads.
	Metrics *Metrics
	// Prices are the models' prices, for budgets and the spend metric;
	// the first whose Model matches the model a provider is asked for
	// applies.
	Prices []Price
	// Limits say where the keys' counters are kept.
	Limits LimitOptions
}

// Key is a gateway key a client may present, stored as its SHA-256 hash.
type Key struct {
	// Name identifies the key in logs; it is not secret.
	Name string
	// SHA256 is the hash of the key (see HashKey).
	SHA256 [sha256.Size]byte
	// Models (globs over the model the client asks for) and Routes (route
	// names), if either is set, are what the key may use.
	Models, Routes []string
	// Limits are the key's rate limits and budget.
	Limits limits.Limits
}

// HashKey returns the SHA-256 of a gateway key, the form Key holds.
func HashKey(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// Listener describes the protocols one listener speaks.
type Listener struct {
	// HTTP1 and H2C select the cleartext protocols: HTTP/1.1, and HTTP/2
	// without TLS with prior knowledge (RFC 9113 section 3.3). Leaving both
	// false means both. With both, an HTTP/1.1 request may also upgrade
	// to h2c (RFC 7540 section 3.2).
	HTTP1, H2C bool
	// TLS, if set, makes the listener TLS with HTTP/1.1 and HTTP/2 chosen by
	// ALPN; HTTP1 and H2C are then ignored. It needs a certificate.
	TLS *tls.Config
	// StraitH2C serves h2c with Strait's own HTTP/2 server (h2server),
	// which costs less per request than x/net's, instead of x/net's: a
	// connection that opens with HTTP/2's preface goes to it, any other
	// (HTTP/1.1, its Upgrade: h2c included) to net/http. It applies to a
	// cleartext listener speaking h2c only.
	StraitH2C bool
	// StraitHTTP1 serves HTTP/1.1 with Strait's own server (h1server),
	// which costs less per request and holds less memory per request in
	// flight than net/http's; the "Upgrade: h2c" handshake still hands
	// the connection to x/net's HTTP/2 server. It applies to a cleartext
	// listener speaking http1 only; its h2c with prior knowledge stays
	// with the server StraitH2C picks.
	StraitHTTP1 bool
}

// Gateway is the LLM gateway: a handler shared by any number of listeners.
type Gateway struct {
	providers  map[string]*provider
	routes     []*route
	keys       []*keyData
	prices     []Price
	store      limits.Store
	storeName  string
	rateFail   FailMode
	budgetFail FailMode
	settler    *settler // nil: settled on the request path (memory)
	maxBody    int64
	bodyWait   time.Duration // 0: no limit
	topts      translate.Options
	// red masks the providers' keys in what clients get and in the log;
	// nil when no provider has a key.
	red    *redactor
	log    *slog.Logger
	m      *Metrics
	models modelList
	// series caches each request's metric series by what labels them: a
	// map under a read lock, which hashes the key without boxing it (a
	// sync.Map allocated the key and hashed it by reflection).
	seriesMu sync.RWMutex
	series   map[seriesKey]*series
	paths    [2]pathSeries

	// baseCtx is the parent of every request's context; cancelling it
	// (when a drain times out) aborts every request still running.
	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu       sync.Mutex
	servers  map[*http.Server]bool
	closed   bool
	draining atomic.Bool
	inflight atomic.Int64
}

// New checks opts and returns a Gateway. It opens no connection: providers
// are dialled on first use.
func New(opts Options) (*Gateway, error) {
	if len(opts.Keys) == 0 {
		return nil, errors.New("llm gateway: no gateway keys: every request would be refused; give at least one Key")
	}
	g := &Gateway{
		providers:  map[string]*provider{},
		prices:     opts.Prices,
		store:      opts.Limits.Store,
		storeName:  "memory",
		rateFail:   cmp.Or(opts.Limits.RateLimits, FailOpen),
		budgetFail: cmp.Or(opts.Limits.Budgets, FailClosed),
		maxBody:    opts.MaxBodyBytes,
		bodyWait:   opts.BodyReadTimeout,
		topts:      opts.Translate,
		log:        opts.Log,
		m:          opts.Metrics,
		servers:    map[*http.Server]bool{},
	}
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	switch {
	case g.bodyWait == 0:
		g.bodyWait = DefaultBodyReadTimeout
	case g.bodyWait < 0:
		g.bodyWait = 0
	}
	var secrets []string
	for _, p := range opts.Providers {
		secrets = append(secrets, p.APIKey)
	}
	for _, r := range opts.Routes {
		for _, t := range r.Targets {
			if t.APIKey != "" {
				secrets = append(secrets, t.APIKey)
			}
		}
	}
	g.red = newRedactor(secrets)
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	} else if g.red != nil {
		g.log = slog.New(&redactHandler{next: g.log.Handler(), r: g.red})
	}
	if g.m == nil {
		g.m = NewMetrics(nil)
	}
	if g.store == nil {
		g.store = limits.NewMemory()
	} else if _, ok := g.store.(*limits.Memory); !ok {
		g.storeName = "redis"
	}
	if bs, ok := g.store.(batchSettler); ok {
		g.startSettler(bs)
	}
	var errs []error
	if err := g.initKeys(opts.Keys); err != nil {
		errs = append(errs, err)
	}
	for i := range opts.Providers {
		p, err := newProvider(opts.Providers[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := g.providers[p.Name]; dup {
			errs = append(errs, fmt.Errorf("provider %q is defined twice", p.Name))
			continue
		}
		g.providers[p.Name] = p
	}
	for i, r := range opts.Routes {
		rt, err := newRoute(g, i, r, g.providers)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.routes = append(g.routes, rt)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("llm gateway: %w", err)
	}
	g.models = newModelList(g.routes, time.Now())
	g.initSeries()
	g.baseCtx, g.cancelBase = context.WithCancel(context.Background())
	return g, nil
}

// Handler returns the gateway's HTTP handler, for serving it from a server
// of the caller's (httptest, say). Serve serves the same handler.
func (g *Gateway) Handler() http.Handler { return g }

// maxConcurrentStreams bounds the requests one HTTP/2 connection may have
// in flight.
const maxConcurrentStreams = 10000

// Serve accepts connections on ln until Shutdown, speaking the protocols l
// selects. It returns nil after Shutdown, or the error that stopped it.
func (g *Gateway) Serve(ln net.Listener, l Listener) error {
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return g.baseCtx },
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		Protocols:         new(http.Protocols),
	}
	var upgrade http.Handler // the h2c upgrade's handler, when h2c is spoken with HTTP/1.1
	// HTTP/2 is served by x/net's server with a write scheduler whose cost
	// per frame does not grow with the streams open on the connection
	// (h2sched): net/http's walks every open stream for every frame, and
	// a gateway's streams mostly wait on providers with nothing to send.
	h2s := &http2.Server{MaxConcurrentStreams: maxConcurrentStreams, NewWriteScheduler: h2sched.New}
	if l.TLS != nil {
		srv.TLSConfig = l.TLS.Clone()
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
	} else {
		h1, h2 := l.HTTP1, l.H2C
		if !h1 && !h2 {
			h1, h2 = true, true
		}
		srv.Protocols.SetHTTP1(h1)
		srv.Protocols.SetUnencryptedHTTP2(h2)
		if h1 && h2 {
			// HTTP/2 with prior knowledge reaches h2s through net/http;
			// the HTTP/1.1 "Upgrade: h2c" handshake (RFC 7540 section
			// 3.2, which clients such as curl --http2 still use) needs
			// x/net's h2c handler.
			upgrade = h2c.NewHandler(g, h2s)
			srv.Handler = upgrade
		}
	}
	// Many slow requests share a few HTTP/2 connections when clients
	// multiplex: the default of 250 streams per connection would queue
	// them in the client.
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: maxConcurrentStreams}
	if srv.Protocols.HTTP2() || srv.Protocols.UnencryptedHTTP2() {
		if err := http2.ConfigureServer(srv, h2s); err != nil {
			ln.Close()
			return fmt.Errorf("llm gateway: HTTP/2: %w", err)
		}
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		ln.Close()
		return errors.New("llm gateway: Serve called after Shutdown")
	}
	g.servers[srv] = true
	g.mu.Unlock()

	var err error
	ln = writebatch.Listener{Listener: ln, TLS: l.TLS != nil}
	straitH2C := l.StraitH2C && l.TLS == nil && srv.Protocols.UnencryptedHTTP2()
	if straitH2C {
		lean := g.leanServer(srv)
		ln = lean.Listen(ln)
		defer func() {
			if err != nil {
				lean.Close() // the listener failed: nothing drains it
			}
		}()
	}
	if l.StraitHTTP1 && l.TLS == nil && srv.Protocols.HTTP1() {
		h1 := g.leanH1Server(srv, upgrade)
		var pass func(net.Conn) bool
		if srv.Protocols.UnencryptedHTTP2() && !straitH2C {
			// HTTP/2 with prior knowledge stays with net/http: sort the
			// connections by their first bytes and let those through.
			ln = prefacelisten.New(ln, srv.ReadHeaderTimeout, func(net.Conn) bool { return false })
			pass = prefacelisten.OpensWithPreface
		}
		ln = h1.Listen(ln, pass)
		defer func() {
			if err != nil {
				h1.Close()
			}
		}()
	}
	if l.TLS != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
		return nil
	}
	g.mu.Lock()
	delete(g.servers, srv)
	g.mu.Unlock()
	return err
}

// leanCloseGrace is how long Strait's HTTP/2 server waits, once the
// gateway's drain is over and its requests are aborted, for their
// handlers to send their errors before its connections are closed.
const leanCloseGrace = time.Second

// leanServer returns Strait's HTTP/2 server for srv's h2c connections,
// with srv's limits, stopped with it: srv's Shutdown sends each of its
// connections GOAWAY, they close as their streams end, and the rest are
// closed leanCloseGrace after Shutdown aborts the requests in flight.
func (g *Gateway) leanServer(srv *http.Server) *h2server.Server {
	lean := &h2server.Server{
		Handler:              g,
		MaxConcurrentStreams: maxConcurrentStreams,
		MaxHeaderBytes:       srv.MaxHeaderBytes,
		IdleTimeout:          srv.IdleTimeout,
		ReadHeaderTimeout:    srv.ReadHeaderTimeout,
		BaseContext:          g.baseCtx,
		Log:                  g.log,
	}
	g.stopWith(srv, lean.Shutdown)
	return lean
}

// leanH1Server returns Strait's HTTP/1.1 server for srv's HTTP/1.1
// connections, with srv's limits; upgrade, if set, takes the requests
// asking to upgrade (to h2c). It is stopped with srv as leanServer's is:
// srv's Shutdown closes its idle connections and the rest after their
// answers, and those still open leanCloseGrace after Shutdown aborts the
// requests in flight are closed.
func (g *Gateway) leanH1Server(srv *http.Server, upgrade http.Handler) *h1server.Server {
	lean := &h1server.Server{
		Handler:           g,
		Upgrade:           upgrade,
		MaxHeaderBytes:    srv.MaxHeaderBytes,
		IdleTimeout:       srv.IdleTimeout,
		ReadHeaderTimeout: srv.ReadHeaderTimeout,
		// The h2c upgrade serves the connection it takes over with srv's
		// settings, which it finds in the request's context.
		BaseContext: context.WithValue(g.baseCtx, http.ServerContextKey, srv),
		Log:         g.log,
	}
	g.stopWith(srv, lean.Shutdown)
	return lean
}

// stopWith has srv's Shutdown stop one of Strait's own servers too:
// shutdown drains it, and is cut short leanCloseGrace after the gateway's
// Shutdown aborts the requests in flight.
func (g *Gateway) stopWith(srv *http.Server, shutdown func(context.Context) error) {
	srv.RegisterOnShutdown(func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := context.AfterFunc(g.baseCtx, func() { time.AfterFunc(leanCloseGrace, cancel) })
		defer stop()
		_ = shutdown(ctx)
	})
}

// Ready reports nil while the gateway serves on at least one listener and is
// not draining, or why not.
func (g *Gateway) Ready() error {
	if g.draining.Load() {
		return errors.New("the LLM gateway is draining")
	}
	g.mu.Lock()
	n := len(g.servers)
	g.mu.Unlock()
	if n == 0 {
		return errors.New("the LLM gateway has no listener serving")
	}
	return nil
}

// InFlight returns how many requests are being handled now.
func (g *Gateway) InFlight() int { return int(g.inflight.Load()) }

// Shutdown stops accepting connections, lets requests in flight (streams
// included) finish until ctx is done, then aborts the rest: their provider
// requests are cancelled and streaming clients get the dialect's error
// event. It returns an error naming how many requests were aborted.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.draining.Store(true)
	g.mu.Lock()
	g.closed = true
	servers := make([]*http.Server, 0, len(g.servers))
	for s := range g.servers {
		servers = append(servers, s)
	}
	g.mu.Unlock()

	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.Shutdown(ctx) })
	}
	wg.Wait()
	// Then wait for every handler still running, whatever its protocol.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for g.inflight.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	var err error
	if n := g.inflight.Load(); n > 0 {
		err = fmt.Errorf("llm gateway: drain timed out with %d requests in flight; they were aborted", n)
	}
	// Cancelling the base context aborts the provider requests still
	// running; their handlers then send the client the dialect's error (or
	// error event) and return. Give them a moment before closing the
	// connections under them.
	g.cancelBase()
	for i := 0; i < 200 && g.inflight.Load() > 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	for _, s := range servers {
		s.Close()
	}
	for _, p := range g.providers {
		p.closeIdle()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	g.stopSettler(sctx)
	cancel()
	g.store.Close()
	return err
}
