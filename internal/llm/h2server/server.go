// Package h2server serves HTTP/2 with prior knowledge (h2c, RFC 9113
// section 3.3) to an http.Handler, for the LLM gateway's client-facing
// listeners.
//
// x/net's server hands each request between goroutines about a dozen
// times (its reader waits for its serve loop after every frame, every
// response's HEADERS is written by a goroutine started for it, every
// handler write is a round trip to the serve loop) and keeps a 4 KiB
// write buffer per stream while the handler runs. Here one reader
// goroutine per connection parses frames and keeps the connection's
// state; each stream's handler runs on a goroutine of its own, started
// directly, and writes its HEADERS and DATA frames itself, under the
// connection's write lock, into a writebatch.Conn that sends what many
// streams wrote in one write(2). A stream holds no write buffer.
//
// The listener faces untrusted clients: header blocks, streams, resets,
// control frames and flow control are all bounded, and any frame the
// protocol forbids ends its stream or its connection, never the process.
package h2server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/prefacelisten"
	"github.com/straitgw/strait/internal/writebatch"
)

// Defaults for the Server's zero fields.
const (
	DefaultMaxConcurrentStreams = 250
	DefaultMaxHeaderBytes       = 64 << 10
	DefaultIdleTimeout          = 5 * time.Minute
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
)

// Server serves HTTP/2 connections to Handler. Its fields must not change
// once it serves.
type Server struct {
	// Handler answers every request.
	Handler http.Handler
	// MaxConcurrentStreams bounds the streams a connection may have open
	// (a stream reset by the client counts until its handler returns);
	// more are refused with REFUSED_STREAM.
	MaxConcurrentStreams uint32
	// MaxHeaderBytes bounds a request's decoded header list (RFC 7541
	// sizes: name, value and 32 bytes per field); a larger one is
	// answered 431.
	MaxHeaderBytes int
	// IdleTimeout closes a connection that has had no stream open for
	// this long.
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds the time a new connection may take to send
	// its preface and first SETTINGS.
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds each write to the socket, and the time a
	// handler's write may wait for the client to open its flow-control
	// window: a client that stops reading cannot hold goroutines.
	WriteTimeout time.Duration
	// BaseContext, if set, is the parent of every request's context.
	BaseContext context.Context
	// Log receives the connections' errors and handlers' panics, at
	// Debug and Error; nil discards them.
	Log *slog.Logger

	// limits of the flood defences; tests set their window long, so that
	// what they count does not depend on how fast the machine is.
	floodWindow time.Duration

	mu        sync.Mutex
	conns     map[*conn]struct{}
	listeners map[*Listener]struct{}
	shutdown  bool
	idle      sync.Cond // signalled when a connection ends
}

func (s *Server) init() {
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
		s.listeners = map[*Listener]struct{}{}
		s.idle.L = &s.mu
	}
}

func (s *Server) maxStreams() int {
	if s.MaxConcurrentStreams == 0 {
		return DefaultMaxConcurrentStreams
	}
	return int(s.MaxConcurrentStreams)
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

// ErrServerClosed is what ServeConn returns for a connection that arrives
// after Shutdown or Close.
var ErrServerClosed = errors.New("h2server: server closed")

// ServeConn serves one connection until it ends. If prefaceRead, the
// client's 24-byte preface has been read from it already. Writes to nc
// are batched (writebatch) unless it is batched already.
func (s *Server) ServeConn(nc net.Conn, prefaceRead bool) error {
	if _, ok := nc.(*writebatch.Conn); !ok {
		nc = writebatch.New(nc)
	}
	c := newConn(s, nc)
	s.mu.Lock()
	s.init()
	if s.shutdown {
		s.mu.Unlock()
		nc.Close()
		return ErrServerClosed
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.idle.Broadcast()
		s.mu.Unlock()
	}()
	return c.serve(prefaceRead)
}

// Shutdown stops taking connections and streams: every connection is
// sent GOAWAY with the last stream it took, and closes once those streams
// are answered. It returns when all have closed, or closes the rest when
// ctx is done and returns its error.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, c := range s.stopListening() {
		c.drain()
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
	return nil
}

// stopListening marks the server shut down, closes its listeners and
// returns its connections.
func (s *Server) stopListening() []*conn {
	s.mu.Lock()
	s.init()
	s.shutdown = true
	ls := s.listenersLocked()
	cs := s.connsLocked()
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	return cs
}

// Close closes every listener and connection at once; the requests in
// flight see their contexts cancelled.
func (s *Server) Close() error {
	for _, c := range s.stopListening() {
		c.close(errors.New("server closed"))
	}
	return nil
}

func (s *Server) listenersLocked() []*Listener {
	ls := make([]*Listener, 0, len(s.listeners))
	for l := range s.listeners {
		ls = append(ls, l)
	}
	return ls
}

func (s *Server) connsLocked() []*conn {
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

// Preface is how an HTTP/2 client with prior knowledge begins.
const Preface = prefacelisten.Preface

// Listener sorts the connections of a cleartext listener: those that open
// with the HTTP/2 preface are served by the Server, every other one
// (HTTP/1.1, including its Upgrade: h2c) is returned by Accept with the
// bytes read to tell them apart handed back first, for net/http
// (prefacelisten).
type Listener struct {
	*prefacelisten.Listener
	s *Server
}

// Listen returns a Listener sorting ln's connections. Closing it (or the
// Server's Shutdown or Close) closes ln.
func (s *Server) Listen(ln net.Listener) *Listener {
	l := &Listener{s: s}
	l.Listener = prefacelisten.New(ln, orDefault(s.ReadHeaderTimeout, DefaultReadHeaderTimeout), func(c net.Conn) bool {
		go s.ServeConn(c, true)
		return true
	})
	s.mu.Lock()
	s.init()
	closed := s.shutdown
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	if closed {
		l.Close()
	}
	return l
}

// Close stops accepting and drops the connections not yet sorted. The
// connections being served are the Server's to end.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.s.mu.Lock()
	delete(l.s.listeners, l)
	l.s.mu.Unlock()
	return err
}
