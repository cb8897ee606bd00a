package sasl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// TokenValidator checks a bearer token (internal/auth/oauth's Validator is
// one). Its error wraps ErrUnavailable when the token cannot be checked
// now, ErrInsufficientScope when the token is good but lacks the scope the
// gateway requires; any other error refuses the token, and its text (never
// the token) tells the client why.
type TokenValidator interface {
	Validate(ctx context.Context, token string) (principal string, expiry time.Time, err error)
}

// ErrInsufficientScope is an ErrAuthFailed for a token that is good but
// lacks the scope the gateway requires: OAUTHBEARER answers it with the
// insufficient_scope status instead of invalid_token.
var ErrInsufficientScope = fmt.Errorf("%w: insufficient scope", ErrAuthFailed)

// Bounds of an OAUTHBEARER client message. A token may be up to 64 KiB
// (internal/auth/oauth's largest max_token_bytes); the rest is room for
// the header, host, port and extensions.
const (
	maxOAuthBearerMessage = 72 << 10
	maxOAuthBearerPairs   = 32
)

// OAuthBearerOptions say what the error status of a failed OAUTHBEARER
// exchange tells the client beyond the status itself (RFC 7628 §3.2.2).
// Both are optional.
type OAuthBearerOptions struct {
	// Scope is a scope that is enough to be let in, sent with every
	// error status.
	Scope string
	// OpenIDConfiguration is the URL of the issuer's OpenID discovery
	// document, where a client may learn how to get a token.
	OpenIDConfiguration string
}

// OAuthBearer is the OAUTHBEARER mechanism (RFC 7628), as Kafka uses it:
// the client's first message carries a bearer token, which validator
// checks. A good token ends the exchange at once with an empty answer. A
// refused one is answered with a JSON error status, which the client
// acknowledges with a single %x01 before the exchange fails with
// ErrAuthFailed: the two rounds a Kafka broker makes, which franz-go,
// librdkafka and the Java client all expect (franz-go and librdkafka send
// the %x01 and then report the failure; neither waits for more). A token
// that cannot be checked now, or a message that cannot be read, fails at
// once, with ErrUnavailable and ErrMalformed.
type OAuthBearer struct {
	validator TokenValidator
	invalid   []byte // the error status of a refused token
	scope     []byte // the error status of a token that lacks the scope
}

// NewOAuthBearer makes the mechanism.
func NewOAuthBearer(validator TokenValidator, opts OAuthBearerOptions) *OAuthBearer {
	return &OAuthBearer{
		validator: validator,
		invalid:   oauthBearerStatus("invalid_token", opts),
		scope:     oauthBearerStatus("insufficient_scope", opts),
	}
}

func oauthBearerStatus(status string, opts OAuthBearerOptions) []byte {
	// Strings always marshal.
	b, _ := json.Marshal(struct {
		Status              string `json:"status"`
		Scope               string `json:"scope,omitempty"`
		OpenIDConfiguration string `json:"openid-configuration,omitempty"`
	}{status, opts.Scope, opts.OpenIDConfiguration})
	return b
}

// Name is OAUTHBEARER.
func (m *OAuthBearer) Name() string { return "OAUTHBEARER" }

// Start begins one exchange.
func (m *OAuthBearer) Start(ctx context.Context, client string) Exchange {
	return &oauthBearerExchange{m: m, ctx: ctx}
}

// Steps of an exchange.
const (
	oauthBearerFirst   = iota // waiting for the client's initial response
	oauthBearerRefused        // the error status was sent; waiting for the client's %x01
	oauthBearerDone
)

type oauthBearerExchange struct {
	m       *OAuthBearer
	ctx     context.Context
	step    int
	refusal error // why the token was refused, once step is oauthBearerRefused
	result  Result
}

