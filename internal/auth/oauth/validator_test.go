package oauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/straitgw/strait/internal/auth/sasl"
)

var ctx = context.Background()

func TestValidTokens(t *testing.T) {
	ps := rsaKey()
	ps.kid, ps.alg = "rsa-ps", "PS256"
	ed25519Alg := edKey()
	ed25519Alg.kid, ed25519Alg.alg = "ed-2", "Ed25519"
	keys := []testKey{rsaKey(), ecKey(), edKey(), ps, ed25519Alg}
	v, _, _ := served(t, keys...)
	for _, k := range keys {
		t.Run(k.kid+"/"+k.alg, func(t *testing.T) {
			principal, exp, err := v.Validate(ctx, sign(t, k, goodClaims()))
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if principal != "alice" {
				t.Errorf("principal %q, want alice", principal)
			}
			if want := testNow.Add(time.Hour); !exp.Equal(want) {
				t.Errorf("expiry %s, want %s", exp, want)
			}
		})
	}
}

// A token the JOSE library itself signs is accepted: the tests' own
// signing is no private dialect.
func TestTokenSignedByTheLibrary(t *testing.T) {
	v, _, _ := served(t, ecKey())
	priv, err := jwk.Import(ecPriv())
	must(t, err)
	must(t, priv.Set(jwk.KeyIDKey, "ec-1"))
	tok, err := jwt.NewBuilder().Issuer(testIssuer).Audience([]string{"kafka"}).Subject("bob").
		Expiration(testNow.Add(time.Minute)).Build()
	must(t, err)
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), priv))
	must(t, err)
	principal, _, err := v.Validate(ctx, string(signed))
	if err != nil || principal != "bob" {
		t.Fatalf("Validate = %q, %v; want bob, nil", principal, err)
	}
}

func TestClaims(t *testing.T) {
	k := rsaKey()
	skew := DefaultClockSkew
	tests := []struct {
		name   string
		claims claims
		want   error // nil: accepted
	}{
		{"expired", goodClaims().with("exp", testNow.Add(-skew-time.Second).Unix()), ErrExpired},
		{"expired at the edge of the skew", goodClaims().with("exp", testNow.Add(-skew).Unix()), ErrExpired},
		{"expired within the skew", goodClaims().with("exp", testNow.Add(-skew+time.Second).Unix()), nil},
		{"no exp", goodClaims().with("exp", nil), ErrClaim},
		{"not yet valid", goodClaims().with("nbf", testNow.Add(skew+time.Second).Unix()), ErrNotYetValid},
		{"nbf within the skew", goodClaims().with("nbf", testNow.Add(skew-time.Second).Unix()), nil},
		{"no nbf, no iat", goodClaims().with("nbf", nil, "iat", nil), nil},
		{"issued in the future", goodClaims().with("iat", testNow.Add(skew+time.Second).Unix()), ErrNotYetValid},
		{"wrong issuer", goodClaims().with("iss", "https://evil.test"), ErrIssuer},
		{"issuer with a trailing slash", goodClaims().with("iss", testIssuer+"/"), ErrIssuer},
		{"no issuer", goodClaims().with("iss", nil), ErrIssuer},
		{"wrong audience", goodClaims().with("aud", []string{"other"}), ErrAudience},
		{"audience as a string", goodClaims().with("aud", "kafka"), nil},
		{"no audience", goodClaims().with("aud", nil), ErrAudience},
		{"no principal", goodClaims().with("sub", nil), ErrClaim},
		{"empty principal", goodClaims().with("sub", ""), ErrClaim},
		{"sub not a string", goodClaims().with("sub", 42), ErrInvalidToken},
		{"principal with a newline", goodClaims().with("sub", "alice\nadmin"), ErrClaim},
		{"principal too long", goodClaims().with("sub", strings.Repeat("a", maxPrincipalBytes+1)), ErrClaim},
		{"exp not a number", goodClaims().with("exp", "tomorrow"), ErrInvalidToken},
	}
	v, _, _ := served(t, k)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token := sign(t, k, tc.claims)
			_, _, err := v.Validate(ctx, token)
			checkErr(t, err, tc.want, token)
		})
	}
}

