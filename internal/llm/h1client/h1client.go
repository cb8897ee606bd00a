// Package h1client is an HTTP/1.1 client for one origin, over plain TCP or
// TLS, made for a gateway's provider hop.
//
// net/http's Transport runs two goroutines for each connection, a reader
// and a writer, and hands every request and its answer between them and
// the caller through channels: three or four wake-ups of sleeping
// goroutines per request, each a futex call and a pass through the
// scheduler. At 1,000 requests/s over HTTP/1.1 that machinery was 40% of
// the LLM gateway's CPU. Here a connection has no goroutine of its own:
// the caller writes its request in one write and reads the answer on its
// own goroutine, which the runtime's poller wakes when the answer comes.
// An idle connection is a socket in a pool (its read buffer goes back to
// a shared one), and cancellation is a context.AfterFunc that ends the
// connection's pending read, costing nothing until the context ends.
//
// The answer is parsed by net/http's ReadResponse (status line, headers,
// Content-Length, chunked and close-delimited bodies), with a bound on
// the size of its headers.
package h1client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults for Options left at zero.
const (
	DefaultMaxConns        = 256
	DefaultIdleConnTimeout = 90 * time.Second
	DefaultConnectTimeout  = 5 * time.Second
	// DefaultMaxHeaderBytes bounds a response's status line and headers.
	DefaultMaxHeaderBytes = 1 << 20
)

// Options configure a Transport.
type Options struct {
	// Addr is the host:port dialed.
	Addr string
	// TLS, if set, makes connections TLS with ALPN "http/1.1"; nil is
	// plain TCP.
	TLS *tls.Config
	// Dial opens a connection; nil uses a net.Dialer. Its errors are
	// returned as they are (a *net.OpError with Op "dial" for a
	// net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxConns bounds the open connections, so the requests in progress:
	// a request beyond it waits for a connection to be free. 0 means
	// DefaultMaxConns.
	MaxConns int
	// ConnectTimeout bounds a dial and a TLS handshake; 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// IdleConnTimeout closes a connection unused for that long; 0 means
	// DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// MaxHeaderBytes bounds a response's status line and headers; 0
	// means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
}

// Transport is an http.RoundTripper for HTTP/1.1 to one origin.
type Transport struct {
	opt Options

	mu sync.Mutex
	// idle holds the connections free for a request, the most recently
	// used last: a request takes the last (warm, and least likely to
	// have been closed by the server), the sweep closes from the front.
	idle []*conn
	// open counts the connections open or being dialed, against
	// MaxConns.
	open int
	// waiters are requests waiting for a connection, in order. Each is
	// given a free connection, or nil: a slot in open to dial one with.
	waiters []chan *conn
	// sweep closes connections idle for IdleConnTimeout; armed while
	// idle is not empty.
	sweep *time.Timer
}

// New returns a Transport for o.
func New(o Options) *Transport {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	if o.TLS != nil {
		o.TLS = o.TLS.Clone()
		o.TLS.NextProtos = []string{"http/1.1"}
		if o.TLS.ServerName == "" {
			host, _, err := net.SplitHostPort(o.Addr)
			if err != nil {
				host = o.Addr
			}
			o.TLS.ServerName = host
		}
	}
	return &Transport{opt: o}
}

// RoundTrip sends req on a free connection and returns the response once
// its headers have come. The whole request is written at once, so its
// body is read (and closed) first. A request whose write failed on a
// reused connection, which the server had closed, goes once more on a new
// one; a request the server may have received is never sent twice.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	msg, err := appendRequest(getBuf(), req)
	if req.Body != nil {
		req.Body.Close()
	}
	if err != nil {
		putBuf(msg)
		return nil, err
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(ctx)
		if err != nil {
			putBuf(msg)
			return nil, err
		}
		stop, err := c.send(ctx, *msg)
		var we *writeError
		if err != nil && reused && attempt == 0 && errors.As(err, &we) && ctx.Err() == nil {
			continue
		}
		// Written (or failed for good): the buffer is not held while
		// the answer is awaited.
		putBuf(msg)
		if err != nil {
			return nil, err
		}
		return c.receive(ctx, req, stop)
	}
}

