package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/auth/sasl"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// SASL terminates client authentication at the gateway: clients
// authenticate to Strait with one of Mechanisms, and their SaslHandshake
// and SaslAuthenticate requests never reach the broker. The principal goes
// into the filter Context, for the filters after.
type SASL struct {
	// Mechanisms are the mechanisms offered, in the order listed to
	// clients.
	Mechanisms []sasl.Mechanism
	// MaxSessionLifetime bounds an authenticated session (KIP-368): the
	// client is told to re-authenticate within it, and a connection whose
	// session ran out is closed. 0: sessions last as long as their
	// credential (a token's expiry), or forever.
	MaxSessionLifetime time.Duration
	// FailureDelay is waited before answering a failed authentication, so
	// that failures cost a guesser time and take the same time whatever
	// failed.
	FailureDelay time.Duration
	// FailureBudget is how many failures a minute a client address may
	// have at FailureDelay; each failure past it waits a second more than
	// the last, up to 30 s. 0: no budget.
	FailureBudget int
}

// maxSASLFrame bounds what a client may send before it has authenticated,
// and any SASL message: an unauthenticated peer must not make the gateway
// hold max_frame_bytes. Kafka's own bound (sasl.server.max.receive.size)
// is the same 512 KiB.
const maxSASLFrame = 512 << 10

// authState is a connection's progress through authentication. Owned by
// readRequests.
type authState struct {
	cfg       *SASL
	mech      sasl.Mechanism // chosen by SaslHandshake
	ex        sasl.Exchange
	started   time.Time
	principal string
	// authenticated: a session is open; expires ends it (zero: never).
	authenticated bool
	expires       time.Time
}

// Errors that end a connection during authentication.
var (
	errAuthFailed    = errors.New("client failed to authenticate")
	errNotAuthed     = errors.New("client sent a request before authenticating")
	errSessionExpiry = errors.New("client's authenticated session expired and it did not re-authenticate")
)

// authFrame handles a client frame while authentication has a say in it:
// before the client is authenticated, and every SaslHandshake and
// SaslAuthenticate after (re-authentication). It reports whether it took
// the frame; a frame it did not take goes on as any other. ApiVersions is
// never taken: clients ask it before authenticating.
func (c *conn) authFrame(sz [4]byte, size int, h wire.RequestHeader) (bool, error) {
	a := c.auth
	isSASL := h.Key == wire.KeySASLHandshake || h.Key == wire.KeySASLAuthenticate
	if a.authenticated && !isSASL {
		if !a.expires.IsZero() && time.Now().After(a.expires) {
			c.log.Info("closing the connection: its SASL session expired and the client did not re-authenticate (KIP-368)",
				"principal", a.principal)
			c.v.m.vec.ExpiredSessions.WithLabelValues(c.v.m.vc).Inc()
			return true, errSessionExpiry
		}
		return false, nil
	}
	if h.Key == wire.KeyApiVersions {
		return false, nil
	}
	if size > maxSASLFrame {
		c.v.m.err(errFrameTooLarge)
		return true, fmt.Errorf("%w: a %s frame of %d bytes before or during authentication (at most %d)", errNotAuthed, wire.KeyName(h.Key), size, maxSASLFrame)
	}
	frame, err := readFrame(c.cr, size)
	if err != nil {
		return true, c.relayErr(err)
	}
	body := frame[h.Len:]
	switch h.Key {
	case wire.KeySASLHandshake:
		return true, c.saslHandshake(h, body)
	case wire.KeySASLAuthenticate:
		return true, c.saslAuthenticate(h, body)
	}
	if a.ex != nil {
		// The client left its exchange half-way, as kafkajs does when it
		// takes OAUTHBEARER's error status for success: that is a failed
		// authentication, logged, counted and delayed as any other.
		c.authFailed(fmt.Errorf("the client sent %s instead of the next message of its %s exchange",
			wire.KeyName(h.Key), a.mech.Name()))
		c.refuseUnauthenticated(h)
		return true, errAuthFailed
	}
	c.refuseUnauthenticated(h)
	c.log.Warn("closing the connection: the client sent a request before authenticating (is it configured for SASL?)",
		"request", wire.KeyName(h.Key), "mechanisms", c.auth.names())
	return true, errNotAuthed
}

