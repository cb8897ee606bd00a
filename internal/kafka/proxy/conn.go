package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

const (
	readBufSize  = 64 << 10 // holds any request header plus Produce's acks prefix
	writeBufSize = 32 << 10
	// keepBuf is the largest decode buffer a connection keeps between
	// frames; bigger ones are dropped after use so an idle connection
	// holds little memory.
	keepBuf          = 1 << 20
	handshakeTimeout = 10 * time.Second
)

// pending is one request awaiting its response, in the order sent.
type pending struct {
	hdr   filter.Header
	sent  time.Time
	local []byte       // a whole response frame a filter produced
	mask  filter.Mask  // response filters to run
	upTo  int          // only filters before this chain position
	req   kmsg.Request // the decoded request, if a filter decoded it
	// saslV0 receives the error code of a forwarded SaslHandshake v0:
	// on success, raw SASL tokens follow (see relaySASLv0).
	saslV0 chan int16
	// raw marks the answer to a raw SASL token: a size and bytes, with no
	// correlation id.
	raw bool
	// barrier, if set, is closed by the responder when it reaches the
	// entry: every request before it has been answered (see quiesce).
	barrier chan struct{}
}

// conn relays one client connection to one broker connection. Two
// goroutines own it: readRequests (client → broker) and respond
// (broker → client). pending entries pass from the first to the second
// through a bounded queue (pipeline), which is what keeps responses in
// request order and bounds how much a slow peer makes the gateway hold.
// The responder runs only while there is something to answer, and for
// respondLinger after: an idle connection has one goroutine, the reader's.
type conn struct {
	v      *VirtualCluster
	log    *slog.Logger
	client net.Conn
	up     net.Conn
	cr     *connReader
	uw     *connWriter
	ur     *connReader
	cw     *connWriter
	fc     filter.Context

	inflight *pipeline
	// While nothing is queued the responder waits on the broker socket
	// rather than on inflight, so that a request costs no wakeup of the
	// responder: it wakes once, when the answer arrives (see awaitBroker).
	// If nothing comes for respondLinger it ends, and the next entry
	// queued starts another. qmu orders that wait and that end against
	// enqueue and closePipeline.
	qmu        sync.Mutex
	respIdle   bool               // the responder waits on the broker with nothing queued
	respArmed  bool               // enqueue armed the broker read deadline for the first entry
	respOff    bool               // no responder runs: the next entry queued starts one
	pipeClosed bool               // closePipeline has run
	done       chan struct{}      // closed by close
	cancel     context.CancelFunc // cancels fc.Ctx; called by close
	respDone   chan struct{}      // closed when respond returns
	closeOnce  sync.Once
	closing    atomic.Bool
	draining   atomic.Bool

	encBuf  []byte // readRequests' encode buffer
	respBuf []byte // respond's buffer for whole frames up to keepBuf
	// Owned by readRequests: when it last renewed each deadline.
	writeArmed, idleArmed time.Time
	// Owned by respond: when it last renewed the client write deadline.
	clientWriteArmed time.Time
	idleDeadline     time.Time
	// Owned by readRequests: the frame being read, while a frame read
	// deadline is set (see frameStart).
	frameDeadline time.Time
	frameSize     int
	frameFrom     int64 // client bytes read (cr.n+spliced) before the frame's body
	spliced       int64 // client bytes relayed by splice, not through cr
	// auth is the connection's authentication, when the virtual cluster
	// terminates SASL; nil otherwise.
	auth *authState
	// The broker side's SASL session, owned by readRequests: the address
	// dialed, the mechanism it authenticated with (nil: none), and when to
	// renew the session (zero: never).
	upAddr   string
	upMech   kafkasasl.Mechanism
	upReauth time.Time
}

func (v *VirtualCluster) serve(accepted net.Conn, node int32) {
	raw, err := v.opts.ProxyProtocol.Accept(accepted)
	if err != nil {
		v.refuse(accepted, accepted.RemoteAddr(), refusedProxyProtocol, err)
		return
	}
	if reason, ok := v.limits.Admit(raw.RemoteAddr()); !ok {
		v.refuse(raw, raw.RemoteAddr(), reason, errors.New("over the virtual cluster's limit"))
		return
	}
	v.m.connsTotal.Inc()
	v.m.connsOpen.Inc()
	c := v.open(raw, node)
	if c == nil {
		v.m.connsOpen.Dec()
		v.limits.Release(raw.RemoteAddr())
		return
	}
	if !v.track(c) {
		c.close()
		c.release()
		return
	}
	// The relay runs on a goroutine of its own, and this one ends. Setting
	// up (dialing the broker, TLS) grows a goroutine's stack to 8 KiB,
	// and the runtime halves a stack only while under a quarter of it is
	// in use, which the reader's wait is not: on a fresh goroutine the
	// reader of an idle connection keeps the 2–4 KiB its requests need.
	v.wg.Add(1)
	go c.relay()
}

// relay runs the connection until both sides are done. It reads the
// client's requests itself; the responder runs only while there is
// something to answer (see respond).
func (c *conn) relay() {
	defer c.v.wg.Done()
	defer c.release()
	c.log.Debug("connection open")
	c.finish(c.readRequests())
	<-c.respDone
	c.log.Debug("connection closed")
}

// release gives back what serve took for the connection, once it is over.
func (c *conn) release() {
	c.v.untrack(c)
	c.cancel()
	c.v.m.connsOpen.Dec()
	c.v.limits.Release(c.fc.ClientAddr)
}

// finish ends the request side after readRequests returned err: it logs
// why, and closes the pipeline so the responder sends what is due and
// returns.
func (c *conn) finish(err error) {
	var stalled *frameTimeoutError
	switch {
	case errors.As(err, &stalled):
		c.log.Warn("client stalled part-way through a request frame; closing its connection and the broker connection",
			"received_bytes", stalled.got, "frame_bytes", stalled.size, "frame_read_timeout", stalled.limit,
			"fix", "if clients send frames this large over links this slow, raise the virtual cluster's frame_read_timeout")
		c.close()
		c.closePipeline()
	case err == nil:
		c.closePipeline()
	case errors.Is(err, errAuthFailed), errors.Is(err, errNotAuthed), errors.Is(err, errSessionExpiry):
		// Logged already. The answers queued (the failure's included)
		// go out; then the connection closes.
		c.closePipeline()
	case errors.Is(err, errClientClosed):
		c.close()
		c.closePipeline()
	case errors.Is(err, errDrained):
		c.log.Info("shutdown interrupted a request mid-frame; closing the connection")
		c.close()
		c.closePipeline()
	default:
		if !c.closing.Load() {
			c.log.Warn("closing connection", "err", err)
		}
		c.close()
		c.closePipeline()
	}
}

