// Package h2client is an HTTP/2 client for one origin, over h2c (prior
// knowledge) or TLS (ALPN "h2"), made for a gateway's provider hop.
//
// net/http's HTTP/2 client spends most of its CPU per request not on
// frames but on waking goroutines: each request runs a goroutine of its
// own for its whole life, and frames pass between the connection's
// reader, that goroutine and the caller through channels and a pipe. On
// a busy machine each wake-up of a sleeping goroutine costs tens of
// microseconds. Here a connection has one goroutine, its reader, which
// blocks in the runtime's poller. The caller writes its own request's
// frames (under the connection's write lock, which also guards the HPACK
// encoder) in one Write, and waits for the answer and reads the body on
// its own goroutine; the reader wakes it only when it is waiting.
// Nothing is started per request: cancellation is a context.AfterFunc,
// which costs nothing until the context ends.
package h2client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Options left at zero.
const (
	DefaultMaxConns        = 256
	DefaultIdleConnTimeout = 90 * time.Second
	DefaultConnectTimeout  = 5 * time.Second
)

// Options configure a Transport.
type Options struct {
	// Addr is the host:port dialed.
	Addr string
	// TLS, if set, makes connections TLS with ALPN "h2"; nil is h2c.
	TLS *tls.Config
	// Dial opens a connection; nil uses a net.Dialer. Its errors are
	// returned as they are (a *net.OpError with Op "dial" for a
	// net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxConns bounds the open connections; 0 means DefaultMaxConns.
	MaxConns int
	// ConnectTimeout bounds a dial, TLS handshake and the server's first
	// SETTINGS; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// IdleConnTimeout closes a connection without streams for that long;
	// 0 means DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
}