func (a *authState) names() []string {
	names := make([]string, len(a.cfg.Mechanisms))
	for i, m := range a.cfg.Mechanisms {
		names[i] = m.Name()
	}
	return names
}

// saslHandshake picks the mechanism. After a v0 handshake the client
// sends raw tokens, which are read here, before any other request.
func (c *conn) saslHandshake(h wire.RequestHeader, body []byte) error {
	a := c.auth
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = h.Version
	if err := req.ReadFrom(body); err != nil {
		c.v.m.err(errMalformed)
		return fmt.Errorf("client SaslHandshake: %w", err)
	}
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = a.names()
	i := slices.IndexFunc(a.cfg.Mechanisms, func(m sasl.Mechanism) bool { return m.Name() == req.Mechanism })
	if i < 0 {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.log.Info("client asked for a SASL mechanism this listener does not offer",
			"mechanism", req.Mechanism, "offered", resp.SupportedMechanisms)
		return c.answer(h, resp)
	}
	a.mech = a.cfg.Mechanisms[i]
	a.ex = a.mech.Start(c.fc.Context(), c.fc.ClientAddr.String())
	a.started = time.Now()
	if err := c.answer(h, resp); err != nil {
		return err
	}
	if h.Version == 0 {
		return c.saslRawTokens()
	}
	return nil
}

// saslRawTokens runs the exchange over raw tokens, as after a SaslHandshake
// v0 (kafka-python 2.0.2 authenticates only this way): each token and each
// answer is a size and bytes, with no request header. A failed exchange
// closes the connection, the only way raw tokens can say so.
func (c *conn) saslRawTokens() error {
	var sz [4]byte
	for {
		c.armDeadlines()
		if _, err := io.ReadFull(c.cr, sz[:]); err != nil {
			return c.relayErr(err)
		}
		size, err := wire.FrameSize(sz, int64(c.v.opts.MaxFrame))
		if err != nil {
			c.v.m.err(errMalformed)
			return fmt.Errorf("client SASL token: %w", err)
		}
		c.frameStart(size)
		if size > maxSASLFrame {
			c.v.m.err(errFrameTooLarge)
			return fmt.Errorf("%w: a raw SASL token of %d bytes (at most %d)", errAuthFailed, size, maxSASLFrame)
		}
		token, err := readFrame(c.cr, size)
		if err != nil {
			return c.relayErr(err)
		}
		answer, done, err := c.auth.ex.Next(token)
		if err != nil {
			c.authFailed(err)
			return errAuthFailed
		}
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(answer)))
		frame = append(frame, answer...)
		if err := c.enqueue(pending{hdr: filter.Header{Key: wire.KeySASLHandshake}, local: frame}); err != nil {
			return err
		}
		if done {
			if _, err := c.authSucceeded(); err != nil {
				return err
			}
			return nil
		}
	}
}

// saslAuthenticate feeds one message of the exchange.
func (c *conn) saslAuthenticate(h wire.RequestHeader, body []byte) error {
	a := c.auth
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = h.Version
	if err := req.ReadFrom(body); err != nil {
		c.v.m.err(errMalformed)
		return fmt.Errorf("client SaslAuthenticate: %w", err)
	}
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if a.ex == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate before SaslHandshake: send SaslHandshake first"
		resp.ErrorMessage = &msg
		_ = c.answer(h, resp)
		return fmt.Errorf("%w: %s", errAuthFailed, msg)
	}
	answer, done, err := a.ex.Next(req.SASLAuthBytes)
	resp.SASLAuthBytes = answer
	if err != nil {
		c.authFailed(err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		if aerr := c.answer(h, resp); aerr != nil {
			return aerr
		}
		return errAuthFailed
	}
	if done {
		lifetime, err := c.authSucceeded()
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := err.Error()
			resp.ErrorMessage = &msg
			if aerr := c.answer(h, resp); aerr != nil {
				return aerr
			}
			return err
		}
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	}
	return c.answer(h, resp)
}