// checkErr checks err is want (nil: no error), is a refusal, and does not
// show the token.
func checkErr(t *testing.T, err, want error, token string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Validate: %v, want success", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("Validate: %v, want %v", err, want)
	}
	if !errors.Is(err, sasl.ErrAuthFailed) || errors.Is(err, sasl.ErrUnavailable) {
		t.Errorf("%v is not a refusal (sasl.ErrAuthFailed only)", err)
	}
	parts := strings.Split(token, ".")
	for _, p := range parts {
		if len(p) > 8 && strings.Contains(err.Error(), p) {
			t.Errorf("error %q shows part of the token", err)
		}
	}
}

func TestPrincipalClaimAndScope(t *testing.T) {
	k := ecKey()
	srv := newJWKSServer(t, jwksOf(t, k))
	cfg := baseConfig(srv.URL)
	cfg.PrincipalClaim = "preferred_username"
	cfg.RequiredScope = "kafka"
	v := newValidator(t, cfg, newClock())
	base := goodClaims().with("preferred_username", "carol")
	tests := []struct {
		name   string
		claims claims
		want   error
	}{
		{"scope string", base.with("scope", "openid kafka profile"), nil},
		{"scp list", base.with("scp", []string{"read", "kafka"}), nil},
		{"scp string", base.with("scp", "kafka"), nil},
		{"scope missing", base, ErrInsufficientScope},
		{"other scopes", base.with("scope", "openid kafkaesque"), ErrInsufficientScope},
		{"principal claim missing", goodClaims().with("scope", "kafka"), ErrClaim},
		{"principal claim not a string", base.with("scope", "kafka", "preferred_username", 42), ErrClaim},
		{"principal claim a list", base.with("scope", "kafka", "preferred_username", []string{"carol"}), ErrClaim},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token := sign(t, k, tc.claims)
			principal, _, err := v.Validate(ctx, token)
			checkErr(t, err, tc.want, token)
			if tc.want == nil && principal != "carol" {
				t.Errorf("principal %q, want carol (preferred_username, not sub)", principal)
			}
			if errors.Is(tc.want, ErrInsufficientScope) && !errors.Is(err, sasl.ErrInsufficientScope) {
				t.Errorf("%v is not a sasl.ErrInsufficientScope", err)
			}
		})
	}
}

func TestSignatureAndAlgorithm(t *testing.T) {
	rk, ek := rsaKey(), ecKey()
	v, _, _ := served(t, rk, ek)
	good := sign(t, rk, goodClaims())
	parts := strings.Split(good, ".")
	pubDER, err := x509.MarshalPKIXPublicKey(rsaPriv().Public())
	must(t, err)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	tampered := []byte(parts[2])
	tampered[10] ^= 1
	if tampered[10] == '.' {
		tampered[10] = 'A'
	}
	otherPayload := b64JSON(t, goodClaims().with("sub", "admin"))

	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"tampered signature", parts[0] + "." + parts[1] + "." + string(tampered), ErrSignature},
		{"payload swapped", parts[0] + "." + otherPayload + "." + parts[2], ErrSignature},
		{"signature stripped", parts[0] + "." + parts[1] + ".", ErrSignature},
		{"alg none", b64JSON(t, map[string]any{"alg": "none", "kid": "rsa-1"}) + "." + parts[1] + ".", ErrAlgorithm},
		{"alg None", b64JSON(t, map[string]any{"alg": "None"}) + "." + parts[1] + ".", ErrAlgorithm},
		// The classic confusion: the RSA public key, which anyone can
		// have, used as an HMAC secret.
		{"HS256 with the public key PEM as secret", hs256(t, "rsa-1", pubPEM, goodClaims()), ErrAlgorithm},
		{"HS256 with the public key DER as secret", hs256(t, "rsa-1", pubDER, goodClaims()), ErrAlgorithm},
		{"HS256 with the JWKS as secret", hs256(t, "rsa-1", jwksOf(t, rk), goodClaims()), ErrAlgorithm},
		{"ES256 header on the RSA key", signWithHeader(t, ek, map[string]any{"alg": "ES256", "kid": "rsa-1"}, goodClaims()), ErrAlgorithm},
		{"RS256 signature labelled PS256", relabel(t, rk, "PS256"), ErrSignature},
		{"signed by another key under a known kid", signWithHeader(t, rsaKey2(), map[string]any{"alg": "RS256", "kid": "rsa-1"}, goodClaims()), ErrSignature},
		{"no alg", b64JSON(t, map[string]any{"kid": "rsa-1"}) + "." + parts[1] + "." + parts[2], ErrInvalidToken},
		{"kid not a string", signWithHeader(t, rk, map[string]any{"alg": "RS256", "kid": 7}, goodClaims()), ErrInvalidToken},
		{"crit header", signWithHeader(t, rk, map[string]any{"alg": "RS256", "kid": "rsa-1", "crit": []string{"exp"}, "exp": 1}, goodClaims()), ErrInvalidToken},
		{"b64 header", signWithHeader(t, rk, map[string]any{"alg": "RS256", "kid": "rsa-1", "b64": true}, goodClaims()), ErrInvalidToken},
		{"embedded jwk is not trusted", signWithHeader(t, rsaKey2(), map[string]any{"alg": "RS256", "kid": "rsa-1", "jwk": jwkJSON(t, rsaKey2())}, goodClaims()), ErrSignature},
		{"not a JWT", "hello", ErrInvalidToken},
		{"empty", "", ErrInvalidToken},
		{"JWE", "a.b.c.d.e", ErrInvalidToken},
		{"header not base64", "!!!." + parts[1] + "." + parts[2], ErrInvalidToken},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("{")) + "." + parts[1] + "." + parts[2], ErrInvalidToken},
		{"payload not JSON", signRaw(t, rk, "not json"), ErrInvalidToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := v.Validate(ctx, tc.token)
			checkErr(t, err, tc.want, tc.token)
		})
	}
}

