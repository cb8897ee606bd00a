// Package admin serves Strait's admin endpoints: /metrics (Prometheus),
// /healthz (the process is up), /readyz (every listener accepts) and
// /debug/pprof.
// It imports only telemetry-level libraries, never the gateways: readiness
// is a function handed in by the CLI.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the admin HTTP server.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

// Ready reports nil when the gateway can take traffic, or why not.
type Ready func() error

// Endpoint is one more endpoint to serve, such as the LLM gateway's GET
// /llm/keys.
type Endpoint struct {
	Pattern string // a ServeMux pattern, e.g. "GET /llm/keys"
	Handler http.Handler
}

// Listen binds addr and serves the admin endpoints, and extra.
func Listen(addr string, reg *prometheus.Registry, ready Ready, log *slog.Logger, extra ...Endpoint) (*Server, error) {
	mux := http.NewServeMux()
	for _, e := range extra {
		mux.Handle(e.Pattern, e.Handler)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// Profiles, for diagnosing the gateway in place; the admin listener
	// belongs on a private address.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	s := &Server{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:  ln,
		log: log,
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", "err", err)
		}
	}()
	log.Info("admin listening", "addr", ln.Addr().String(), "endpoints", "/metrics /healthz /readyz")
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops the server.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