// authSucceeded opens the session and returns its lifetime (0: unbounded).
// A re-authentication as another principal is refused: KIP-368 lets a
// client renew its session, not become someone else, and Kafka refuses it
// too.
func (c *conn) authSucceeded() (time.Duration, error) {
	a := c.auth
	res := a.ex.Result()
	again := a.authenticated
	if again && res.Principal != a.principal {
		a.ex = nil
		c.log.Warn("client re-authenticated as another principal; closing the connection",
			"principal", a.principal, "new_principal", res.Principal)
		return 0, fmt.Errorf("%w: cannot change principal when re-authenticating", errAuthFailed)
	}
	if !again && c.v.opts.UpstreamIdentity != nil {
		if err := c.takeUpstreamIdentity(res.Principal); err != nil {
			a.ex = nil
			c.v.m.auth(a.mech.Name(), false, time.Since(a.started))
			return 0, err
		}
	}
	a.authenticated, a.principal = true, res.Principal
	c.fc.SetPrincipal(res.Principal)
	lifetime := a.cfg.MaxSessionLifetime
	if !res.Expiry.IsZero() {
		if left := time.Until(res.Expiry); lifetime == 0 || left < lifetime {
			lifetime = max(left, time.Millisecond)
		}
	}
	a.expires = time.Time{}
	if lifetime > 0 {
		a.expires = time.Now().Add(lifetime)
	}
	c.v.m.auth(a.mech.Name(), true, time.Since(a.started))
	msg := "client authenticated"
	if again {
		msg = "client re-authenticated"
	}
	if res.LegacySCRAMNonce {
		c.log.Info(msg, "principal", res.Principal, "mechanism", a.mech.Name(), "session_lifetime", lifetime,
			"legacy_scram_nonce", true, "note", "the client sent the SCRAM nonce of librdkafka before 2.6.1, accepted; Kafka 4 refuses it: upgrade the client's librdkafka")
	} else {
		c.log.Info(msg, "principal", res.Principal, "mechanism", a.mech.Name(), "session_lifetime", lifetime)
	}
	a.ex = nil
	return lifetime, nil
}

// takeUpstreamIdentity authenticates the broker connection as principal's
// upstream identity, before the client is told it is in. A principal the
// config refuses, or whose credentials the broker refuses, fails the
// client's authentication: the client sees why in the error message, the
// log names the principal and the fix.
func (c *conn) takeUpstreamIdentity(principal string) error {
	m, err := c.v.upstreamMechanism(principal)
	if err != nil {
		c.log.Warn("refusing the client: "+err.Error(), "principal", principal,
			"fix", "give the principal credentials under upstream_identity.principals, or set upstream_identity.unmapped: gateway")
		return fmt.Errorf("%w: principal %s has no identity toward the cluster", errAuthFailed, principal)
	}
	if m == nil {
		return nil // the gateway has no identity either: the cluster is open
	}
	if err := c.authenticateBroker(m, "authenticating as principal "+principal); err != nil {
		c.log.Warn("refusing the client: the cluster refused the credentials the gateway holds for its principal", "principal", principal, "err", err,
			"fix", "check upstream_identity.principals."+principal+" against the cluster's users")
		return fmt.Errorf("%w: the cluster refused the credentials the gateway holds for principal %s", errAuthFailed, principal)
	}
	return nil
}

// authFailed logs a failed authentication and waits the failure delay.
func (c *conn) authFailed(err error) {
	a := c.auth
	defer func() { c.v.m.auth(a.mech.Name(), false, time.Since(a.started)) }()
	c.log.Warn("client failed to authenticate; closing the connection", "mechanism", a.mech.Name(), "err", err)
	a.ex = nil
	d := a.cfg.FailureDelay + c.v.failures.fail(c.fc.ClientAddr, time.Now())
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.done:
		}
	}
}

// answer queues a response of the gateway's own, in request order.
func (c *conn) answer(h wire.RequestHeader, resp kmsg.Response) error {
	resp.SetVersion(h.Version)
	frame := encodeResponse(nil, h.CorrelationID, h.Key, resp)
	return c.enqueue(pending{hdr: filter.Header{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID}, local: frame})
}

// refuseUnauthenticated answers a request sent before authentication with
// SASL_AUTHENTICATION_FAILED where the response has a top-level error
// code; the connection is closed after either way, as a broker closes it.
func (c *conn) refuseUnauthenticated(h wire.RequestHeader) {
	resp := kmsg.ResponseForKey(h.Key)
	if resp == nil {
		return
	}
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return
	}
	f.SetInt(int64(kerr.SaslAuthenticationFailed.Code))
	_ = c.answer(h, resp)
}