func jwkJSON(t testing.TB, k testKey) map[string]any {
	var set struct{ Keys []map[string]any }
	must(t, json.Unmarshal(jwksOf(t, k), &set))
	return set.Keys[0]
}

// relabel signs good claims with k's own algorithm under a header that
// names alg.
func relabel(t testing.TB, k testKey, alg string) string {
	input := b64JSON(t, map[string]any{"alg": alg, "kid": k.kid}) + "." + b64JSON(t, goodClaims())
	return input + "." + base64.RawURLEncoding.EncodeToString(rawSign(t, k.priv, k.alg, []byte(input)))
}

// signRaw signs payload bytes as they are, JSON or not.
func signRaw(t testing.TB, k testKey, payload string) string {
	input := b64JSON(t, map[string]any{"alg": k.alg, "kid": k.kid}) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	return input + "." + base64.RawURLEncoding.EncodeToString(rawSign(t, k.priv, k.alg, []byte(input)))
}

// A key that names its alg checks that algorithm only.
func TestKeyAlgPinsTheAlgorithm(t *testing.T) {
	pinned := rsaKey()
	pinned.jwkAlg = "RS256"
	v, _, _ := served(t, pinned)
	ps := pinned
	ps.alg = "PS256"
	token := sign(t, ps, goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrAlgorithm, token)
	_, _, err = v.Validate(ctx, sign(t, pinned, goodClaims()))
	checkErr(t, err, nil, "")
}

func TestAlgorithmsSetting(t *testing.T) {
	rk, ek := rsaKey(), ecKey()
	srv := newJWKSServer(t, jwksOf(t, rk, ek))
	cfg := baseConfig(srv.URL)
	cfg.Algorithms = []string{"ES256"}
	v := newValidator(t, cfg, newClock())
	token := sign(t, rk, goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrAlgorithm, token)
	_, _, err = v.Validate(ctx, sign(t, ek, goodClaims()))
	checkErr(t, err, nil, "")
}

func TestTokenWithoutKID(t *testing.T) {
	rk, ek := rsaKey(), ecKey()
	noKID := func(k testKey) string {
		return signWithHeader(t, k, map[string]any{"alg": k.alg}, goodClaims())
	}
	t.Run("one key fits", func(t *testing.T) {
		v, _, _ := served(t, rk, ek)
		_, _, err := v.Validate(ctx, noKID(ek))
		checkErr(t, err, nil, "")
	})
	t.Run("two keys fit", func(t *testing.T) {
		v, _, _ := served(t, rk, rsaKey2())
		token := noKID(rk)
		_, _, err := v.Validate(ctx, token)
		checkErr(t, err, ErrUnknownKey, token)
	})
	t.Run("no key fits", func(t *testing.T) {
		v, _, _ := served(t, rk)
		token := noKID(ek)
		_, _, err := v.Validate(ctx, token)
		checkErr(t, err, ErrUnknownKey, token)
	})
}

