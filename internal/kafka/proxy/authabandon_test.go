package proxy

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/auth/sasl"
	"github.com/straitgw/strait/internal/testkit"
)

// refusingTwoRounds is a mechanism that answers the client's first message
// with an error status and fails at its second, as OAUTHBEARER does with a
// refused token.
type refusingTwoRounds struct{}

func (refusingTwoRounds) Name() string { return "TWO-ROUNDS" }

func (refusingTwoRounds) Start(context.Context, string) sasl.Exchange {
	return &refusingTwoRoundsExchange{}
}

type refusingTwoRoundsExchange struct{ messages int }

func (e *refusingTwoRoundsExchange) Next([]byte) ([]byte, bool, error) {
	if e.messages++; e.messages == 1 {
		return []byte(`{"status":"invalid_token"}`), false, nil
	}
	return nil, true, sasl.ErrAuthFailed
}

func (*refusingTwoRoundsExchange) Result() sasl.Result { return sasl.Result{} }

// TestSASLAbandonedExchange: a client that sends another request instead of
// the next message of its exchange has failed to authenticate (kafkajs
// 2.2.4 takes OAUTHBEARER's error status for success and sends Metadata):
// the failure is logged as one, counted, and waits the failure delay before
// the connection closes, as any other failure does.
func TestSASLAbandonedExchange(t *testing.T) {
	const delay = 300 * time.Millisecond
	logs := &testkit.SyncBuffer{}
	g := startGateway(t, func(o *Options) {
		o.SASL = &SASL{Mechanisms: []sasl.Mechanism{refusingTwoRounds{}}, FailureDelay: delay}
		o.Log = slog.New(slog.NewTextHandler(logs, nil))
	})
	c := dialRaw(t, g.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "TWO-ROUNDS"
	if r := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", r.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("n,,\x01auth=Bearer expired\x01\x01")
	if r := c.roundTrip(au, 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 || len(r.SASLAuthBytes) == 0 {
		t.Fatalf("first message: error %d, answer %q; want the error status", r.ErrorCode, r.SASLAuthBytes)
	}

	start := time.Now()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 6
	c.send(md, 3)
	c.expectClosed() // fails the test if the connection stays open
	if took := time.Since(start); took < delay {
		t.Errorf("the connection closed after %s, before the failure delay of %s", took, delay)
	}
	if n := g.metric("strait_kafka_authentications_total", "mechanism", "TWO-ROUNDS", "outcome", "failure"); n != 1 {
		t.Errorf("%v failed authentications counted, want 1", n)
	}
	log := logs.String()
	if !strings.Contains(log, "client failed to authenticate") || !strings.Contains(log, "Metadata") {
		t.Errorf("the log does not say the client failed to authenticate by sending Metadata:\n%s", log)
	}
	if strings.Contains(log, "before authenticating") {
		t.Errorf("the log says the client sent a request before authenticating, as if it had not tried:\n%s", log)
	}
}
