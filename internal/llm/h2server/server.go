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
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

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
	s.mu.Lock()
	s.init()
	s.shutdown = true
	ls := s.listenersLocked()
	cs := s.connsLocked()
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
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

// Close closes every listener and connection at once; the requests in
// flight see their contexts cancelled.
func (s *Server) Close() error {
	s.mu.Lock()
	s.init()
	s.shutdown = true
	ls := s.listenersLocked()
	cs := s.connsLocked()
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
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
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Listener sorts the connections of a cleartext listener: those that open
// with the HTTP/2 preface are served by the Server, every other one
// (HTTP/1.1, including its Upgrade: h2c) is returned by Accept with the
// bytes read to tell them apart handed back first, for net/http. Each new
// connection is read on a goroutine of its own until it is sorted, so a
// slow client delays no other.
type Listener struct {
	net.Listener
	s     *Server
	ready chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error         // the Accept error, once ended is closed
	ended chan struct{} // closed when the accept loop returns

	mu       sync.Mutex
	sniffing map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// Listen returns a Listener sorting ln's connections. Closing it (or the
// Server's Shutdown or Close) closes ln.
func (s *Server) Listen(ln net.Listener) *Listener {
	l := &Listener{Listener: ln, s: s, ready: make(chan net.Conn), done: make(chan struct{}),
		ended: make(chan struct{}), sniffing: map[net.Conn]struct{}{}}
	s.mu.Lock()
	s.init()
	closed := s.shutdown
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	l.wg.Add(1)
	go l.acceptLoop()
	if closed {
		l.Close()
	}
	return l
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	defer close(l.ended)
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.err = err
			return
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			c.Close()
			continue
		default:
		}
		l.sniffing[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.sniff(c)
	}
}

// sniff reads the connection's first bytes, no further than the preface,
// and sends the connection where they say it belongs.
func (l *Listener) sniff(c net.Conn) {
	defer l.wg.Done()
	_ = c.SetReadDeadline(time.Now().Add(orDefault(l.s.ReadHeaderTimeout, DefaultReadHeaderTimeout)))
	var head [len(Preface)]byte
	n := 0
	var err error
	for n < len(head) {
		var k int
		k, err = c.Read(head[n:])
		n += k
		if string(head[:n]) != Preface[:n] || err != nil {
			break
		}
	}
	l.mu.Lock()
	delete(l.sniffing, c)
	l.mu.Unlock()
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case n == len(head) && string(head[:]) == Preface:
		_ = l.s.ServeConn(c, true)
		return
	case n == 0, err != nil && string(head[:n]) == Preface[:n]:
		c.Close() // closed, silent or stalled inside the preface
		return
	}
	rc := &replayConn{Conn: c, head: append([]byte(nil), head[:n]...)}
	select {
	case l.ready <- rc:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection that is not HTTP/2 with prior
// knowledge.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ended:
		return nil, l.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and drops the connections not yet sorted. The
// connections being served are the Server's to end.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.sniffing {
			c.Close()
		}
		l.mu.Unlock()
		err = l.Listener.Close()
		l.s.mu.Lock()
		delete(l.s.listeners, l)
		l.s.mu.Unlock()
	})
	return err
}

// replayConn is a connection whose first bytes, already read, are read
// again.
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http half-close the connection, as it does with a
// plain TCP connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

var _ io.Reader = (*replayConn)(nil)