func TestTokenTooLarge(t *testing.T) {
	v, srv, _ := served(t, rsaKey())
	token := sign(t, rsaKey(), goodClaims().with("pad", strings.Repeat("x", DefaultMaxTokenBytes)))
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrTokenTooLarge, token)
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the JWKS was fetched %d times for a token refused by its size", n)
	}
	huge := strings.Repeat("A", 10<<20)
	if _, _, err := v.Validate(ctx, huge); !errors.Is(err, ErrTokenTooLarge) {
		t.Errorf("a 10 MiB token: %v, want ErrTokenTooLarge", err)
	}
}

func TestUnknownKIDRefetchesOnce(t *testing.T) {
	v, srv, clk := served(t, rsaKey())
	if _, _, err := v.Validate(ctx, sign(t, rsaKey(), goodClaims())); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("%d fetches for the first token, want 1", n)
	}
	clk.advance(DefaultMinRefetchInterval)
	unknown := rsaKey2()
	unknown.kid = "made-up"
	token := sign(t, unknown, goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
	if !strings.Contains(err.Error(), `"made-up"`) {
		t.Errorf("error %q does not name the kid", err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("%d fetches after an unknown kid, want 2 (one refetch)", n)
	}
	// More unknown kids within the interval fetch nothing.
	for range 20 {
		_, _, err = v.Validate(ctx, token)
		checkErr(t, err, ErrUnknownKey, token)
	}
	clk.advance(DefaultMinRefetchInterval - time.Second)
	_, _, err = v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("%d fetches after 21 more unknown kids within min_refetch_interval, want still 2", n)
	}
	// Once it has passed, one more.
	clk.advance(time.Second)
	_, _, err = v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
	if n := srv.hits.Load(); n != 3 {
		t.Fatalf("%d fetches once min_refetch_interval passed, want 3", n)
	}
}

func TestRotationIsPickedUp(t *testing.T) {
	v, srv, clk := served(t, rsaKey())
	if _, _, err := v.Validate(ctx, sign(t, rsaKey(), goodClaims())); err != nil {
		t.Fatal(err)
	}
	srv.set(jwksOf(t, rsaKey(), rsaKey2()))
	clk.advance(DefaultMinRefetchInterval)
	principal, _, err := v.Validate(ctx, sign(t, rsaKey2(), goodClaims()))
	if err != nil || principal != "alice" {
		t.Fatalf("a token of the new key: %q, %v; want alice, nil", principal, err)
	}
	if _, _, err := v.Validate(ctx, sign(t, rsaKey(), goodClaims())); err != nil {
		t.Fatalf("the old key, still published: %v", err)
	}
}

