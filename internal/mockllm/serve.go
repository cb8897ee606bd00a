package mockllm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitgw/strait/internal/h2sched"
	"github.com/straitgw/strait/internal/llm/h1server"
	"github.com/straitgw/strait/internal/prefacelisten"
	"github.com/straitgw/strait/internal/writebatch"
)

// ErrClosed is returned by Serve, ServeTLS, Start and StartTLS after Close
// or Shutdown.
var ErrClosed = errors.New("mockllm: server closed")

// Serve serves HTTP/1.1 and cleartext HTTP/2 on l, both with prior
// knowledge and by "Upgrade: h2c", until Close or Shutdown; it then returns
// nil. (The upgrade works wherever the server is the handler, under
// httptest too.)
func (s *Server) Serve(l net.Listener) error {
	hs, err := s.newHTTPServer(nil)
	if err != nil {
		l.Close()
		return err
	}
	return serveErr(hs.Serve(s.cleartext(hs, l)))
}

// ServeTLS serves HTTP/1.1 and HTTP/2 (by ALPN) over TLS on l until Close
// or Shutdown; it then returns nil. cfg must hold the certificate.
func (s *Server) ServeTLS(l net.Listener, cfg *tls.Config) error {
	hs, err := s.newHTTPServer(cfg)
	if err != nil {
		l.Close()
		return err
	}
	return serveErr(hs.ServeTLS(writebatch.Listener{Listener: l, TLS: true}, "", ""))
}

// Start listens on addr (such as "127.0.0.1:0") and serves HTTP/1.1 and
// cleartext HTTP/2 in the background until Close. It returns the base URL,
// "http://host:port", to which clients append /v1/....
func (s *Server) Start(addr string) (string, error) {
	return s.listenAndServe(addr, nil)
}

// StartTLS is Start over TLS; it returns "https://host:port".
func (s *Server) StartTLS(addr string, cfg *tls.Config) (string, error) {
	return s.listenAndServe(addr, cfg)
}

func (s *Server) listenAndServe(addr string, cfg *tls.Config) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	hs, err := s.newHTTPServer(cfg)
	if err != nil {
		l.Close()
		return "", err
	}
	scheme := "http://"
	var sorted net.Listener
	if cfg == nil {
		sorted = s.cleartext(hs, l) // now, so that the engine runs once Start returns
	}
	go func() {
		var err error
		if cfg != nil {
			err = hs.ServeTLS(writebatch.Listener{Listener: l, TLS: true}, "", "")
		} else {
			err = hs.Serve(sorted)
		}
		if err = serveErr(err); err != nil {
			s.log.Error("mock provider stopped serving", "addr", l.Addr().String(), "err", err)
		}
	}()
	if cfg != nil {
		scheme = "https://"
	}
	return scheme + l.Addr().String(), nil
}

func serveErr(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// newHTTPServer returns an http.Server for s, registered so that Close
// reaches it: cleartext with h2c when cfg is nil, TLS with h2 otherwise.
func (s *Server) newHTTPServer(cfg *tls.Config) (*http.Server, error) {
	streams := s.opt.MaxConcurrentStreams
	p := new(http.Protocols)
	p.SetHTTP1(true)
	hs := &http.Server{
		Handler:           s,
		Protocols:         p,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: streams},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if cfg != nil {
		p.SetHTTP2(true)
		hs.TLSConfig = cfg.Clone()
	} else {
		// Prior knowledge; ServeHTTP takes "Upgrade: h2c" (upgrade.go).
		p.SetUnencryptedHTTP2(true)
	}
	if err := configureHTTP2(hs); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.servers = append(s.servers, hs)
	return hs, nil
}

// configureHTTP2 serves hs's HTTP/2 with x/net's server and a write
// scheduler whose cost per frame does not grow with the streams open on a
// connection: with net/http's, each frame walks every open stream, and a
// mock holding thousands of answers back for --latency spends much of its
// CPU there.
func configureHTTP2(hs *http.Server) error {
	h2s := &http2.Server{MaxConcurrentStreams: uint32(hs.HTTP2.MaxConcurrentStreams), NewWriteScheduler: h2sched.New}
	if err := http2.ConfigureServer(hs, h2s); err != nil {
		return fmt.Errorf("mock llm: HTTP/2: %w", err)
	}
	return nil
}

// sorting returns l with the connections that open with the HTTP/2
// preface taken out for the lean engine (lean.go), or l itself where the
// engine cannot run.
func (s *Server) sorting(l net.Listener) net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noLean || s.closed {
		return l
	}
	if s.lean == nil {
		e, err := newEngine(s)
		if err != nil {
			s.log.Debug("serving prior-knowledge h2c with net/http: the lean engine cannot run here", "err", err)
			s.noLean = true
			return l
		}
		s.lean = e
	}
	return newLeanListener(l, s.lean)
}

// cleartext returns what hs serves of cleartext listener l: with the lean
// engine taking the prior-knowledge h2c connections, the HTTP/1.1 ones go
// to Strait's HTTP/1.1 server (h1server), which costs a request less CPU
// than net/http's (it reads each request and runs the handler on one
// goroutine), and hs gets none; without the engine hs serves both.
func (s *Server) cleartext(hs *http.Server, l net.Listener) net.Listener {
	sorted := s.sorting(l)
	if sorted == l {
		return writebatch.Listener{Listener: l} // no lean engine
	}
	h1 := &h1server.Server{
		Handler:           hs.Handler,
		ReadHeaderTimeout: hs.ReadHeaderTimeout,
		IdleTimeout:       hs.IdleTimeout,
		BaseContext:       context.WithValue(context.Background(), http.ServerContextKey, hs),
		Log:               s.log,
	}
	s.mu.Lock()
	s.h1s = append(s.h1s, h1)
	s.mu.Unlock()
	// A connection the engine could not take (not a socket) reaches hs
	// with its preface.
	return writebatch.Listener{Listener: h1.Listen(sorted, prefacelisten.OpensWithPreface)}
}

// Close stops every listener the server serves on and drops every
// connection, answers in flight included.
func (s *Server) Close() error {
	servers, h1s, lean := s.shut()
	var errs []error
	for _, hs := range servers {
		errs = append(errs, hs.Close())
	}
	for _, h1 := range h1s {
		errs = append(errs, h1.Close())
	}
	if lean != nil {
		lean.close()
	}
	return errors.Join(errs...)
}

// Shutdown stops every listener and waits until the answers in flight are
// complete, or ctx ends. Requests held by the timeout error kind are
// dropped at once.
func (s *Server) Shutdown(ctx context.Context) error {
	servers, h1s, lean := s.shut()
	if lean != nil {
		lean.drain()
	}
	var errs []error
	for _, hs := range servers {
		errs = append(errs, hs.Shutdown(ctx))
	}
	for _, h1 := range h1s {
		errs = append(errs, h1.Shutdown(ctx))
	}
	if lean != nil {
		errs = append(errs, lean.wait(ctx))
		lean.close()
	}
	return errors.Join(errs...)
}

func (s *Server) shut() ([]*http.Server, []*h1server.Server, *engine) {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	servers, h1s, lean := s.servers, s.h1s, s.lean
	s.servers, s.h1s, s.lean = nil, nil, nil
	return servers, h1s, lean
}
