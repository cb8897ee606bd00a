package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
)

// authenticateUpstream authenticates a broker connection with m (the
// gateway's own identity, Target.SASL, or the one a client principal maps
// to), while no client request is in flight on it: SaslHandshake v1, then
// SaslAuthenticate rounds until the mechanism is done. It serves a new
// connection and a re-authentication alike (KIP-368 lets an authenticated
// connection handshake again). The mechanisms are franz-go's (PLAIN, SCRAM,
// OAUTHBEARER), the same the gateway's side client uses. It returns the
// session lifetime the broker set (0: unbounded).
func (v *VirtualCluster) authenticateUpstream(ctx context.Context, c net.Conn, addr string, m kafkasasl.Mechanism) (time.Duration, error) {
	deadline := time.Now().Add(v.opts.Target.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strait-" + v.opts.Name))
	corr := int32(0)
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := c.Write(format.AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		var sz [4]byte
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(sz[:])
		if n < 4 || n > 1<<20 {
			return fmt.Errorf("answer of %d bytes", n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(c, b); err != nil {
			return err
		}
		if got := int32(binary.BigEndian.Uint32(b)); got != corr {
			return fmt.Errorf("answer with correlation id %d, want %d", got, corr)
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(b[4:])
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, m.Name()
	hr := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(hs, hr); err != nil {
		return 0, fmt.Errorf("SASL handshake with broker %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(hr.ErrorCode); err != nil {
		return 0, fmt.Errorf("broker %s refused SASL mechanism %s (it offers %v): %w", addr, m.Name(), hr.SupportedMechanisms, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	session, msg, err := m.Authenticate(ctx, host)
	if err != nil {
		return 0, fmt.Errorf("SASL %s toward broker %s: %w", m.Name(), addr, err)
	}
	for range 8 { // no mechanism takes more than a few rounds
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, msg
		ar := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(au, ar); err != nil {
			if errors.Is(err, io.EOF) {
				// Brokers close the connection on bad credentials
				// rather than answer (kfake does; Kafka answers
				// first, then closes).
				return 0, fmt.Errorf("broker %s closed the connection while the gateway authenticated with %s: its credentials were refused: %w", addr, m.Name(), err)
			}
			return 0, fmt.Errorf("SASL authenticate with broker %s: %w", addr, err)
		}
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			detail := ""
			if ar.ErrorMessage != nil {
				detail = ": " + *ar.ErrorMessage
			}
			return 0, fmt.Errorf("broker %s refused the %s credentials%s: %w", addr, m.Name(), detail, err)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return 0, fmt.Errorf("SASL %s toward broker %s: %w", m.Name(), addr, err)
		}
		if done {
			return time.Duration(max(ar.SessionLifetimeMillis, 0)) * time.Millisecond, nil
		}
		msg = next
	}
	return 0, fmt.Errorf("SASL %s toward broker %s did not finish in 8 rounds", m.Name(), addr)
}

// UpstreamIdentity maps client principals to credentials of their own
// toward the brokers, so that the cluster's ACLs, quotas and audit log see
// the real user rather than the gateway. A principal's broker connections
// authenticate with its entry; one without an entry uses the gateway's
// identity (Target.SASL), or is refused when RefuseUnmapped is set.
type UpstreamIdentity struct {
	Principals     map[string]kafkasasl.Mechanism
	RefuseUnmapped bool
}

// errUnmapped refuses a principal that has no upstream credentials when
// unmapped principals are refused.
var errUnmapped = errors.New("the principal has no upstream credentials of its own and the virtual cluster refuses unmapped principals")

// upstreamMechanism is the mechanism a principal's broker connections
// authenticate with: its own, the gateway's (nil when the gateway has none),
// or errUnmapped.
func (v *VirtualCluster) upstreamMechanism(principal string) (kafkasasl.Mechanism, error) {
	id := v.opts.UpstreamIdentity
	if id == nil {
		return v.opts.Target.SASL, nil
	}
	if m, ok := id.Principals[principal]; ok {
		return m, nil
	}
	if id.RefuseUnmapped {
		return nil, errUnmapped
	}
	return v.opts.Target.SASL, nil
}

// reauthAt is when the gateway renews a broker session of lifetime begun
// now: a random point between 85% and 95% of the lifetime (the Java
// client's choice too), so connections opened together do not all renew
// together. Zero for an unbounded session.
func reauthAt(now time.Time, lifetime time.Duration) time.Time {
	if lifetime <= 0 {
		return time.Time{}
	}
	frac := 0.85 + 0.1*rand.Float64()
	return now.Add(time.Duration(float64(lifetime) * frac))
}

// authenticateBroker authenticates the connection's broker side as m once
// every request already sent to the broker has been answered: it is how a
// SASL-terminated client's connection takes on the principal's own
// credentials, and how a broker session is renewed (KIP-368). The
// responder is parked on the pipeline meanwhile, so the broker socket is
// this goroutine's for the exchange.
func (c *conn) authenticateBroker(m kafkasasl.Mechanism, why string) error {
	if err := c.quiesce(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.fc.Context(), c.v.opts.Target.RequestTimeout)
	defer cancel()
	lifetime, err := c.v.authenticateUpstream(ctx, c.up, c.upAddr, m)
	// The exchange cleared the broker socket's deadlines: arm them anew.
	c.writeArmed = time.Time{}
	if err != nil {
		c.v.m.err(errUpstreamAuth)
		return fmt.Errorf("%s: %w", why, err)
	}
	c.upMech, c.upReauth = m, reauthAt(time.Now(), lifetime)
	c.log.Debug("broker connection authenticated", "why", why, "mechanism", m.Name(), "session_lifetime", lifetime)
	return nil
}

// quiesce waits until the broker has answered every request sent on the
// connection and the responder has taken each answer: it flushes what is
// buffered and queues a barrier behind it.
func (c *conn) quiesce() error {
	if err := c.uw.Flush(); err != nil {
		return c.upstreamWriteErr(err)
	}
	done := make(chan struct{})
	if err := c.enqueue(pending{barrier: done}); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-c.done:
		return errConnClosed
	}
}

// renewBrokerSession re-authenticates the broker side when its session is
// due (KIP-368): a broker closes a connection whose session ended at its
// next request, which would end the client's connection too.
func (c *conn) renewBrokerSession() error {
	if c.upReauth.IsZero() || time.Now().Before(c.upReauth) {
		return nil
	}
	if err := c.authenticateBroker(c.upMech, "renewing the broker session (KIP-368)"); err != nil {
		return err
	}
	c.v.m.vec.UpstreamReauths.WithLabelValues(c.v.m.vc).Inc()
	return nil
}