// A freshly rotated key is refused until min_refetch_interval has passed
// since the last fetch: the price of not letting made-up kids drive fetches.
func TestRotationWaitsForTheRefetchInterval(t *testing.T) {
	v, srv, clk := served(t, rsaKey())
	if _, _, err := v.Validate(ctx, sign(t, rsaKey(), goodClaims())); err != nil {
		t.Fatal(err)
	}
	srv.set(jwksOf(t, rsaKey2()))
	token := sign(t, rsaKey2(), goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
	clk.advance(DefaultMinRefetchInterval)
	_, _, err = v.Validate(ctx, token)
	checkErr(t, err, nil, "")
}

func TestBackgroundRefresh(t *testing.T) {
	v, srv, clk := served(t, rsaKey(), rsaKey2())
	old := sign(t, rsaKey(), goodClaims())
	if _, _, err := v.Validate(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The issuer retires rsa-1. Until the keys are refreshed it is still
	// accepted; the refresh happens behind a token checked after
	// refresh_interval, which is itself checked with the old keys.
	srv.set(jwksOf(t, rsaKey2()))
	clk.advance(DefaultRefreshInterval - time.Second)
	if _, _, err := v.Validate(ctx, old); err != nil {
		t.Fatalf("before refresh_interval: %v", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("%d fetches before refresh_interval, want 1", n)
	}
	clk.advance(time.Second)
	if _, _, err := v.Validate(ctx, old); err != nil {
		t.Fatalf("the token that starts the refresh: %v", err)
	}
	waitFor(t, "the background refresh", func() bool {
		_, _, err := v.Validate(ctx, old)
		return errors.Is(err, ErrUnknownKey)
	})
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("%d fetches, want 2: one refresh, and the unknown kid within min_refetch_interval of it fetches nothing", n)
	}
}

func TestJWKSUnavailable(t *testing.T) {
	t.Run("server down", func(t *testing.T) {
		v, srv, _ := served(t, rsaKey())
		srv.Close()
		token := sign(t, rsaKey(), goodClaims())
		_, _, err := v.Validate(ctx, token)
		checkUnavailable(t, err, token, "jwks_url")
	})
	tests := []struct {
		name   string
		status int
		body   []byte
		want   string
	}{
		{"server error", http.StatusInternalServerError, []byte("oops"), "500"},
		{"not JSON", http.StatusOK, []byte("<html>"), "cannot read the key set"},
		{"no keys", http.StatusOK, []byte(`{"keys":[]}`), "no keys"},
		{"only an HMAC key", http.StatusOK, []byte(`{"keys":[{"kty":"oct","kid":"rsa-1","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`), "symmetric"},
		{"too large", http.StatusOK, []byte(`{"keys":[` + strings.Repeat(" ", DefaultMaxJWKSBytes) + `]}`), "max_jwks_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, srv, _ := served(t, rsaKey())
			srv.status.Store(int32(tc.status))
			srv.set(tc.body)
			token := sign(t, rsaKey(), goodClaims())
			_, _, err := v.Validate(ctx, token)
			checkUnavailable(t, err, token, tc.want)
		})
	}
	t.Run("redirect", func(t *testing.T) {
		target := newJWKSServer(t, jwksOf(t, rsaKey()))
		redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
		t.Cleanup(redirect.Close)
		v := newValidator(t, baseConfig(redirect.URL), newClock())
		token := sign(t, rsaKey(), goodClaims())
		_, _, err := v.Validate(ctx, token)
		checkUnavailable(t, err, token, "redirect")
		if n := target.hits.Load(); n != 0 {
			t.Errorf("the redirect was followed")
		}
	})
}

func checkUnavailable(t *testing.T, err error, token, want string) {
	t.Helper()
	if !errors.Is(err, ErrJWKSUnavailable) || !errors.Is(err, sasl.ErrUnavailable) {
		t.Fatalf("Validate: %v, want ErrJWKSUnavailable", err)
	}
	if errors.Is(err, sasl.ErrAuthFailed) {
		t.Errorf("%v is also a refusal", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("error %q shows the token", err)
	}
}

// A failed fetch is not retried before min_refetch_interval, and keys read
// before stay in use.
func TestFailedFetches(t *testing.T) {
	v, srv, clk := served(t, rsaKey())
	srv.status.Store(http.StatusServiceUnavailable)
	token := sign(t, rsaKey(), goodClaims())
	for range 10 {
		_, _, err := v.Validate(ctx, token)
		checkUnavailable(t, err, token, "503")
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("%d fetches for 10 tokens while the server fails, want 1", n)
	}
	srv.status.Store(http.StatusOK)
	clk.advance(DefaultMinRefetchInterval)
	if _, _, err := v.Validate(ctx, token); err != nil {
		t.Fatalf("once the server is back and the interval passed: %v", err)
	}
	// The server fails again; refreshes fail, the keys stay.
	srv.status.Store(http.StatusServiceUnavailable)
	clk.advance(DefaultRefreshInterval)
	for range 3 {
		if _, _, err := v.Validate(ctx, token); err != nil {
			t.Fatalf("with keys read before: %v", err)
		}
	}
	waitRefreshed(t, v, srv, 3)
	clk.advance(DefaultMinRefetchInterval)
	if _, _, err := v.Validate(ctx, token); err != nil {
		t.Fatalf("after a failed refresh: %v", err)
	}
	waitRefreshed(t, v, srv, 4)
	// An unknown kid while the server fails: the key may be among those
	// that cannot be read, so the token cannot be checked now.
	clk.advance(DefaultMinRefetchInterval)
	unknown := sign(t, rsaKey2(), goodClaims())
	_, _, err := v.Validate(ctx, unknown)
	checkUnavailable(t, err, unknown, "503")
}

// A caller that gives up while the keys are read does not fail the
// reading for the others.
// waitRefreshed waits for the server to have been asked hits times, and
// for the background reading to be over.
func waitRefreshed(t *testing.T, v *Validator, srv *jwksServer, hits int32) {
	t.Helper()
	waitFor(t, "the background refresh", func() bool {
		return srv.hits.Load() == hits && !v.src.(*urlSource).refreshing.Load()
	})
}

func TestCallerGivingUp(t *testing.T) {
	v, srv, _ := served(t, rsaKey())
	c, cancel := context.WithCancel(ctx)
	cancel()
	token := sign(t, rsaKey(), goodClaims())
	if _, _, err := v.Validate(c, token); err != nil {
		t.Fatalf("with a cancelled context: %v", err)
	}
	if _, _, err := v.Validate(ctx, token); err != nil {
		t.Fatalf("the next caller: %v", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	defer close(release)
	cfg := baseConfig(srv.URL)
	cfg.FetchTimeout = 50 * time.Millisecond
	v := newValidator(t, cfg, newClock())
	token := sign(t, rsaKey(), goodClaims())
	// The server never answers: only fetch_timeout can end the fetch,
	// and the error says it did.
	_, _, err := v.Validate(ctx, token)
	checkUnavailable(t, err, token, "deadline")
}

func TestHTTPClientOption(t *testing.T) {
	srv := newJWKSServer(t, jwksOf(t, rsaKey()))
	var used atomic.Bool
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		used.Store(true)
		return http.DefaultTransport.RoundTrip(r)
	})}
	v, err := New(baseConfig(srv.URL), Options{HTTPClient: client, Now: newClock().Now, Logger: quietLogger()})
	must(t, err)
	if _, _, err := v.Validate(ctx, sign(t, rsaKey(), goodClaims())); err != nil {
		t.Fatal(err)
	}
	if !used.Load() {
		t.Error("Options.HTTPClient was not used")
	}
	if client.CheckRedirect != nil {
		t.Error("the caller's client was changed")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestSkippedKeys(t *testing.T) {
	enc := ecKey()
	enc.kid, enc.use = "enc-1", "enc"
	v, _, _ := served(t, rsaKey(), enc)
	token := sign(t, enc, goodClaims())
	_, _, err := v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
	_, _, err = v.Validate(ctx, sign(t, rsaKey(), goodClaims()))
	checkErr(t, err, nil, "")
}

func TestNewRefusesABadConfig(t *testing.T) {
	_, err := New(Config{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "jwks_url") {
		t.Fatalf("New(Config{}) = %v, want the config's errors", err)
	}
}

// Keys the library cannot or must not use are left out, and the rest of
// the set stays usable: a weak RSA key, a key type not known (as a
// post-quantum key an issuer may publish beside its others), an HMAC key.
func TestUnusableKeysLeftOut(t *testing.T) {
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	must(t, err)
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	must(t, json.Unmarshal(jwksOf(t, rsaKey()), &set))
	set.Keys = append(set.Keys,
		map[string]any{"kty": "RSA", "kid": "weak", "n": base64.RawURLEncoding.EncodeToString(weak.N.Bytes()), "e": "AQAB"},
		map[string]any{"kty": "AKP", "kid": "pq", "alg": "ML-DSA-44", "pub": "AAAA"},
		map[string]any{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"})
	doc, err := json.Marshal(set)
	must(t, err)
	srv := newJWKSServer(t, doc)
	v := newValidator(t, baseConfig(srv.URL), newClock())
	if _, _, err := v.Validate(ctx, sign(t, rsaKey(), goodClaims())); err != nil {
		t.Fatalf("the good key of the set: %v", err)
	}
	token := sign(t, testKey{kid: "weak", alg: "RS256", priv: weak}, goodClaims())
	_, _, err = v.Validate(ctx, token)
	checkErr(t, err, ErrUnknownKey, token)
	token = hs256(t, "hmac", []byte("secretsecretsecretsecretsecretse"), goodClaims())
	_, _, err = v.Validate(ctx, token)
	checkErr(t, err, ErrAlgorithm, token)
}