func (e *oauthBearerExchange) Next(msg []byte) ([]byte, bool, error) {
	switch e.step {
	case oauthBearerFirst:
		return e.first(msg)
	case oauthBearerRefused:
		// RFC 7628 asks the client for a single %x01 here; whatever it
		// sends, the token was refused, and that is the error.
		e.step = oauthBearerDone
		return nil, true, e.refusal
	}
	return nil, true, fmt.Errorf("%w: OAUTHBEARER: a message after the exchange ended", ErrMalformed)
}

func (e *oauthBearerExchange) first(msg []byte) ([]byte, bool, error) {
	e.step = oauthBearerDone
	m, err := parseOAuthBearerMessage(msg)
	if err != nil {
		return nil, true, &oauthBearerError{ErrMalformed, err}
	}
	principal, expiry, err := e.m.validator.Validate(e.ctx, m.token)
	switch {
	case errors.Is(err, ErrUnavailable):
		return nil, true, &oauthBearerError{ErrUnavailable, err}
	case err != nil:
		return e.refuse(err)
	case m.authzid != "" && m.authzid != principal:
		return e.refuse(errors.New("the authorization id (a=) is not the token's principal: leave it out, or set it to the principal"))
	}
	e.result = Result{Principal: principal, Expiry: expiry}
	return []byte{}, true, nil
}

// refuse answers with the error status and waits for the client's
// acknowledgement.
func (e *oauthBearerExchange) refuse(why error) ([]byte, bool, error) {
	e.step = oauthBearerRefused
	e.refusal = &oauthBearerError{ErrAuthFailed, why}
	if errors.Is(why, ErrInsufficientScope) {
		return e.m.scope, false, nil
	}
	return e.m.invalid, false, nil
}

func (e *oauthBearerExchange) Result() Result { return e.result }

// oauthBearerError is an error of the exchange: its kind (ErrAuthFailed,
// ErrMalformed, ErrUnavailable) first, then why.
type oauthBearerError struct {
	kind error
	why  error
}

func (e *oauthBearerError) Error() string { return e.kind.Error() + ": " + e.why.Error() }

func (e *oauthBearerError) Unwrap() []error { return []error{e.kind, e.why} }

// oauthBearerMessage is what a client's initial response holds.
type oauthBearerMessage struct {
	authzid    string // the a= of the GS2 header; empty if absent
	token      string
	host, port string
	extensions map[string]string // every other key, Kafka's SASL extensions among them
}

// parseOAuthBearerMessage reads a client's initial response (RFC 7628
// §3.1): a GS2 header, then %x01, key=value pairs each ended by %x01, and
// a last %x01:
//
//	n,a=alice,^Aauth=Bearer eyJ...^Ahost=gw^Aport=9092^A^A
//
// auth must hold a bearer token; keys it does not know are kept as
// extensions, as Kafka clients send them. Sizes and counts are bounded.
func parseOAuthBearerMessage(msg []byte) (oauthBearerMessage, error) {
	var m oauthBearerMessage
	if len(msg) > maxOAuthBearerMessage {
		return m, fmt.Errorf("the message has %d bytes, more than %d", len(msg), maxOAuthBearerMessage)
	}
	rest, err := m.readGS2Header(msg)
	if err != nil {
		return m, err
	}
	// rest is kvsep *kvpair kvsep, and every kvpair ends with kvsep.
	if len(rest) < 2 || rest[0] != 0x01 || !bytes.HasSuffix(rest, []byte{0x01, 0x01}) {
		return m, errors.New("the key=value pairs after the GS2 header are not framed by %x01 ... %x01%x01")
	}
	var pairs [][]byte
	if body := rest[1 : len(rest)-1]; len(body) > 0 {
		pairs = bytes.Split(body[:len(body)-1], []byte{0x01})
	}
	if len(pairs) > maxOAuthBearerPairs {
		return m, fmt.Errorf("the message has %d key=value pairs, more than %d", len(pairs), maxOAuthBearerPairs)
	}
	seen := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		if err := m.readPair(p, seen); err != nil {
			return m, err
		}
	}
	if m.token == "" {
		return m, errors.New("the message has no auth=Bearer <token>")
	}
	return m, nil
}

