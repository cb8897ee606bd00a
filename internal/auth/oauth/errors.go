package oauth

import "github.com/straitgw/strait/internal/auth/sasl"

// kind is one kind of failure. Its text is its own only: the SASL error it
// belongs to (its parent) is found with errors.Is, not read in the
// message, so that an error reads "token expired: ..." rather than
// repeating the SASL text the mechanism adds anyway.
type kind struct {
	text   string
	parent error
}

func (k *kind) Error() string { return k.text }
func (k *kind) Unwrap() error { return k.parent }

// Errors of Validate. Every one is a refusal (errors.Is(err,
// sasl.ErrAuthFailed): ErrInvalidToken and the kinds under it, and
// ErrInsufficientScope) or ErrJWKSUnavailable (the token cannot be checked
// now: errors.Is(err, sasl.ErrUnavailable)). The returned error wraps the
// most precise kind and says more; it never holds the token.
var (
	// ErrInvalidToken: the token is refused. The kinds below are
	// ErrInvalidTokens that say why; a token that is not a signed JWT at
	// all is an ErrInvalidToken only.
	ErrInvalidToken = &kind{"invalid token", sasl.ErrAuthFailed}
	// ErrTokenTooLarge: the token is longer than max_token_bytes.
	ErrTokenTooLarge = &kind{"token too large", ErrInvalidToken}
	// ErrAlgorithm: the token's alg is not in algorithms, or does not fit
	// the key its kid names.
	ErrAlgorithm = &kind{"signature algorithm not allowed", ErrInvalidToken}
	// ErrUnknownKey: no key of the JWKS has the token's kid, even after
	// the JWKS was fetched again.
	ErrUnknownKey = &kind{"unknown key id", ErrInvalidToken}
	// ErrSignature: the signature does not verify with the key.
	ErrSignature = &kind{"bad signature", ErrInvalidToken}
	// ErrExpired: exp has passed, clock skew included.
	ErrExpired = &kind{"token expired", ErrInvalidToken}
	// ErrNotYetValid: nbf, or iat, is ahead of now by more than the
	// clock skew.
	ErrNotYetValid = &kind{"token not yet valid", ErrInvalidToken}
	// ErrIssuer: iss is not the configured issuer.
	ErrIssuer = &kind{"wrong issuer", ErrInvalidToken}
	// ErrAudience: aud names none of the configured audiences.
	ErrAudience = &kind{"wrong audience", ErrInvalidToken}
	// ErrClaim: a claim that must be there is missing or of the wrong
	// type: exp, or the principal claim.
	ErrClaim = &kind{"missing or invalid claim", ErrInvalidToken}
	// ErrInsufficientScope: the token is valid but lacks
	// required_scope. It is also a sasl.ErrInsufficientScope, so that
	// the OAUTHBEARER mechanism answers insufficient_scope.
	ErrInsufficientScope = &kind{"insufficient scope", sasl.ErrInsufficientScope}

	// ErrJWKSUnavailable: the keys cannot be had now (the JWKS URL does
	// not answer, answers an error, or serves a set that cannot be read;
	// the file cannot be read), and no earlier copy is there to use.
	ErrJWKSUnavailable = &kind{"JWKS unavailable", sasl.ErrUnavailable}
)
