package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// maxJWKSKeys bounds the keys of one set: an issuer publishes a handful,
// and each key costs a parse when the set is read.
const maxJWKSKeys = 100

// keySet is the verification keys of one reading of the JWKS. It is
// never changed once made.
type keySet struct {
	byKID map[string][]verifyKey
	all   []verifyKey
}

// verifyKey is a public key of the set, ready for use.
type verifyKey struct {
	kid string
	// alg is the key's own alg member: when set, the key checks tokens
	// of that algorithm only.
	alg string
	pub crypto.PublicKey
}

// parseKeySet reads a JWKS document. Keys the gateway cannot use to check
// a signature are left out: encryption keys (use enc, or key_ops without
// verify), symmetric keys (kty
// oct: a published shared secret is no secret), key types the library does
// not know (a set may carry new kinds of keys beside the ones in use). A
// set left with no key is an error.
func parseKeySet(data []byte) (*keySet, error) {
	set, err := jwk.Parse(data, jwk.WithMaxKeys(maxJWKSKeys), jwk.WithStrictKeySetParsing(false))
	if err != nil {
		return nil, fmt.Errorf("cannot read the key set: %v", err)
	}
	ks := &keySet{byKID: map[string][]verifyKey{}}
	var skipped []string
	for i := range set.Len() {
		key, _ := set.Key(i)
		vk, err := toVerifyKey(key)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("keys[%d]: %v", i, err))
			continue
		}
		ks.all = append(ks.all, vk)
		ks.byKID[vk.kid] = append(ks.byKID[vk.kid], vk)
	}
	if len(ks.all) == 0 {
		if len(skipped) == 0 {
			return nil, errors.New("the key set has no keys")
		}
		return nil, fmt.Errorf("the key set has no key that can check a signature (%s)", strings.Join(skipped, "; "))
	}
	return ks, nil
}

// toVerifyKey takes the public part of a key fit to check signatures.
func toVerifyKey(key jwk.Key) (verifyKey, error) {
	kid, _ := key.KeyID()
	if _, ok := key.(jwk.UnsupportedKey); ok {
		return verifyKey{}, fmt.Errorf("key type %q is not supported", key.KeyType().String())
	}
	if use, ok := key.KeyUsage(); ok && use != "sig" {
		return verifyKey{}, fmt.Errorf("use is %q, not sig", use)
	}
	if ops, ok := key.KeyOps(); ok && !slices.Contains(ops, jwk.KeyOpVerify) {
		return verifyKey{}, errors.New("key_ops does not hold verify")
	}
	if _, ok := key.(jwk.SymmetricKey); ok {
		return verifyKey{}, errors.New("a symmetric (oct) key is never used")
	}
	pk, err := key.PublicKey()
	if err != nil {
		return verifyKey{}, fmt.Errorf("has no public key: %v", err)
	}
	var raw any
	if err := jwk.Export(pk, &raw); err != nil {
		return verifyKey{}, fmt.Errorf("cannot be read: %v", err)
	}
	vk := verifyKey{kid: kid, pub: raw}
	if alg, ok := key.Algorithm(); ok {
		vk.alg = alg.String()
	}
	switch raw.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return verifyKey{}, fmt.Errorf("key of type %T cannot check signatures", raw)
	}
	return vk, nil
}

// fits reports whether k may check a signature of algorithm alg: its type
// must be the algorithm's (the curve too, for ECDSA), and its own alg, if
// it has one, must be alg. This is what keeps an RSA public key from ever
// being taken for an HMAC secret, or a P-256 key for ES512.
func (k verifyKey) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return pub.Curve == elliptic.P256()
		case "ES384":
			return pub.Curve == elliptic.P384()
		case "ES512":
			return pub.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA" || alg == "Ed25519"
	}
	return false
}

// lookup finds the key to check a token signed with alg under kid
// (hasKID false: the token names no key). found is false when no key has
// the kid, which may mean the set is out of date; a key that has it but
// does not fit alg is an ErrAlgorithm.
//
// A token without a kid is checked only when exactly one key fits its
// alg: trying every key would let one token cost as many signature checks
// as the set has keys.
func (s *keySet) lookup(kid string, hasKID bool, alg string) (key verifyKey, found bool, err error) {
	if !hasKID {
		var fit []verifyKey
		for _, k := range s.all {
			if k.fits(alg) {
				fit = append(fit, k)
			}
		}
		switch len(fit) {
		case 0:
			return verifyKey{}, false, nil
		case 1:
			return fit[0], true, nil
		}
		return verifyKey{}, true, fmt.Errorf("%w: the token names no key (kid) and %d keys of the set fit %s: have the issuer put kid in the header", ErrUnknownKey, len(fit), alg)
	}
	keys := s.byKID[kid]
	if len(keys) == 0 {
		return verifyKey{}, false, nil
	}
	for _, k := range keys {
		if k.fits(alg) {
			return k, true, nil
		}
	}
	return verifyKey{}, true, fmt.Errorf("%w: key %s does not sign with %s", ErrAlgorithm, quote(kid), alg)
}

// quote shows a value taken from a token in an error: quoted, and cut
// short, so that a token cannot fill logs through it.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