// get returns a connection for one request: an idle one that is still
// quiet (reused), or a new one, waiting while MaxConns are open.
func (t *Transport) get(ctx context.Context) (c *conn, reused bool, err error) {
	t.mu.Lock()
	for len(t.idle) > 0 {
		c = t.idle[len(t.idle)-1]
		t.idle[len(t.idle)-1] = nil
		t.idle = t.idle[:len(t.idle)-1]
		t.mu.Unlock()
		// A server that closed the connection while it was idle, or
		// sent something nobody asked for, has left it unusable.
		if c.wb.Quiet() {
			return c, true, nil
		}
		c.close()
		t.mu.Lock()
	}
	if t.open < t.opt.MaxConns {
		t.open++
		t.mu.Unlock()
		return t.dialSlot(ctx)
	}
	ch := make(chan *conn, 1)
	t.waiters = append(t.waiters, ch)
	t.mu.Unlock()
	select {
	case c = <-ch:
	case <-ctx.Done():
		t.mu.Lock()
		for i, w := range t.waiters {
			if w == ch {
				t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
				t.mu.Unlock()
				return nil, false, context.Cause(ctx)
			}
		}
		t.mu.Unlock()
		// Handed something as the context ended: pass it on.
		if c = <-ch; c != nil {
			t.put(c)
		} else {
			t.freeSlot()
		}
		return nil, false, context.Cause(ctx)
	}
	if c == nil {
		return t.dialSlot(ctx)
	}
	return c, true, nil
}

// dialSlot dials a connection in a slot of open already counted.
func (t *Transport) dialSlot(ctx context.Context) (*conn, bool, error) {
	// The dial runs on a goroutine of its own. The net package's dial,
	// and a TLS handshake, are deep: on the request's goroutine they
	// grew its stack to 8 KiB for good, and a goroutine that goes on
	// serving requests (an HTTP/1.1 server's, one per client connection)
	// then held that through every later request's wait for its answer.
	// Dials are rare, connections being reused; the waits are not.
	type dialed struct {
		c   *conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := t.dial(ctx)
		ch <- dialed{c, err}
	}()
	d := <-ch
	c, err := d.c, d.err
	if err != nil {
		t.freeSlot()
		return nil, false, err
	}
	return c, false, nil
}

// put makes c, whose request has ended cleanly, free for the next.
func (t *Transport) put(c *conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if ch := t.nextWaiter(); ch != nil {
		t.mu.Unlock()
		ch <- c
		return
	}
	t.idle = append(t.idle, c)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.opt.IdleConnTimeout, t.sweepIdle)
	}
	t.mu.Unlock()
}

// freeSlot gives up a slot of open, to a waiter if there is one.
func (t *Transport) freeSlot() {
	t.mu.Lock()
	if ch := t.nextWaiter(); ch != nil {
		t.mu.Unlock()
		ch <- nil
		return
	}
	t.open--
	t.mu.Unlock()
}

// nextWaiter takes the longest waiting request's channel off the queue,
// or returns nil; t.mu is held.
func (t *Transport) nextWaiter() chan *conn {
	if len(t.waiters) == 0 {
		return nil
	}
	ch := t.waiters[0]
	t.waiters = t.waiters[1:]
	return ch
}

// sweepIdle closes the connections idle for IdleConnTimeout, and runs
// again when the next one will be.
func (t *Transport) sweepIdle() {
	now := time.Now()
	t.mu.Lock()
	n := 0
	for n < len(t.idle) && now.Sub(t.idle[n].idleAt) >= t.opt.IdleConnTimeout {
		n++
	}
	stale := append([]*conn(nil), t.idle[:n]...)
	k := copy(t.idle, t.idle[n:])
	clear(t.idle[k:])
	t.idle = t.idle[:k]
	if len(t.idle) > 0 {
		t.sweep.Reset(t.opt.IdleConnTimeout - now.Sub(t.idle[0].idleAt))
	} else {
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, c := range stale {
		c.close()
	}
}

// CloseIdleConnections closes the connections no request is using.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// dial opens a connection: TCP, and TLS if configured.
func (t *Transport) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, t.opt.ConnectTimeout)
	defer cancel()
	nc, err := t.opt.Dial(dctx, "tcp", t.opt.Addr)
	if err != nil {
		return nil, err
	}
	c := newConn(t, nc)
	if t.opt.TLS != nil {
		tc := tls.Client(c.wb, t.opt.TLS)
		if err := tc.HandshakeContext(dctx); err != nil {
			nc.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: nc.RemoteAddr(), Err: fmt.Errorf("TLS handshake with %s: %w", t.opt.Addr, err)}
		}
		c.nc = tc
	}
	return c, nil
}
