package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// testKey is a signing key the tests make, with the JWK its set
// publishes.
type testKey struct {
	kid  string
	alg  string // the alg tokens signed with it carry
	priv crypto.Signer
	// jwkAlg, if set, is published as the key's alg member.
	jwkAlg string
	use    string
}

// Keys are made once: RSA key generation is slow.
var (
	rsaPriv  = sync.OnceValue(func() *rsa.PrivateKey { return mustRSA() })
	rsaPriv2 = sync.OnceValue(func() *rsa.PrivateKey { return mustRSA() })
	ecPriv   = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	edPriv = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func mustRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

func rsaKey() testKey  { return testKey{kid: "rsa-1", alg: "RS256", priv: rsaPriv()} }
func rsaKey2() testKey { return testKey{kid: "rsa-2", alg: "RS256", priv: rsaPriv2()} }
func ecKey() testKey   { return testKey{kid: "ec-1", alg: "ES256", priv: ecPriv()} }
func edKey() testKey   { return testKey{kid: "ed-1", alg: "EdDSA", priv: edPriv()} }

// jwksOf is the JWKS document publishing the public keys of keys.
func jwksOf(t testing.TB, keys ...testKey) []byte {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		pub, err := jwk.Import(k.priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		must(t, pub.Set(jwk.KeyIDKey, k.kid))
		if k.jwkAlg != "" {
			must(t, pub.Set(jwk.AlgorithmKey, k.jwkAlg))
		}
		if k.use != "" {
			must(t, pub.Set(jwk.KeyUsageKey, k.use))
		}
		must(t, set.AddKey(pub))
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// claims are a token's claims; goodClaims are those of a token the
// baseline config accepts at testNow.
type claims map[string]any

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func goodClaims() claims {
	return claims{
		"iss": testIssuer,
		"aud": []string{"other", "kafka"},
		"sub": "alice",
		"exp": testNow.Add(time.Hour).Unix(),
		"nbf": testNow.Add(-time.Minute).Unix(),
		"iat": testNow.Add(-time.Minute).Unix(),
	}
}

const testIssuer = "https://idp.test/realms/kafka"

// with is c with some claims changed; a nil value removes the claim.
func (c claims) with(kv ...any) claims {
	out := claims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// sign makes a compact JWS of c signed by k, with header {alg, kid, typ}.
func sign(t testing.TB, k testKey, c claims) string {
	t.Helper()
	return signWithHeader(t, k, map[string]any{"alg": k.alg, "kid": k.kid, "typ": "JWT"}, c)
}

// signWithHeader signs c under the given header with k's key, using the
// header's alg: tokens the library would not make, but a client can.
func signWithHeader(t testing.TB, k testKey, header map[string]any, c claims) string {
	t.Helper()
	input := b64JSON(t, header) + "." + b64JSON(t, c)
	sig := rawSign(t, k.priv, header["alg"].(string), []byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func b64JSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func rawSign(t testing.TB, priv crypto.Signer, alg string, input []byte) []byte {
	t.Helper()
	h256 := sha256.Sum256(input)
	h512 := sha512.Sum512(input)
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, priv.(*rsa.PrivateKey), crypto.SHA256, h256[:])
	case "RS512":
		sig, err = rsa.SignPKCS1v15(rand.Reader, priv.(*rsa.PrivateKey), crypto.SHA512, h512[:])
	case "PS256":
		sig, err = rsa.SignPSS(rand.Reader, priv.(*rsa.PrivateKey), crypto.SHA256, h256[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES256":
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, priv.(*ecdsa.PrivateKey), h256[:])
		if err == nil {
			sig = make([]byte, 64)
			r.FillBytes(sig[:32])
			s.FillBytes(sig[32:])
		}
	case "EdDSA", "Ed25519":
		sig = ed25519.Sign(priv.(ed25519.PrivateKey), input)
	default:
		t.Fatalf("rawSign: no %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// hs256 makes an HMAC-SHA256 token with secret as the key.
func hs256(t testing.TB, kid string, secret []byte, c claims) string {
	t.Helper()
	input := b64JSON(t, map[string]any{"alg": "HS256", "kid": kid, "typ": "JWT"}) + "." + b64JSON(t, c)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// jwksServer serves a JWKS on 127.0.0.1 and counts the fetches.
type jwksServer struct {
	*httptest.Server
	body   atomic.Pointer[[]byte]
	status atomic.Int32
	hits   atomic.Int32
}

func newJWKSServer(t testing.TB, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.set(body)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(int(s.status.Load()))
		w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte) { s.body.Store(&body) }

// clock is a clock the test moves.
type clock struct{ now atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.now.Store(testNow.UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.now.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.now.Add(int64(d)) }
func quietLogger() *slog.Logger          { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func baseConfig(url string) Config {
	return Config{JWKSURL: url, Issuer: testIssuer, Audience: []string{"kafka"}}
}
func fileConfig(path string) Config {
	return Config{JWKSFile: path, Issuer: testIssuer, Audience: []string{"kafka"}}
}
func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	must(t, os.WriteFile(path, b, 0o600))
}

// newValidator makes a Validator of cfg on clk.
func newValidator(t testing.TB, cfg Config, clk *clock) *Validator {
	t.Helper()
	v, err := New(cfg, Options{Now: clk.Now, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// served starts a JWKS server with keys and a Validator that reads it.
func served(t testing.TB, keys ...testKey) (*Validator, *jwksServer, *clock) {
	t.Helper()
	srv := newJWKSServer(t, jwksOf(t, keys...))
	clk := newClock()
	return newValidator(t, baseConfig(srv.URL), clk), srv, clk
}

// waitFor polls cond until it holds, or fails the test after 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tempPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }
