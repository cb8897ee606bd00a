// Package oauth checks the bearer tokens clients authenticate with: JWTs
// signed by an OAuth 2 / OpenID Connect issuer, whose keys the gateway
// reads from the issuer's JWKS URL or from a file. A Validator is the
// token validator of the OAUTHBEARER SASL mechanism (internal/auth/sasl),
// and its errors are that package's errors; it imports nothing else of
// ours. docs/security.md lists the settings and the checks.
//
// The JOSE work (reading key sets, checking signatures, reading claims) is
// lestrrat-go/jwx's. What is trusted is decided here, before the library
// sees the token: the algorithms allowed, the key a token may be checked
// with (only from the configured set, never from the token's own jwk, jku
// or x5u headers), and how often the set may be fetched.
package oauth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jws/jwsbb"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// maxPrincipalBytes bounds the principal a token may name: it ends up in
// ACL matches and log lines.
const maxPrincipalBytes = 1024

// Options are what a Validator needs beyond its Config. The zero value
// takes the defaults.
type Options struct {
	// HTTPClient fetches jwks_url: one with a transport of its own (a
	// private CA, a proxy). Default: a client with Go's default
	// transport. Its timeout and redirect policy are not used:
	// fetch_timeout bounds every fetch, and redirects are refused.
	HTTPClient *http.Client
	// Logger gets a line for every key set read and every one that
	// cannot be. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock tokens are checked against. Default time.Now.
	Now func() time.Time
}

// Validator checks bearer tokens. It is safe for concurrent use.
type Validator struct {
	cfg  Config // with defaults
	algs []string
	src  keySource
	now  func() time.Time
}

// New makes a Validator of cfg. It reads no keys yet: the first token
// checked does, so that an issuer that is down when the gateway starts
// fails the clients that need it, not the gateway.
func New(cfg Config, opts Options) (*Validator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	v := &Validator{cfg: cfg, algs: cfg.Algorithms, now: opts.Now}
	if cfg.JWKSURL != "" {
		v.src = newURLSource(cfg, opts.HTTPClient, opts.Logger, opts.Now)
	} else {
		v.src = newFileSource(cfg, opts.Logger, opts.Now)
	}
	return v, nil
}

// Validate checks token and returns whom it names (the principal claim)
// and until when it is valid (exp). A token is accepted when it is a
// compact JWS signed with an allowed algorithm by a key of the set, its
// iss is the issuer, its aud names a configured audience, its exp has not
// passed, neither its nbf nor its iat is ahead of now (each with the clock
// skew), the principal claim is a non-empty string, and it carries
// required_scope if one is set. Errors are those of errors.go.
func (v *Validator) Validate(ctx context.Context, token string) (principal string, expiry time.Time, err error) {
	payload, err := v.verify(ctx, token)
	if err != nil {
		return "", time.Time{}, err
	}
	tok, err := jwt.ParseInsecure(payload) // the signature over payload was checked by verify
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: the claims cannot be read: %s", ErrInvalidToken, claimsError(err))
	}
	return v.checkClaims(tok)
}

// verify checks the token's signature and returns its payload.
func (v *Validator) verify(ctx context.Context, token string) ([]byte, error) {
	if len(token) > v.cfg.MaxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than max_token_bytes (%d)", ErrTokenTooLarge, len(token), v.cfg.MaxTokenBytes)
	}
	alg, kid, hasKID, err := v.readHeader(token)
	if err != nil {
		return nil, err
	}
	key, err := v.findKey(ctx, alg, kid, hasKID)
	if err != nil {
		return nil, err
	}
	sa, ok := jwa.LookupSignatureAlgorithm(alg)
	if !ok {
		return nil, fmt.Errorf("%w: %s is unknown to the JOSE library", ErrAlgorithm, alg)
	}
	// VerifyCompactFast checks the header's alg against sa once more, and
	// refuses crit and b64 headers, which nothing here understands.
	payload, err := jws.VerifyCompactFast(key.pub, []byte(token), sa)
	if err != nil {
		return nil, fmt.Errorf("%w: the signature does not verify with key %s", ErrSignature, quote(key.kid))
	}
	return payload, nil
}

// readHeader reads the alg and kid of a compact JWS and checks alg is
// allowed.
func (v *Validator) readHeader(token string) (alg, kid string, hasKID bool, err error) {
	hdr, _, _, err := jwsbb.SplitCompactString(token)
	if err != nil {
		if strings.Count(token, ".") == 4 {
			return "", "", false, fmt.Errorf("%w: the token is encrypted (JWE); the gateway takes signed tokens (JWS) only", ErrInvalidToken)
		}
		return "", "", false, fmt.Errorf("%w: not a signed JWT (header.payload.signature)", ErrInvalidToken)
	}
	h := jwsbb.HeaderParseCompact(hdr)
	alg, err = jwsbb.HeaderGetString(h, jws.AlgorithmKey)
	if err != nil {
		return "", "", false, fmt.Errorf("%w: the header has no alg", ErrInvalidToken)
	}
	if !slices.Contains(v.algs, alg) {
		return "", "", false, fmt.Errorf("%w: %s (the algorithms allowed are %s)", ErrAlgorithm, quote(alg), strings.Join(v.algs, ", "))
	}
	if jwsbb.HeaderHas(h, jws.CriticalKey) || jwsbb.HeaderHas(h, "b64") {
		return "", "", false, fmt.Errorf("%w: the header has crit or b64, and no JWS extension is supported", ErrInvalidToken)
	}
	if jwsbb.HeaderHas(h, jws.KeyIDKey) {
		kid, err = jwsbb.HeaderGetString(h, jws.KeyIDKey)
		if err != nil {
			return "", "", false, fmt.Errorf("%w: the header's kid is not a string", ErrInvalidToken)
		}
		hasKID = true
	}
	return alg, kid, hasKID, nil
}

