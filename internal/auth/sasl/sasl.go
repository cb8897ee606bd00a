// Package sasl is the server side of the SASL mechanisms the gateway offers
// Kafka clients: PLAIN and SCRAM-SHA-256/512 against a credential store
// (internal/auth/credstore), OAUTHBEARER against a token validator
// (internal/auth/oauth). A mechanism turns the client's messages into the
// gateway's answers and, at the end, a principal; it knows nothing of Kafka
// framing, which the proxy's authentication stage handles (SaslHandshake
// v0 raw tokens and v1 SaslAuthenticate alike).
//
// Failures never tell an unknown user from a wrong password: both fail with
// ErrAuthFailed after the same exchange (SCRAM answers an unknown user with
// a phantom challenge), so the error a client sees and the number of round
// trips are the same.
package sasl

import (
	"context"
	"errors"
	"time"
)

// Mechanism is a SASL mechanism the gateway offers.
type Mechanism interface {
	// Name is the mechanism's IANA name: PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512, OAUTHBEARER.
	Name() string
	// Start begins one authentication; client is the client's address,
	// for logs and failure budgets.
	Start(ctx context.Context, client string) Exchange
}

// Exchange is one authentication in progress. It is used by one goroutine.
type Exchange interface {
	// Next takes the client's next message and returns the answer to send.
	// done reports that the exchange is over: with err nil the client is
	// authenticated (Result says as whom); with err set it failed, and
	// answer, if not nil, is still sent first where the mechanism says so
	// (OAUTHBEARER's error status). A message after done is an error.
	Next(msg []byte) (answer []byte, done bool, err error)
	// Result is the outcome of an exchange that ended without error.
	Result() Result
}

// Result is who authenticated, and until when.
type Result struct {
	// Principal is the authenticated identity: the user name for PLAIN
	// and SCRAM, the configured claim for OAUTHBEARER.
	Principal string
	// Expiry is when the credential stops being valid (a token's exp);
	// zero when it has none. The session lifetime (KIP-368) is the
	// earlier of it and the configured maximum.
	Expiry time.Time
	// LegacySCRAMNonce: the client sent the SCRAM nonce of librdkafka
	// before 2.6.1, accepted (SCRAM.StrictNonce unset). Logged, so that
	// operators can find clients to upgrade before refusing it.
	LegacySCRAMNonce bool
}

// Errors of an exchange. The proxy answers each with
// SASL_AUTHENTICATION_FAILED and an error message that says no more than
// the error's text.
var (
	// ErrAuthFailed: wrong credentials, or an unknown user; the two are
	// never told apart.
	ErrAuthFailed = errors.New("authentication failed: invalid credentials")
	// ErrMalformed: a message the mechanism cannot read.
	ErrMalformed = errors.New("authentication failed: malformed SASL message")
	// ErrUnavailable: the mechanism could not check the credentials now
	// (a JWKS that cannot be fetched); the client may retry later.
	ErrUnavailable = errors.New("authentication failed: credentials cannot be checked now")
)
