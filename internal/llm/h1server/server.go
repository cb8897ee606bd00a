// Package h1server serves HTTP/1.1 to an http.Handler, for the LLM
// gateway's cleartext listeners.
//
// net/http's server, serving one request on a connection, hands it between
// goroutines four times: its connection goroutine reads the request, starts
// a second goroutine that reads on to see the client leave, runs the
// handler, then stops the second goroutine (waking it with a past deadline)
// and waits until it has stopped. Each hand-off is a scheduler wake-up and
// often a futex call, and the second goroutine's stack is memory held per
// request. Here the connection's goroutine reads the request and runs the
// handler, and the client's leaving is seen by the kernel: every
// connection's socket is registered once, for its peer's hang-up only, with
// an epoll instance of the Server's own, watched by one goroutine for all
// connections (watch_linux.go). A request that ends normally costs that
// goroutine nothing. The answer leaves in one write when the handler gives
// its length (a JSON answer's head and body together), and in one write per
// Flush otherwise.
//
// Requests are parsed by net/http's own ReadRequest, the parser Go's server
// uses, so the framing (Content-Length, chunked, their conflicts) is read
// exactly as net/http reads it; the checks net/http's server adds on top
// (Host, header names and values, Expect, the header size limit) are made
// here the same way.
//
// Not served: protocol upgrades (an "Upgrade: h2c" request is answered over
// HTTP/1.1, which RFC 9113 allows), hijacking, trailers, and TLS (the
// gateway's TLS listeners stay with net/http).
package h1server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the Server's zero fields.
const (
	DefaultMaxHeaderBytes    = http.DefaultMaxHeaderBytes
	DefaultIdleTimeout       = 5 * time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
)

// Server serves HTTP/1.1 connections to Handler. Its fields must not
// change once it serves.
type Server struct {
	// Handler answers every request but those Upgrade takes.
	Handler http.Handler
	// Upgrade, if set, answers the requests that carry an Upgrade header
	// (x/net's h2c handler, say, which takes the connection over for
	// HTTP/2 and passes anything else on). Kept apart from Handler so
	// that the requests that do not ask for one run a frame shallower:
	// a request goroutine that stays within the stack it started with
	// holds half the memory while it waits.
	Upgrade http.Handler
	// MaxHeaderBytes bounds a request's line and header (with 4 KiB of
	// slack, as net/http allows); a larger one is answered 431.
	MaxHeaderBytes int
	// IdleTimeout closes a connection that waits this long for its next
	// request.
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds the time a request's line and header may
	// take to arrive, from its first byte (and a new connection's wait
	// for its first request).
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds each write to the socket: a client that stops
	// reading cannot hold a connection for longer.
	WriteTimeout time.Duration
	// BaseContext, if set, is the parent of every request's context.
	BaseContext context.Context
	// Log receives the connections' errors and handlers' panics, at
	// Debug and Error; nil discards them.
	Log *slog.Logger

	mu    sync.Mutex
	conns map[uint64]*conn
	// shutdown is set under mu; it is read without it on every request
	// (shuttingDown), so that requests on many connections do not take
	// the server's lock in turn.
	shutdown atomic.Bool
	idle     sync.Cond // signalled when a connection ends
	nextID   uint64
	watch    *watcher // nil until a connection needs it, or if none can be made
	watchErr error
}

func (s *Server) init() {
	if s.conns == nil {
		s.conns = map[uint64]*conn{}
		s.idle.L = &s.mu
	}
}

func (s *Server) maxHeaderBytes() int {
	if s.MaxHeaderBytes <= 0 {
		return DefaultMaxHeaderBytes
	}
	return s.MaxHeaderBytes
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *Server) baseContext() context.Context {
	if s.BaseContext != nil {
		return s.BaseContext
	}
	return context.Background()
}

// ErrServerClosed is what ServeConn returns for a connection that arrives
// after Shutdown or Close.
var ErrServerClosed = errors.New("h1server: server closed")

// ServeConn serves one connection until it ends, and closes it.
func (s *Server) ServeConn(nc net.Conn) error {
	c := newConn(s, nc)
	s.mu.Lock()
	s.init()
	if s.shutdown.Load() {
		s.mu.Unlock()
		nc.Close()
		return ErrServerClosed
	}
	s.nextID++
	c.id = s.nextID
	s.conns[c.id] = c
	w := s.watcherLocked(c)
	s.mu.Unlock()
	if w != nil {
		c.watched = w.add(c)
	}
	defer func() {
		if c.watched {
			w.remove(c)
		}
		s.mu.Lock()
		delete(s.conns, c.id)
		s.idle.Broadcast()
		last := s.shutdown.Load() && len(s.conns) == 0
		s.mu.Unlock()
		if last {
			// Shutdown or Close left this connection running: the
			// watcher ends with it.
			s.stopWatcher()
		}
	}()
	return c.serve()
}

// watcherLocked returns the hang-up watcher, started on first use, or nil
// if c has no socket to watch or no watcher can run here (then a request
// learns of its client's leaving only when writing to it).
func (s *Server) watcherLocked(c *conn) *watcher {
	if c.rc == nil || s.watchErr != nil {
		return nil
	}
	if s.watch == nil {
		s.watch, s.watchErr = newWatcher(s)
		if s.watchErr != nil {
			s.log().Warn("HTTP/1.1: cannot watch for clients leaving; a request whose client left runs on until it writes", "err", s.watchErr)
			return nil
		}
	}
	return s.watch
}

// byID finds a connection the watcher reports; nil if it has ended.
func (s *Server) byID(id uint64) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// Shutdown stops taking connections and requests: connections waiting for
// a request close now, the others once their answer is sent (it says
// "Connection: close" when it still can). It returns when all have
// closed, or closes the rest when ctx is done and returns its error.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, c := range s.stop() {
		c.closeIfIdle()
	}
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	for len(s.conns) > 0 && ctx.Err() == nil {
		s.idle.Wait()
	}
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		s.Close()
		return err
	}
	s.stopWatcher()
	return nil
}

// Close closes every connection at once; the requests in flight see their
// contexts cancelled.
func (s *Server) Close() error {
	for _, c := range s.stop() {
		c.abort(errors.New("h1server: server closed"))
	}
	s.stopWatcher()
	return nil
}

// stop marks the server shut down and returns its connections.
func (s *Server) stop() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.shutdown.Store(true)
	cs := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

func (s *Server) shuttingDown() bool { return s.shutdown.Load() }

// stopWatcher ends the watcher once no connection is left to watch.
func (s *Server) stopWatcher() {
	s.mu.Lock()
	w := s.watch
	if len(s.conns) > 0 {
		w = nil
	}
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
}

// Listen returns a listener whose Accept serves every connection of ln
// itself and returns only the connections pass picks (and ln's errors),
// for another server on the same port; pass may be nil.
func (s *Server) Listen(ln net.Listener, pass func(net.Conn) bool) net.Listener {
	return &listener{Listener: ln, s: s, pass: pass}
}

type listener struct {
	net.Listener
	s    *Server
	pass func(net.Conn) bool
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.pass != nil && l.pass(c) {
			return c, nil
		}
		go l.s.ServeConn(c)
	}
}