// readGS2Header reads "n,," or "n,a=authzid," (y for n is allowed too:
// the client could have bound a channel, and did not) and returns what
// follows.
func (m *oauthBearerMessage) readGS2Header(msg []byte) ([]byte, error) {
	flag, rest, ok := bytes.Cut(msg, []byte{','})
	if !ok {
		return nil, errors.New("the message does not start with a GS2 header such as n,,")
	}
	switch string(flag) {
	case "n", "y":
	default:
		if bytes.HasPrefix(flag, []byte("p=")) {
			return nil, errors.New("channel binding (p=) is not part of OAUTHBEARER: start with n,,")
		}
		return nil, errors.New("the GS2 header does not start with n or y: start with n,,")
	}
	authz, rest, ok := bytes.Cut(rest, []byte{','})
	if !ok {
		return nil, errors.New("the GS2 header is not ended by a comma: start with n,, or n,a=<principal>,")
	}
	if len(authz) == 0 {
		return rest, nil
	}
	name, ok := bytes.CutPrefix(authz, []byte("a="))
	if !ok {
		return nil, errors.New("the GS2 header's second field is not a=<authorization id>")
	}
	id, err := decodeOAuthBearerAuthzID(name)
	if err != nil {
		return nil, fmt.Errorf("the authorization id (a=) %v", err)
	}
	m.authzid = id
	return rest, nil
}

// decodeOAuthBearerAuthzID undoes the escaping of RFC 5801's saslname: "=2C" is a
// comma and "=3D" an equals sign, which may appear no other way.
func decodeOAuthBearerAuthzID(b []byte) (string, error) {
	if len(b) == 0 {
		return "", errors.New("is empty")
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] != '=' {
			sb.WriteByte(b[i])
			continue
		}
		switch {
		case bytes.HasPrefix(b[i:], []byte("=2C")):
			sb.WriteByte(',')
		case bytes.HasPrefix(b[i:], []byte("=3D")):
			sb.WriteByte('=')
		default:
			return "", errors.New("has an = that is neither =2C nor =3D")
		}
		i += 2
	}
	s := sb.String()
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		return "", errors.New("is not UTF-8 text")
	}
	return s, nil
}

// readPair reads one key=value pair: key = 1*ALPHA, value = *(VCHAR / SP /
// HTAB / CR / LF).
func (m *oauthBearerMessage) readPair(p []byte, seen map[string]bool) error {
	key, value, ok := bytes.Cut(p, []byte{'='})
	if !ok || len(key) == 0 {
		return errors.New("a key=value pair has no key")
	}
	for _, c := range key {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return errors.New("a key holds characters other than letters")
		}
	}
	for _, c := range value {
		if !(0x21 <= c && c <= 0x7e || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			return fmt.Errorf("the value of %q holds a character that is not printable ASCII", key)
		}
	}
	k, v := string(key), string(value)
	if seen[k] {
		return fmt.Errorf("the key %q appears twice", k)
	}
	seen[k] = true
	switch k {
	case "auth":
		token, err := readOAuthBearerAuth(v)
		if err != nil {
			return err
		}
		m.token = token
	case "host":
		m.host = v
	case "port":
		m.port = v
	default:
		if m.extensions == nil {
			m.extensions = map[string]string{}
		}
		m.extensions[k] = v
	}
	return nil
}

// readOAuthBearerAuth reads "Bearer <token>" (the scheme in any case), where the
// token is RFC 6750's b64token.
func readOAuthBearerAuth(v string) (string, error) {
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New("auth does not hold Bearer <token>")
	}
	body := strings.TrimRight(token, "=")
	if body == "" {
		return "", errors.New("auth holds an empty token")
	}
	for _, c := range []byte(body) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return "", errors.New("auth holds a token with characters a bearer token cannot have")
		}
	}
	return token, nil
}

var _ Mechanism = (*OAuthBearer)(nil)
