// Package devregistry is a development schema registry speaking the subset of
// Confluent's Schema Registry REST API that producers, consumers and the
// gateway use: subjects and their versions, schemas by id, schema references,
// compatibility levels and checks, and soft and permanent deletes. It backs
// `strait registry` and `strait demo`, as devbroker backs `strait broker`.
//
// It is for development and tests only: it has no authentication, no modes
// but READWRITE, no contexts and no data contracts, and it checks
// compatibility for Avro only (see docs/registry.md). It keeps its state in
// memory, or with a data directory in one JSON file rewritten atomically on
// every change. The gateway must work unchanged against a real registry, so
// nothing in the gateway may import this package; it depends on nothing of
// Strait's.
package devregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Defaults applied to zero-valued Options fields.
const (
	// DefaultListen is where Confluent's registry listens by default, on
	// loopback only: the registry has no authentication.
	DefaultListen = "127.0.0.1:8081"

	// DefaultMaxBodyBytes bounds a request body. Schemas of a few
	// hundred kilobytes exist; bodies past this are refused with 413.
	DefaultMaxBodyBytes = 8 << 20
)

// Options configures New and Start. The zero value of each field means its
// default.
type Options struct {
	// Listen is the host:port Start listens on; port 0 picks a free one
	// (tests). "" means DefaultListen.
	Listen string

	// DataDir, if set, keeps the registry across restarts in
	// DataDir/registry.json, created if missing. "" keeps everything in
	// memory. Only one registry may use a directory at a time.
	DataDir string

	// MaxBodyBytes bounds request bodies. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Logger receives a line per change (registrations, deletes) and
	// persistence failures. nil discards them.
	Logger *slog.Logger
}

// New returns a registry with the state in opts.DataDir, or an empty one in
// memory. It fails if the directory cannot be created or its state file is
// damaged; it never starts with part of a state.
func New(opts Options) (*Registry, error) {
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("devregistry: max body bytes must not be negative, got %d", opts.MaxBodyBytes)
	}
	r := &Registry{st: newState(), log: opts.Logger, maxBody: opts.MaxBodyBytes}
	if r.maxBody == 0 {
		r.maxBody = DefaultMaxBodyBytes
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("devregistry: creating the data directory: %w", err)
		}
		r.file = filepath.Join(opts.DataDir, stateFile)
		st, err := readState(r.file)
		if err != nil {
			return nil, fmt.Errorf("devregistry: loading %s: %w", r.file, err)
		}
		r.st = st
	}
	return r, nil
}

// Server is a registry listening for HTTP.
type Server struct {
	reg  *Registry
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve returns

	closeOnce sync.Once
	closeErr  error
}

// Start loads the registry as New does and serves it on opts.Listen until
// Close.
func Start(opts Options) (*Server, error) {
	reg, err := New(opts)
	if err != nil {
		return nil, err
	}
	listen := opts.Listen
	if listen == "" {
		listen = DefaultListen
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("devregistry: listening on %s: %w", listen, err)
	}
	s := &Server{
		reg: reg,
		ln:  ln,
		srv: &http.Server{
			Handler:           reg,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute,
			WriteTimeout:      time.Minute,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(reg.log.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			reg.log.Error("schema registry: serving stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the registry's base URL, as clients are configured with it.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Registry is the registry the server serves.
func (s *Server) Registry() *Registry { return s.reg }

// Shutdown stops accepting connections and waits for requests in flight, or
// for ctx to end. Every change answered before it returns is persisted.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closeErr = s.srv.Shutdown(ctx)
		if s.closeErr != nil {
			s.srv.Close()
		}
		<-s.done
	})
	return s.closeErr
}

// Close shuts the server down, giving requests in flight five seconds.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}