// Transport is an http.RoundTripper for HTTP/2 to one origin.
type Transport struct {
	opt Options

	mu      sync.Mutex
	conns   []*conn
	dialing int // dials in progress
	// waiters counts requests waiting for a stream; changed is closed (and
	// replaced) when one may be free: a dial ended, a full connection's
	// stream ended, settings changed.
	waiters atomic.Int32
	changed chan struct{}
	// dialFails counts failed dials; dialErr is the last one's error.
	// A request waiting on others' dials fails with it.
	dialFails uint64
	dialErr   error
	// capHint is the stream limit the last connection's server set, to
	// guess how many waiters one dial serves.
	capHint int
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
	if o.Dial == nil {
		o.Dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	if o.TLS != nil {
		o.TLS = o.TLS.Clone()
		o.TLS.NextProtos = []string{"h2"}
	}
	return &Transport{opt: o, capHint: assumedMaxStreams}
}

// errRetry marks a stream the server refused or dropped unprocessed
// (RST_STREAM REFUSED_STREAM, or above a GOAWAY's last stream): the
// request can go again on another connection than c. Another: a server
// that refuses a stream often sends GOAWAY right after, and the request
// sent again before the reader has seen it would be refused again.
type errRetry struct {
	err error
	c   *conn
}

func (e *errRetry) Error() string { return e.err.Error() }
func (e *errRetry) Unwrap() error { return e.err }

// RoundTrip sends req on a connection with a free stream and returns the
// response once its headers have come. A request the server did not
// process is sent once more on another connection.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("h2client: request has no URL")
	}
	if req.Method == "CONNECT" {
		closeBody(req)
		return nil, errors.New("h2client: CONNECT is not supported")
	}
	var avoid *conn
	for attempt := 0; ; attempt++ {
		resp, err := t.roundTrip(req, avoid)
		if err == nil {
			return resp, nil
		}
		var r *errRetry
		if !errors.As(err, &r) {
			return nil, err
		}
		rerr := r.err
		avoid = r.c
		if attempt > 0 || req.Context().Err() != nil {
			return nil, rerr
		}
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, rerr
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, rerr
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

func (t *Transport) roundTrip(req *http.Request, avoid *conn) (*http.Response, error) {
	ctx := req.Context()
	c, err := t.conn(ctx, avoid)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	return c.roundTrip(req)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// conn returns a connection other than avoid with a stream reserved for
// the caller, dialing one if every open one is at its server's stream
// limit.
func (t *Transport) conn(ctx context.Context, avoid *conn) (*conn, error) {
	t.mu.Lock()
	var fails uint64
	waiting := false
	for {
		for _, c := range t.conns {
			if c != avoid && c.reserve() {
				if waiting {
					t.waiters.Add(-1)
				}
				t.mu.Unlock()
				return c, nil
			}
		}
		if waiting && t.dialFails != fails && t.dialing == 0 {
			t.waiters.Add(-1)
			err := t.dialErr
			t.mu.Unlock()
			return nil, err
		}
		// Dial when nothing is being dialed, or when more wait than the
		// dials in progress are likely to serve.
		if len(t.conns)+t.dialing < t.opt.MaxConns && (t.dialing == 0 || int(t.waiters.Load()) > t.dialing*t.capHint) {
			if waiting {
				t.waiters.Add(-1)
			}
			t.dialing++
			t.mu.Unlock()
			c, err := t.dial(ctx)
			t.mu.Lock()
			t.dialing--
			if err != nil {
				// A dial given up because its own request ended is not
				// the others' failure: one of them dials next.
				if ctx.Err() == nil {
					t.dialFails++
					t.dialErr = err
				}
				t.wake()
				t.mu.Unlock()
				return nil, err
			}
			c.reserve() // a new connection has room for one stream
			t.conns = append(t.conns, c)
			if c.maxStreams > 0 {
				t.capHint = int(c.maxStreams)
			}
			t.wake()
			t.mu.Unlock()
			return c, nil
		}
		if avoid != nil {
			// No other connection, and no room to dial one: the one to
			// avoid is better than waiting.
			avoid = nil
			continue
		}
		if !waiting {
			// Counted before looking again, so that a stream freed
			// meanwhile is not missed (streamFreed reads the count
			// without the lock).
			waiting = true
			t.waiters.Add(1)
			fails = t.dialFails
			continue
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.mu.Lock()
			t.waiters.Add(-1)
			t.mu.Unlock()
			return nil, context.Cause(ctx)
		}
		t.mu.Lock()
	}
}

// wake tells waiting requests a stream may be free. t.mu is held.
func (t *Transport) wake() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// streamFreed is called when a stream of c ends (or its settings
// change); waiters are told if c was what they were waiting for.
func (t *Transport) streamFreed() {
	if t.waiters.Load() == 0 {
		return
	}
	t.mu.Lock()
	t.wake()
	t.mu.Unlock()
}

// remove takes c out of the pool.
func (t *Transport) remove(c *conn) {
	t.mu.Lock()
	for i, x := range t.conns {
		if x == c {
			t.conns = append(t.conns[:i], t.conns[i+1:]...)
			t.conns[len(t.conns):cap(t.conns)][0] = nil
			break
		}
	}
	t.wake()
	t.mu.Unlock()
}

// CloseIdleConnections closes the connections that carry no stream.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	conns := append([]*conn(nil), t.conns...)
	t.mu.Unlock()
	for _, c := range conns {
		c.closeIfIdle(0)
	}
}

// dial opens and sets up a connection: TLS if configured, the preface,
// and the server's first SETTINGS.
func (t *Transport) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, t.opt.ConnectTimeout)
	defer cancel()
	nc, err := t.opt.Dial(dctx, "tcp", t.opt.Addr)
	if err != nil {
		return nil, err
	}
	if t.opt.TLS != nil {
		cfg := t.opt.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			host, _, serr := net.SplitHostPort(t.opt.Addr)
			if serr != nil {
				host = t.opt.Addr
			}
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			nc.Close()
			if strings.Contains(err.Error(), "no application protocol") {
				return nil, fmt.Errorf("h2client: %s does not speak HTTP/2 over TLS (ALPN h2: %v); set the provider's http to h1 or auto", t.opt.Addr, err)
			}
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: nc.RemoteAddr(), Err: fmt.Errorf("TLS handshake with %s: %w", t.opt.Addr, err)}
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			if p == "" {
				p = "none (HTTP/1.1)"
			}
			return nil, fmt.Errorf("h2client: %s did not select HTTP/2 by ALPN (it chose %s); set the provider's http to h1 or auto", t.opt.Addr, p)
		}
		nc = tc
	}
	c, err := newConn(t, nc, dctx)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}