// open sets up the relay of an accepted client connection: TLS, the
// principal, the broker connection. It returns nil, having closed the
// client connection, if any of that fails.
func (v *VirtualCluster) open(raw net.Conn, node int32) *conn {
	// The connection's logger is built once, with every attribute: each
	// With is a logger and a handler of its own, kept by the connection.
	// Until then, a failure logs through one built for it.
	attrs := []any{"client", raw.RemoteAddr().String()}
	if node != bootstrapNode {
		attrs = append(attrs, "node", node)
	}
	log := func() *slog.Logger { return v.log.With(attrs...) }
	client := raw
	if v.opts.TLS != nil {
		tc := tls.Server(raw, v.opts.TLS)
		raw.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.Handshake(); err != nil {
			raw.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				log().Debug("client went away during the TLS handshake", "err", err)
				return nil
			}
			v.m.err(errTLSHandshake)
			log().Warn("TLS handshake with client failed (is the client using plaintext?)", "err", err)
			return nil
		}
		raw.SetDeadline(time.Time{})
		client = tc
		if v.opts.SNI != nil {
			n, err := v.sniNode(tc)
			if err != nil {
				v.refuse(tc, raw.RemoteAddr(), refusedSNI, err)
				return nil
			}
			if node = n; node != bootstrapNode {
				attrs = append(attrs, "node", node)
			}
		}
	}
	principal, err := v.certPrincipal(client)
	if err != nil {
		v.m.err(errTLSHandshake)
		log().Warn("refusing the client: it has no client certificate the principal mapping rules can name", "err", err)
		client.Close()
		return nil
	}
	// The broker connection authenticates as the gateway, or as the
	// principal's own upstream identity. A SASL principal is known only
	// once the client has authenticated: until then the broker connection
	// stays unauthenticated, which carries ApiVersions and nothing else.
	var upMech kafkasasl.Mechanism
	if v.opts.UpstreamIdentity == nil || v.opts.SASL == nil {
		if upMech, err = v.upstreamMechanism(principal); err != nil {
			log().Warn("refusing the client: "+err.Error(), "principal", principal,
				"fix", "give the principal credentials under upstream_identity.principals, or set upstream_identity.unmapped: gateway")
			client.Close()
			return nil
		}
	}
	up, addr, lifetime, err := v.dialUpstream(node, upMech)
	if err != nil {
		v.m.err(errUpstreamConnect)
		log().Warn("cannot reach the broker; closing the client connection", "err", err)
		client.Close()
		return nil
	}
	attrs = append(attrs, "broker", addr)
	if principal != "" {
		attrs = append(attrs, "principal", principal)
	}
	c := &conn{
		v:        v,
		log:      v.log.With(attrs...),
		client:   client,
		up:       up,
		cr:       newConnReader(client, readBufSize),
		uw:       newConnWriter(up),
		ur:       newConnReader(up, readBufSize),
		cw:       newConnWriter(client),
		inflight: newPipeline(v.opts.MaxInflight),
		done:     make(chan struct{}),
		respDone: make(chan struct{}),
		respOff:  true,
		upAddr:   addr,
		upMech:   upMech,
		upReauth: reauthAt(time.Now(), lifetime),
	}
	if v.opts.SASL != nil {
		c.auth = &authState{cfg: v.opts.SASL}
	}
	// Cancelled when the connection is torn down, so a filter waiting on a
	// request of its own stops then, not when that request gives up.
	ctx, cancel := context.WithCancel(v.ctx)
	c.cancel = cancel
	c.fc = filter.Context{
		Ctx:            ctx,
		VirtualCluster: v.opts.Name,
		ClientAddr:     raw.RemoteAddr(),
		Log:            c.log,
		Upstream:       v,
		Topics:         v,
	}
	if principal != "" {
		c.fc.SetPrincipal(principal)
	}
	return c
}

// dialUpstream connects to the broker a client port stands for, and
// authenticates the connection with mech unless it is nil. It returns the
// broker's session lifetime too (0: unbounded or unauthenticated).
func (v *VirtualCluster) dialUpstream(node int32, mech kafkasasl.Mechanism) (net.Conn, string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(v.ctx, v.opts.Target.ConnectTimeout)
	defer cancel()
	dial := v.dialer()
	var lifetime time.Duration
	if node != bootstrapNode {
		addr, err := v.upstreamAddr(ctx, node)
		if err != nil {
			return nil, "", 0, err
		}
		c, err := dial(ctx, "tcp", addr)
		if err == nil && mech != nil {
			if lifetime, err = v.authenticateUpstream(ctx, c, addr, mech); err != nil {
				c.Close()
			}
		}
		return c, addr, lifetime, err
	}
	// Bootstrap: try each server once, from a random start, so that
	// clients spread over the servers and one down server costs one dial.
	var errs []error
	bs := v.opts.Target.Bootstrap
	start := rand.IntN(len(bs))
	for i := range bs {
		addr := bs[(start+i)%len(bs)]
		c, err := dial(ctx, "tcp", addr)
		if err == nil && mech != nil {
			if lifetime, err = v.authenticateUpstream(ctx, c, addr, mech); err != nil {
				c.Close()
			}
		}
		if err == nil {
			return c, addr, lifetime, nil
		}
		errs = append(errs, err)
	}
	return nil, "", 0, errors.Join(errs...)
}