// findKey finds the key the token names, reading the set again (as the
// source allows) when the kid is not in it: the issuer may have rotated.
func (v *Validator) findKey(ctx context.Context, alg, kid string, hasKID bool) (verifyKey, error) {
	set, err := v.src.keys(ctx)
	if err != nil {
		return verifyKey{}, err
	}
	key, found, err := set.lookup(kid, hasKID, alg)
	if err != nil || found {
		return key, err
	}
	again, err := v.src.refetch(ctx, set)
	if err != nil {
		return verifyKey{}, err
	}
	key, found, err = again.lookup(kid, hasKID, alg)
	if err != nil || found {
		return key, err
	}
	if !hasKID {
		return verifyKey{}, fmt.Errorf("%w: the token names no key (kid) and no key of the set fits %s", ErrUnknownKey, alg)
	}
	return verifyKey{}, fmt.Errorf("%w: no key of the set has kid %s", ErrUnknownKey, quote(kid))
}

// checkClaims checks the claims of a token whose signature is good.
func (v *Validator) checkClaims(tok jwt.Token) (string, time.Time, error) {
	now := v.now()
	skew := v.cfg.ClockSkew
	exp, ok := tok.Expiration()
	if !ok {
		return "", time.Time{}, fmt.Errorf("%w: exp is missing: the gateway takes tokens that expire only", ErrClaim)
	}
	if !now.Before(exp.Add(skew)) {
		return "", time.Time{}, fmt.Errorf("%w: at %s (clock skew %s)", ErrExpired, exp.UTC().Format(time.RFC3339), skew)
	}
	if nbf, ok := tok.NotBefore(); ok && now.Add(skew).Before(nbf) {
		return "", time.Time{}, fmt.Errorf("%w: nbf is %s (clock skew %s)", ErrNotYetValid, nbf.UTC().Format(time.RFC3339), skew)
	}
	if iat, ok := tok.IssuedAt(); ok && now.Add(skew).Before(iat) {
		return "", time.Time{}, fmt.Errorf("%w: iat %s is in the future (clock skew %s)", ErrNotYetValid, iat.UTC().Format(time.RFC3339), skew)
	}
	if iss, _ := tok.Issuer(); iss != v.cfg.Issuer {
		return "", time.Time{}, fmt.Errorf("%w: iss is %s, not the configured issuer", ErrIssuer, quote(iss))
	}
	aud, _ := tok.Audience()
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.cfg.Audience, a) }) {
		return "", time.Time{}, fmt.Errorf("%w: aud names none of the configured audiences", ErrAudience)
	}
	principal, err := v.principal(tok)
	if err != nil {
		return "", time.Time{}, err
	}
	if s := v.cfg.RequiredScope; s != "" && !hasScope(tok, s) {
		return "", time.Time{}, fmt.Errorf("%w: the token lacks scope %q", ErrInsufficientScope, s)
	}
	return principal, exp, nil
}

// principal reads the principal claim: a non-empty string of printable
// UTF-8, as it is matched against ACLs and written in logs.
func (v *Validator) principal(tok jwt.Token) (string, error) {
	name := v.cfg.PrincipalClaim
	var raw any
	if err := tok.Get(name, &raw); err != nil {
		return "", fmt.Errorf("%w: the principal claim %q is missing", ErrClaim, name)
	}
	p, ok := raw.(string)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: the principal claim %q is a %T, not a string", ErrClaim, name, raw)
	case p == "":
		return "", fmt.Errorf("%w: the principal claim %q is empty", ErrClaim, name)
	case len(p) > maxPrincipalBytes:
		return "", fmt.Errorf("%w: the principal claim %q is longer than %d bytes", ErrClaim, name, maxPrincipalBytes)
	case !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl):
		return "", fmt.Errorf("%w: the principal claim %q holds control characters or is not UTF-8", ErrClaim, name)
	}
	return p, nil
}

// hasScope reports whether the token carries scope: in scope, a
// space-separated string (RFC 8693, RFC 9068), or in scp, a list or a
// string, as some issuers write it.
func hasScope(tok jwt.Token, scope string) bool {
	for _, claim := range []string{"scope", "scp"} {
		var raw any
		if tok.Get(claim, &raw) != nil {
			continue
		}
		switch v := raw.(type) {
		case string:
			if slices.Contains(strings.Fields(v), scope) {
				return true
			}
		case []any:
			if slices.Contains(v, any(scope)) {
				return true
			}
		case []string:
			if slices.Contains(v, scope) {
				return true
			}
		}
	}
	return false
}

// claimsError is the cause of the library's failure to read claims,
// without the "failed to parse token" its layers each add, and cut short:
// it may quote a claim's value.
func claimsError(err error) string {
	const layer, max = "failed to parse token: ", 200
	msg := err.Error()
	if i := strings.LastIndex(msg, layer); i >= 0 {
		msg = msg[i+len(layer):]
	}
	if len(msg) > max {
		msg = msg[:max] + "..."
	}
	return msg
}
