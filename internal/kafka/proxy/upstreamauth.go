package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authenticateUpstream authenticates a new broker connection as the
// gateway (Target.SASL), before any client request goes over it:
// SaslHandshake v1, then SaslAuthenticate rounds until the mechanism is
// done. The mechanisms are franz-go's (PLAIN, SCRAM, OAUTHBEARER), the same
// the gateway's side client uses.
func (v *VirtualCluster) authenticateUpstream(ctx context.Context, c net.Conn, addr string) error {
	m := v.opts.Target.SASL
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
		return fmt.Errorf("SASL handshake with broker %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(hr.ErrorCode); err != nil {
		return fmt.Errorf("broker %s refused SASL mechanism %s (it offers %v): %w", addr, m.Name(), hr.SupportedMechanisms, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	session, msg, err := m.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("SASL %s toward broker %s: %w", m.Name(), addr, err)
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
				return fmt.Errorf("broker %s closed the connection while the gateway authenticated with %s: its credentials were refused: %w", addr, m.Name(), err)
			}
			return fmt.Errorf("SASL authenticate with broker %s: %w", addr, err)
		}
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			detail := ""
			if ar.ErrorMessage != nil {
				detail = ": " + *ar.ErrorMessage
			}
			return fmt.Errorf("broker %s refused the gateway's %s credentials%s: %w", addr, m.Name(), detail, err)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s toward broker %s: %w", m.Name(), addr, err)
		}
		if done {
			if ar.SessionLifetimeMillis > 0 && v.log != nil {
				// The gateway does not re-authenticate its broker
				// connections yet: say so where it will matter.
				v.log.Warn("the broker bounds the gateway's SASL sessions (connections.max.reauth.ms); connections it closes at the end of a session end their client's connection too",
					"broker", addr, "session_lifetime", time.Duration(ar.SessionLifetimeMillis)*time.Millisecond)
			}
			return nil
		}
		msg = next
	}
	return fmt.Errorf("SASL %s toward broker %s did not finish in 8 rounds", m.Name(), addr)
}