// certPrincipal names a client by its TLS certificate, when the virtual
// cluster maps certificates to principals; "" when it does not.
func (v *VirtualCluster) certPrincipal(client net.Conn) (string, error) {
	if v.opts.CertPrincipal == nil {
		return "", nil
	}
	tc, ok := client.(*tls.Conn)
	if !ok {
		return "", errors.New("the listener is not TLS: certificate principals need tls with client certificates")
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", errors.New("the client sent no certificate")
	}
	return v.opts.CertPrincipal(certs[0])
}

// close tears the connection down at once; safe to call more than once.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		close(c.done)
		if c.cancel != nil {
			c.cancel()
		}
		c.client.Close()
		c.up.Close()
	})
}

// drain stops reading new requests; those in flight still get answers.
func (c *conn) drain() {
	c.draining.Store(true)
	c.client.SetReadDeadline(time.Now())
}

var (
	errDrained      = errors.New("drained")
	errConnClosed   = errors.New("connection closed")
	errClientClosed = errors.New("client closed the connection")
	errNoAcks       = errors.New("no acks field where the frame and the longest legal transactional id allow")
)

// readRequests relays client frames to the broker until the connection
// drains or is closed (nil: answers in flight still go out), the client
// hangs up (errClientClosed), or something is wrong (another error).
func (c *conn) readRequests() error {
	v := c.v
	var sz [4]byte
	for {
		c.armDeadlines()
		// Flush before any read that may block, so pipelined requests go
		// out together and none waits in the buffer.
		if c.cr.Buffered() == 0 && c.uw.Buffered() > 0 {
			if err := c.uw.Flush(); err != nil {
				return c.upstreamWriteErr(err)
			}
		}
		if _, err := io.ReadFull(c.cr, sz[:]); err != nil {
			if c.draining.Load() || c.closing.Load() {
				return c.uw.Flush()
			}
			if errors.Is(err, io.EOF) {
				// The client hung up: answers still due can never be
				// delivered, so don't hold the broker connection for
				// them (a long-poll Fetch could keep it for seconds).
				return errClientClosed
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && c.idledOut() {
				c.log.Info("client sent nothing for idle_timeout; closing", "idle_timeout", v.opts.IdleTimeout)
				return errClientClosed
			}
			v.m.err(errClientIO)
			return fmt.Errorf("reading from client: %w", err)
		}
		if err := c.relayRequest(sz); err != nil {
			return err
		}
	}
}

// relayRequest relays one client frame whose size prefix is sz. It is a
// function of its own so that its frame is off the stack while
// readRequests waits for the next request.
func (c *conn) relayRequest(sz [4]byte) error {
	v := c.v
	size, err := wire.FrameSize(sz, int64(v.opts.MaxFrame))
	if err != nil {
		if errors.Is(err, wire.ErrNegativeFrame) {
			v.m.err(errMalformed)
		} else {
			v.m.err(errFrameTooLarge)
		}
		return fmt.Errorf("client frame: %w", err)
	}
	c.frameStart(size)
	h, err := c.peekHeader(size)
	if err != nil {
		return c.peekErr("client request header", err)
	}
	reqMask := v.chain.RequestMask(h.Key, h.Version)
	if !wire.Known(h.Key, h.Version) && !(h.Key == wire.KeyApiVersions && reqMask != 0) {
		v.m.err(errUnknownAPI)
		if !wire.KnownKey(h.Key) {
			return fmt.Errorf("client sent API key %d, which Strait does not know (correlation id %d)", h.Key, h.CorrelationID)
		}
		return fmt.Errorf("client sent %s v%d, newer than Strait reads (v%d); it was never offered in ApiVersions",
			wire.KeyName(h.Key), h.Version, wire.MaxVersion(h.Key))
	}
	v.m.key(h.Key).requests.Inc()
	v.m.bytesUp.Add(float64(4 + size))
	if c.auth != nil {
		taken, err := c.authFrame(sz, size, h)
		if err != nil {
			return err
		}
		if taken {
			return nil
		}
	}
	if !c.upReauth.IsZero() {
		if err := c.renewBrokerSession(); err != nil {
			return err
		}
	}
	p := pending{
		hdr:  filter.Header{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID},
		mask: v.chain.ResponseMask(h.Key, h.Version),
		upTo: v.chain.Len(),
	}
	expect := true
	var saslMechanism string
	if reqMask != 0 && v.chain.Skims(reqMask) {
		pass, err := c.skimRequest(h, size, reqMask)
		if err != nil {
			return c.peekErr("client request", err)
		}
		if pass {
			reqMask = 0
		}
	}
	if reqMask == 0 {
		if h.Key == wire.KeySASLHandshake && h.Version == 0 {
			m, err := c.peekMechanism(h, size)
			if err != nil {
				return c.peekErr("client SaslHandshake v0", err)
			}
			saslMechanism = m
			p.saslV0 = make(chan int16, 1)
		}
		if h.Key == wire.KeyProduce {
			acks, err := c.peekAcks(h, size)
			if err != nil {
				return c.peekErr("client produce request", err)
			}
			expect = acks != 0
		}
		if _, err := c.uw.Write(sz[:]); err != nil {
			return c.upstreamWriteErr(err)
		}
		n, err := relayBody(c.uw, c.up, c.cr, c.client, size)
		c.spliced += n
		if err != nil {
			return c.relayErr(err)
		}
	} else {
		var err error
		if expect, err = c.filterRequest(h, size, reqMask, &p); err != nil {
			return err
		}
		// A forwarded SaslHandshake v0 is followed by raw tokens, as on
		// the path above; the mechanism is the one the broker saw.
		if hs, ok := p.req.(*kmsg.SASLHandshakeRequest); ok && h.Version == 0 && p.local == nil {
			saslMechanism = hs.Mechanism
			p.saslV0 = make(chan int16, 1)
		}
	}
	if !expect {
		return nil
	}
	if err := c.enqueue(p); err != nil {
		return err
	}
	if p.saslV0 != nil {
		if err := c.relaySASLv0(saslMechanism, p.saslV0); err != nil {
			return err
		}
	}
	return nil
}

// enqueue hands p to the responder, in request order.
func (c *conn) enqueue(p pending) error {
	p.sent = time.Now()
	if c.inflight.tryPush(&p) {
		c.wakeResponder(&p)
		return nil
	}
	// The pipeline is full: the broker must see what is buffered before
	// the responder can free a slot.
	if err := c.uw.Flush(); err != nil {
		return c.upstreamWriteErr(err)
	}
	if !c.inflight.push(&p, c.done) {
		return errConnClosed
	}
	c.wakeResponder(&p)
	return nil
}

// wakeResponder runs after p is queued. A responder waiting on the broker
// socket with nothing queued needs no wakeup for a request the broker will
// answer: the answer wakes it, and here its read deadline becomes the
// request's timeout. An entry with no broker answer to wait for (a
// filter's answer, a barrier) wakes it through the deadline, set in the
// past. If no responder runs, one starts.
func (c *conn) wakeResponder(p *pending) {
	c.qmu.Lock()
	if c.respOff {
		c.respOff = false
		c.qmu.Unlock()
		go c.respond()
		return
	}
	if c.respIdle {
		c.respIdle = false
		if p.local == nil && p.barrier == nil {
			c.respArmed = true
			c.up.SetReadDeadline(time.Now().Add(c.v.opts.Target.RequestTimeout))
		} else {
			c.up.SetReadDeadline(time.Unix(1, 0))
		}
	}
	c.qmu.Unlock()
}

// closePipeline tells the responder that no more requests come: it answers
// those queued and returns. If none runs, nothing is queued (an entry
// would have started one), and the response side ends here.
func (c *conn) closePipeline() {
	c.inflight.close()
	c.qmu.Lock()
	c.pipeClosed = true
	off := c.respOff
	c.respOff = false
	if c.respIdle {
		c.respIdle = false
		c.up.SetReadDeadline(time.Unix(1, 0))
	}
	c.qmu.Unlock()
	if off {
		c.responsesDone()
	}
}

// defaultRespondLinger is how long a responder with nothing to answer waits on
// the broker socket before it ends. A connection sending requests more
// often than that keeps its responder (starting one costs about what a
// request does); an idle one has no responder, and its broker socket no
// reader: a broker closing it is found out by the next request, whose
// answer cannot be read, as it was while the responder waited on the
// pipeline rather than the socket.
const defaultRespondLinger = time.Second

// awaitBroker is the responder's wait while nothing is queued: on the
// broker socket, until bytes arrive (the answer to a request queued
// meanwhile), enqueue or closePipeline wakes it, the socket fails, or
// linger passes. It reports whether it waited, whether enqueue armed the
// read deadline for the entry now first in the queue, and whether the
// responder is to end (off): the wait ended with nothing queued and no
// bytes, so respOff is set and the next entry starts a responder. It does
// not wait when something is queued or buffered.
func (c *conn) awaitBroker(linger time.Duration) (waited, armed, off bool) {
	if c.ur.Buffered() > 0 {
		return false, false, false
	}
	c.qmu.Lock()
	if c.inflight.len() > 0 || c.pipeClosed {
		c.qmu.Unlock()
		return false, false, false
	}
	c.respIdle = true
	c.up.SetReadDeadline(time.Now().Add(linger))
	c.qmu.Unlock()
	_, err := c.ur.Peek(1)
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.respIdle = false
	armed, c.respArmed = c.respArmed, false
	// A failed socket ends the responder too, rather than have it spin on
	// the error; the next entry's responder meets the error again and
	// reports it against that request.
	if err != nil && !armed && c.inflight.len() == 0 && !c.pipeClosed {
		// What only the responder uses goes too; the next one takes its
		// own.
		c.respBuf = nil
		c.inflight.dropRing()
		c.respOff = true
		return true, false, true
	}
	return true, armed, false
}

// saslV0Rounds is how many raw token exchanges follow a successful
// SaslHandshake v0 for each mechanism: one for PLAIN and OAUTHBEARER, two
// for SCRAM (client-first and client-final). A failed exchange makes the
// broker close the connection, so the count need only fit success.
var saslV0Rounds = map[string]int{
	"PLAIN":         1,
	"OAUTHBEARER":   1,
	"SCRAM-SHA-256": 2,
	"SCRAM-SHA-512": 2,
}

// relaySASLv0 relays the raw SASL tokens that follow a SaslHandshake v0
// (clients such as kafka-python 2.0.2 use it): after the handshake the
// client sends size-prefixed tokens with no request header, and the broker
// answers each the same way. It waits for the handshake's answer first,
// since whether tokens follow depends on it.
func (c *conn) relaySASLv0(mechanism string, result chan int16) error {
	if err := c.uw.Flush(); err != nil {
		return c.upstreamWriteErr(err)
	}
	var code int16
	select {
	case code = <-result:
	case <-c.done:
		return errConnClosed
	}
	if code != 0 {
		return nil // refused: the client goes on with ordinary requests
	}
	rounds, ok := saslV0Rounds[mechanism]
	if !ok {
		c.v.m.err(errUnknownAPI)
		return fmt.Errorf("client authenticates with SASL %s over SaslHandshake v0 (raw tokens); Strait relays raw tokens for PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER only: use SaslHandshake v1", mechanism)
	}
	var sz [4]byte
	for range rounds {
		c.armDeadlines()
		if c.cr.Buffered() == 0 && c.uw.Buffered() > 0 {
			if err := c.uw.Flush(); err != nil {
				return c.upstreamWriteErr(err)
			}
		}
		if _, err := io.ReadFull(c.cr, sz[:]); err != nil {
			return c.relayErr(err)
		}
		size, err := wire.FrameSize(sz, int64(c.v.opts.MaxFrame))
		if err != nil {
			if errors.Is(err, wire.ErrNegativeFrame) {
				c.v.m.err(errMalformed)
			} else {
				c.v.m.err(errFrameTooLarge)
			}
			return fmt.Errorf("client SASL token: %w", err)
		}
		c.frameStart(size)
		if _, err := c.uw.Write(sz[:]); err != nil {
			return c.upstreamWriteErr(err)
		}
		if err := copyN(c.uw, c.cr, size); err != nil {
			return c.relayErr(err)
		}
		c.v.m.bytesUp.Add(float64(4 + size))
		if err := c.enqueue(pending{hdr: filter.Header{Key: wire.KeySASLHandshake}, raw: true}); err != nil {
			return err
		}
	}
	return nil
}

// peekMechanism reads the mechanism name of a SaslHandshake request.
func (c *conn) peekMechanism(h wire.RequestHeader, size int) (string, error) {
	b, err := c.cr.Peek(min(size, h.Len+2+64))
	if err != nil {
		return "", err
	}
	body := b[h.Len:]
	if len(body) < 2 {
		return "", wire.ErrShortHeader
	}
	n := int(int16(binary.BigEndian.Uint16(body)))
	if n < 0 || len(body) < 2+n {
		return "", wire.ErrMalformed
	}
	return string(body[2 : 2+n]), nil
}

func (c *conn) upstreamWriteErr(err error) error {
	if c.closing.Load() {
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.v.m.err(errUpstreamTimeout)
		return fmt.Errorf("the broker took no bytes for %s: %w", c.v.opts.Target.RequestTimeout, err)
	}
	c.v.m.err(errUpstreamClosed)
	return fmt.Errorf("writing to broker: %w", err)
}

// armDeadlines keeps two deadlines current, renewing each at most every
// quarter of its length so the frame path rarely pays for it:
//   - a write deadline of about request_timeout on the broker socket, so a
//     broker that stops reading cannot block the request side forever (the
//     response side's read deadline only helps once a request is in
//     flight, and a large frame can block before that);
//   - a read deadline of about idle_timeout on the client socket, so a
//     client that sends nothing for that long is let go, as a broker would.
//
// A frame read deadline left by the last frame (frameStart) is replaced
// here, between frames, by the idle deadline (or none).
func (c *conn) armDeadlines() {
	now := time.Now()
	if t := c.v.opts.Target.RequestTimeout; now.Sub(c.writeArmed) >= t/4 {
		c.up.SetWriteDeadline(now.Add(t))
		c.writeArmed = now
	}
	afterFrame := !c.frameDeadline.IsZero()
	c.frameDeadline = time.Time{}
	t := c.v.opts.IdleTimeout
	switch {
	case t > 0 && (afterFrame || now.Sub(c.idleArmed) >= t/4):
		c.idleDeadline = now.Add(t)
		c.client.SetReadDeadline(c.idleDeadline)
		c.idleArmed = now
	case afterFrame:
		c.client.SetReadDeadline(time.Time{})
	default:
		return
	}
	// drain sets the read deadline to now; never push it back out.
	if c.draining.Load() {
		c.client.SetReadDeadline(time.Now())
	}
}

// frameStart is called once a client frame's size has been read: unless
// the whole frame is already buffered, it sets a read deadline of
// frame_read_timeout, so a client that stalls part-way through a frame is
// let go then rather than at idle_timeout, with the broker connection it
// pins. Pipelined small requests mostly arrive whole, so the common case
// costs a comparison and no timer.
func (c *conn) frameStart(size int) {
	if c.cr.Buffered() >= size {
		return
	}
	c.frameSize = size
	c.frameFrom = c.cr.n + c.spliced - int64(c.cr.Buffered())
	c.frameDeadline = time.Now().Add(c.v.opts.FrameReadTimeout)
	c.client.SetReadDeadline(c.frameDeadline)
	if c.draining.Load() {
		c.client.SetReadDeadline(time.Now())
	}
}

// frameTimedOut reports whether a read deadline error is the frame read
// deadline.
func (c *conn) frameTimedOut() bool {
	return !c.frameDeadline.IsZero() && !time.Now().Before(c.frameDeadline)
}

// frameTimeoutError ends a connection whose client did not send a whole
// frame within frame_read_timeout.
type frameTimeoutError struct {
	got, size int64
	limit     time.Duration
}

func (e *frameTimeoutError) Error() string {
	return fmt.Sprintf("client sent %d of the %d bytes of a frame within frame_read_timeout (%s)", e.got, e.size, e.limit)
}

// idledOut reports whether a read deadline error is the idle timeout.
func (c *conn) idledOut() bool {
	return !c.idleDeadline.IsZero() && !time.Now().Before(c.idleDeadline)
}

// relayErr classifies an error from copyN: reads are from the client,
// writes to the broker.
func (c *conn) relayErr(err error) error {
	var we *writeError
	if errors.As(err, &we) {
		return c.upstreamWriteErr(we.err)
	}
	if c.closing.Load() {
		return err
	}
	if c.draining.Load() {
		return errDrained // the drain deadline cut a frame short
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && c.frameTimedOut() {
		c.v.m.err(errFrameTimeout)
		return &frameTimeoutError{
			got:   min(c.cr.n+c.spliced-c.frameFrom, int64(c.frameSize)),
			size:  int64(c.frameSize),
			limit: c.v.opts.FrameReadTimeout,
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !c.idledOut() {
		// Not the client's idle deadline, nor the drain's: the broker
		// write deadline, met inside a splice, which reports either
		// side's error alike.
		return c.upstreamWriteErr(err)
	}
	c.v.m.err(errClientIO)
	return fmt.Errorf("client closed mid-frame: %w", err)
}

// peekErr classifies an error from peeking into a client frame: bytes that
// do not parse are malformed; a client that went away before sending the
// whole frame is an I/O error, as it is when copyN meets it mid-body.
func (c *conn) peekErr(what string, err error) error {
	if errors.Is(err, wire.ErrShortHeader) || errors.Is(err, wire.ErrMalformed) || errors.Is(err, errNoAcks) {
		c.v.m.err(errMalformed)
		return fmt.Errorf("%s: %w", what, err)
	}
	return c.relayErr(err)
}

// peekHeader parses the request header without consuming it.
func (c *conn) peekHeader(size int) (wire.RequestHeader, error) {
	n := min(size, 128)
	b, err := c.cr.Peek(n)
	if err != nil {
		return wire.RequestHeader{}, err
	}
	h, err := wire.ParseRequestHeader(b)
	if errors.Is(err, wire.ErrShortHeader) && n < size {
		// A long client id or tagged fields: look further.
		if b, err = c.cr.Peek(min(size, c.cr.Size())); err != nil {
			return h, err
		}
		h, err = wire.ParseRequestHeader(b)
	}
	if err == nil && h.Len > size {
		err = wire.ErrShortHeader
	}
	return h, err
}

// peekAcks reads a Produce request's acks from the unconsumed frame: an
// acks=0 produce gets no response, so it must not wait in the pipeline.
func (c *conn) peekAcks(h wire.RequestHeader, size int) (int16, error) {
	n := min(size, h.Len+64)
	for {
		b, err := c.cr.Peek(n)
		if err != nil {
			return 0, err
		}
		if acks, ok := wire.ProduceAcks(b[h.Len:], h.Version); ok {
			return acks, nil
		}
		// Look further only once: a transactional id longer than Kafka
		// allows (or than the frame) would otherwise spin here forever.
		next := min(size, h.Len+wire.ProduceAcksPrefix, c.cr.Size())
		if next <= n {
			return 0, fmt.Errorf("produce v%d request: %w", h.Version, errNoAcks)
		}
		n = next
	}
}

// skimRequest offers the start of a request's body to the filters in m,
// which all skim: it reports whether they let it go on unread. It peeks
// what the read buffer holds (the whole frame, up to its size), so a
// request they pass is relayed as any unfiltered one.
func (c *conn) skimRequest(h wire.RequestHeader, size int, m filter.Mask) (bool, error) {
	b, err := c.cr.Peek(min(size, c.cr.Size()))
	if err != nil {
		return false, err
	}
	hdr := filter.Header{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID}
	return c.v.chain.PassRequest(&c.fc, m, hdr, b[h.Len:], len(b) == size), nil
}

// filterRequest decodes a request some filter wants, runs the chain, and
// either forwards the result or queues the filter's answer in p. It returns
// whether a response is expected.
func (c *conn) filterRequest(h wire.RequestHeader, size int, m filter.Mask, p *pending) (bool, error) {
	v := c.v
	// h.ClientID aliases the read buffer, which goes back to a pool once
	// the frame is read out of it.
	if !h.ClientIDNull {
		s := string(h.ClientID)
		p.hdr.ClientID = &s
	}
	// A fresh buffer: the decoded request may alias it and lives on in p
	// until its response, while this goroutine reads the next frame.
	frame, err := readFrame(c.cr, size)
	if err != nil {
		return false, c.relayErr(err)
	}
	var body kmsg.Request
	if wire.Known(h.Key, h.Version) {
		body = kmsg.RequestForKey(h.Key)
		body.SetVersion(h.Version)
		if err := body.ReadFrom(frame[h.Len:]); err != nil {
			v.m.err(errMalformed)
			return false, fmt.Errorf("cannot decode %s v%d request: %w", wire.KeyName(h.Key), h.Version, err)
		}
	} else {
		// Only ApiVersions gets here (KIP-511): its body cannot be read.
		body = &kmsg.ApiVersionsRequest{Version: h.Version}
	}
	req := filter.Request{Header: p.hdr, Body: body}
	at, err := v.chain.OnRequest(&c.fc, m, &req)
	if err != nil {
		v.m.err(errFilter)
		return false, err
	}
	// A filter may have replaced the body: what it holds now is what goes
	// upstream, under the client's header, so it must match that header.
	if req.Body == nil || req.Body.Key() != h.Key || req.Body.GetVersion() != h.Version {
		v.m.err(errFilter)
		return false, fmt.Errorf("a filter replaced a %s v%d request with one of another key or version", wire.KeyName(h.Key), h.Version)
	}
	body = req.Body
	p.req = body
	acks := int16(-1)
	if pr, ok := body.(*kmsg.ProduceRequest); ok {
		acks = pr.Acks
	}
	if resp := req.Response(); resp != nil {
		if acks == 0 {
			return false, nil
		}
		if wire.Known(h.Key, h.Version) {
			resp.SetVersion(h.Version)
		}
		fr := filter.Response{Header: p.hdr, Request: body, Body: resp}
		if err := v.chain.OnResponse(&c.fc, p.mask, at, &fr); err != nil {
			v.m.err(errFilter)
			return false, err
		}
		p.local = encodeResponse(nil, h.CorrelationID, h.Key, fr.Body)
		p.upTo = at
		return true, nil
	}
	if req.Untouched() {
		// Every filter only looked: the client's bytes go upstream.
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], uint32(len(frame)))
		if _, err := c.uw.Write(size[:]); err != nil {
			return false, c.upstreamWriteErr(err)
		}
		if _, err := c.uw.Write(frame); err != nil {
			return false, c.upstreamWriteErr(err)
		}
		return acks != 0, nil
	}
	// Keep the client's header bytes as sent (tags included); encode the
	// body as the filters left it.
	// Size the buffer for the frame read plus what a filter may add
	// (encryption adds under a tenth), so encoding a large body does not
	// grow and copy it several times.
	out := c.encBuf[:0]
	if need := len(frame) + len(frame)/4 + 64; cap(out) < need {
		out = make([]byte, 0, need)
	}
	out = append(out, 0, 0, 0, 0)
	out = append(out, frame[:h.Len]...)
	out = body.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	if _, err := c.uw.Write(out); err != nil {
		return false, c.upstreamWriteErr(err)
	}
	if cap(out) <= keepBuf {
		c.encBuf = out[:0]
	}
	return acks != 0, nil
}

// firstFrameChunk is how much of a decoded request's frame is allocated
// before its bytes arrive; the buffer then doubles as they do. 1 MiB
// covers a default-sized produce batch in one allocation (no copies while
// it arrives) while a peer that lies about a 100 MiB frame pins at most
// this much.
const firstFrameChunk = 1 << 20

// readFrame reads a size-byte frame into a new buffer that grows as its
// bytes arrive: a peer that declares a frame of max_frame_bytes and sends
// a few bytes makes the gateway hold about what it sent, not the size it
// declared.
func readFrame(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, min(size, firstFrameChunk))
	n := 0
	for {
		m, err := io.ReadFull(r, b[n:])
		n += m
		if err != nil {
			return nil, err
		}
		if n == size {
			return b, nil
		}
		next := min(size, 2*len(b))
		b = slices.Grow(b, next-len(b))[:next]
	}
}

// encodeResponse appends a whole response frame.
func encodeResponse(dst []byte, corr int32, key int16, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if wire.ResponseHeaderFlexible(key, resp.GetVersion()) {
		dst = append(dst, 0) // no header tags
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// respond writes responses to the client in request order until the
// pipeline closes or something fails, or until it has had nothing to
// answer for respondLinger (off: wakeResponder starts another).
func (c *conn) respond() {
	if off := c.respondAll(); !off {
		c.responsesDone()
	}
}

// responsesDone ends the response side: the connection closes, and relay
// may return.
func (c *conn) responsesDone() {
	c.close()
	close(c.respDone)
}

func (c *conn) respondAll() (off bool) {
	// armed: enqueue set the broker read deadline for the next entry.
	// hold: the reader owns the broker socket until it queues again.
	var armed, hold bool
	for {
		c.armClientWrite()
		done, idle := c.respondNext(&armed, &hold)
		if done {
			return false
		}
		if !idle {
			continue
		}
		// Nothing queued: flush before waiting.
		if c.cw.Buffered() > 0 {
			if err := c.cw.Flush(); err != nil {
				c.clientWriteErr(err)
				return false
			}
		}
		if !hold {
			waited, a, off := c.awaitBroker(c.v.opts.respondLinger)
			if off {
				return true
			}
			if waited {
				armed = armed || a
				continue
			}
		}
		c.inflight.wait()
	}
}

// respondNext answers the next queued entry, if there is one (idle: there
// is none yet); done means the response side is finished. It is a function
// of its own so that the entry and its handling are off the stack while
// respond waits.
func (c *conn) respondNext(armed, hold *bool) (done, idle bool) {
	p, ok, closed := c.inflight.tryPop()
	if !ok && !closed {
		return false, true
	}
	*hold = false
	if !ok {
		if err := c.cw.Flush(); err != nil {
			c.clientWriteErr(err)
		}
		return true, false
	}
	if p.barrier != nil {
		// The reader may use the broker socket itself now
		// (authenticateBroker): keep off it until the next entry.
		close(p.barrier)
		*hold = true
		return false, false
	}
	if p.local != nil {
		if _, err := c.cw.Write(p.local); err != nil {
			c.clientWriteErr(err)
			return true, false
		}
		c.v.m.key(p.hdr.Key).responses.Inc()
		return false, false
	}
	err := c.relayResponse(&p, *armed)
	*armed = false
	if err != nil {
		if !errors.Is(err, errClientGone) && !c.closing.Load() {
			c.log.Warn("closing connection", "err", err)
		}
		return true, false
	}
	return false, false
}

// errClientGone ends the response loop quietly: the client's socket failed
// and clientWriteErr has logged it.
var errClientGone = errors.New("client went away")

func (c *conn) clientWriteErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) && !c.closing.Load() {
		c.v.m.err(errClientWriteTimeout)
		c.log.Warn("disconnecting a client that stopped reading its answers", "client_write_timeout", c.v.opts.ClientWriteTimeout,
			"fix", "if clients legitimately take longer to read, raise client_write_timeout")
		return errClientGone
	}
	if !c.closing.Load() {
		c.v.m.err(errClientIO)
		c.log.Info("client went away", "err", err)
	}
	return errClientGone
}

// relayResponse relays the broker's answer to p. armed: the broker read
// deadline is already set for it (wakeResponder).
func (c *conn) relayResponse(p *pending, armed bool) (err error) {
	v := c.v
	want := 8 // size and correlation id
	switch {
	case p.raw:
		want = 4 // a raw SASL answer: size only
	case p.saslV0 != nil:
		want = 10 // and the handshake's error code
	}
	if c.ur.Buffered() < want && c.cw.Buffered() > 0 {
		if err := c.cw.Flush(); err != nil {
			return c.clientWriteErr(err)
		}
	}
	if !armed {
		c.up.SetReadDeadline(time.Now().Add(v.opts.Target.RequestTimeout))
	}
	hb, err := c.ur.Peek(want)
	if err != nil {
		switch {
		case c.closing.Load():
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			v.m.err(errUpstreamTimeout)
			return fmt.Errorf("broker did not answer %s v%d (correlation id %d) within %s",
				wire.KeyName(p.hdr.Key), p.hdr.Version, p.hdr.CorrelationID, v.opts.Target.RequestTimeout)
		default:
			v.m.err(errUpstreamClosed)
			return fmt.Errorf("broker closed the connection with %s v%d (correlation id %d) unanswered: %w",
				wire.KeyName(p.hdr.Key), p.hdr.Version, p.hdr.CorrelationID, err)
		}
	}
	size, err := wire.FrameSize([4]byte(hb[:4]), int64(v.opts.MaxFrame))
	if err != nil {
		if errors.Is(err, wire.ErrNegativeFrame) {
			v.m.err(errUpstreamProto)
		} else {
			v.m.err(errFrameTooLarge)
		}
		return fmt.Errorf("broker frame: %w", err)
	}
	if p.raw {
		v.m.bytesDown.Add(float64(4 + size))
		if err := copyN(c.cw, c.ur, 4+size); err != nil {
			return c.responseCopyErr(err)
		}
		return nil
	}
	if p.saslV0 != nil {
		// The reader acts on the handshake's result, and may end the
		// connection on it (a mechanism whose raw tokens it cannot
		// relay): the client gets the broker's answer first.
		code := int16(binary.BigEndian.Uint16(hb[8:]))
		defer func() {
			if err == nil {
				if ferr := c.cw.Flush(); ferr != nil {
					err = c.clientWriteErr(ferr)
				}
			}
			p.saslV0 <- code
		}()
	}
	if corr := wire.CorrelationID(hb[4:]); size < 4 || corr != p.hdr.CorrelationID {
		v.m.err(errUpstreamProto)
		return fmt.Errorf("broker answered correlation id %d, expected %d (%s)", corr, p.hdr.CorrelationID, wire.KeyName(p.hdr.Key))
	}
	km := v.m.key(p.hdr.Key)
	km.latency.Observe(time.Since(p.sent).Seconds())
	km.responses.Inc()
	v.m.bytesDown.Add(float64(4 + size))
	if p.mask.Below(p.upTo) == 0 {
		if _, err := c.cw.Write(hb[:4]); err != nil {
			return c.clientWriteErr(err)
		}
		c.ur.Discard(4)
		if _, err := relayBody(c.cw, c.client, c.ur, c.up, size); err != nil {
			return c.responseCopyErr(err)
		}
		return nil
	}
	return c.filterResponse(p, size)
}

func (c *conn) responseCopyErr(err error) error {
	var we *writeError
	if errors.As(err, &we) {
		return c.clientWriteErr(we.err)
	}
	if c.closing.Load() {
		return nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// request_timeout covers the whole frame (relayResponse).
		c.v.m.err(errUpstreamTimeout)
		return fmt.Errorf("broker did not finish a response within %s: %w", c.v.opts.Target.RequestTimeout, err)
	}
	c.v.m.err(errUpstreamClosed)
	return fmt.Errorf("broker closed the connection mid-response: %w", err)
}

func (c *conn) filterResponse(p *pending, size int) error {
	v := c.v
	frame := c.frameBuf(4 + size)
	defer c.releaseFrameBuf(frame)
	if _, err := io.ReadFull(c.ur, frame); err != nil {
		return c.responseCopyErr(err)
	}
	key, version := p.hdr.Key, p.hdr.Version
	hl, err := wire.ResponseHeaderLen(frame[4:], key, version)
	if err != nil {
		v.m.err(errUpstreamProto)
		return fmt.Errorf("broker %s response header: %w", wire.KeyName(key), err)
	}
	body := frame[4+hl:]
	if !v.chain.WantsResponse(p.mask, p.upTo, key, version, body) {
		if _, err := c.cw.Write(frame); err != nil {
			return c.clientWriteErr(err)
		}
		return nil
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(responseVersion(key, version, body))
	if err := resp.ReadFrom(body); err != nil {
		v.m.err(errUpstreamProto)
		return fmt.Errorf("cannot decode the broker's %s v%d response: %w", wire.KeyName(key), version, err)
	}
	fr := filter.Response{Header: p.hdr, Request: p.req, Body: resp}
	if err := v.chain.OnResponse(&c.fc, p.mask, p.upTo, &fr); err != nil {
		v.m.err(errFilter)
		return err
	}
	if fr.Body == nil || fr.Body.Key() != key || fr.Body.GetVersion() != resp.GetVersion() {
		v.m.err(errFilter)
		return fmt.Errorf("a filter replaced the %s v%d response with one of another key or version", wire.KeyName(key), version)
	}
	if fr.Untouched() {
		// Every filter only looked: the broker's bytes are the answer.
		if _, err := c.cw.Write(frame); err != nil {
			return c.clientWriteErr(err)
		}
		return nil
	}
	// The decoded response may alias frame: encode before frame goes
	// back to the pool.
	// The re-encoded frame is about the size of the one read: start from a
	// pooled buffer of that class instead of growing one from 4 KiB.
	out := append(getBuf(len(frame))[:0], 0, 0, 0, 0)
	out = append(out, frame[4:4+hl]...)
	out = fr.Body.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	_, err = c.cw.Write(out)
	putBuf(out)
	if err != nil {
		return c.clientWriteErr(err)
	}
	return nil
}

// frameBuf returns a buffer for a whole response frame: the connection's
// own for ordinary sizes, a pooled one for big frames.
func (c *conn) frameBuf(n int) []byte {
	if n > keepBuf {
		return getBuf(n)
	}
	if cap(c.respBuf) < n {
		c.respBuf = make([]byte, n)
	}
	return c.respBuf[:n]
}

func (c *conn) releaseFrameBuf(b []byte) {
	if cap(b) > keepBuf {
		putBuf(b)
	}
}

// responseVersion is the version a response body is encoded in: the
// request's, except that a broker refusing an ApiVersions version answers
// in v0 so any client can read it (KIP-511).
func responseVersion(key, version int16, body []byte) int16 {
	if key == wire.KeyApiVersions && len(body) >= 2 &&
		int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
		return 0
	}
	return version
}

// writeError marks an error from the writing side of copyN.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// spliceMin is the body size from which relayBody hands the copy to the
// kernel (splice(2), through net.TCPConn.ReadFrom) instead of moving it
// through user space. BenchmarkRelayProduce vs BenchmarkRelayProduceCopy
// (2026-11-30, 2 cores, medians of 6): at 64 KiB bodies the copy is ~12%
// faster, at 256 KiB splice is ~1.25x faster, at 1 MiB ~1.8x.
var spliceMin = 128 << 10

// relayBody moves n bytes of a frame body from r, buffered over src, to w,
// buffered over dst. Large bodies between plain TCP sockets go by splice;
// it returns how many bytes went that way, read from src past r.
func relayBody(w *connWriter, dst net.Conn, r *connReader, src net.Conn, n int) (int64, error) {
	if n >= spliceMin {
		dt, ok1 := dst.(*net.TCPConn)
		st, ok2 := src.(*net.TCPConn)
		if ok1 && ok2 {
			k := min(n, r.Buffered())
			b, _ := r.Peek(k)
			if _, err := w.Write(b); err != nil {
				return 0, &writeError{err}
			}
			r.Discard(k)
			if err := w.Flush(); err != nil {
				return 0, &writeError{err}
			}
			return io.CopyN(dt, st, int64(n-k))
		}
	}
	return 0, copyN(w, r, n)
}

// copyN moves n bytes from r to w through r's buffer, without allocating.
func copyN(w *connWriter, r *connReader, n int) error {
	for n > 0 {
		if r.Buffered() == 0 {
			if _, err := r.Peek(1); err != nil {
				return err
			}
		}
		k := min(n, r.Buffered())
		b, _ := r.Peek(k)
		if _, err := w.Write(b); err != nil {
			return &writeError{err}
		}
		r.Discard(k)
		n -= k
	}
	return nil
}
