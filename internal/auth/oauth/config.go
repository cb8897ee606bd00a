package oauth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Config is how bearer tokens are checked: where the issuer's keys are,
// and what a token must say.
type Config struct {
	// JWKSURL is where the issuer publishes its JSON Web Key Set (the
	// jwks_uri of its OpenID configuration). https, or http for a server
	// on 127.0.0.1, ::1 or localhost only. Set it or JWKSFile.
	JWKSURL string `yaml:"jwks_url"`
	// JWKSFile is a local file holding the key set instead; it is read
	// again when it changes.
	JWKSFile string `yaml:"jwks_file"`
	// Issuer is the iss a token must carry, exactly.
	Issuer string `yaml:"issuer"`
	// Audience lists the audiences the gateway answers to; a token's aud
	// must name one of them.
	Audience []string `yaml:"audience"`
	// ClockSkew is how far the gateway's clock and the issuer's may
	// disagree when exp, nbf and iat are checked. Default 30s, at most 5m.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// Algorithms are the signature algorithms a token may use. Default:
	// every asymmetric one supported (see DefaultAlgorithms). none and
	// the HMAC algorithms (HS256, HS384, HS512) are refused.
	Algorithms []string `yaml:"algorithms"`
	// PrincipalClaim names the claim whose string value is the
	// authenticated principal. Default sub.
	PrincipalClaim string `yaml:"principal_claim"`
	// RequiredScope, if set, is a scope the token must carry (in its
	// space-separated scope claim, or in scp).
	RequiredScope string `yaml:"required_scope"`
	// RefreshInterval is the age past which keys fetched from jwks_url
	// are fetched again, in the background, when a token is checked.
	// Default 5m.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// MinRefetchInterval is the least time between two fetches of
	// jwks_url, whatever the tokens say: a token with an unknown kid, or a
	// failed fetch, causes a new fetch only once it has passed. Default 30s.
	MinRefetchInterval time.Duration `yaml:"min_refetch_interval"`
	// FetchTimeout bounds one fetch of jwks_url. Default 10s, at most 1m.
	FetchTimeout time.Duration `yaml:"fetch_timeout"`
	// MaxJWKSBytes bounds the key set read from jwks_url or jwks_file.
	// Default 1 MiB, at most 16 MiB.
	MaxJWKSBytes int `yaml:"max_jwks_bytes"`
	// MaxTokenBytes bounds a token's length. Default 16 KiB, at most 64 KiB.
	MaxTokenBytes int `yaml:"max_token_bytes"`
}

// Defaults and bounds of Config.
const (
	DefaultClockSkew          = 30 * time.Second
	MaxClockSkew              = 5 * time.Minute
	DefaultPrincipalClaim     = "sub"
	DefaultRefreshInterval    = 5 * time.Minute
	DefaultMinRefetchInterval = 30 * time.Second
	DefaultFetchTimeout       = 10 * time.Second
	MaxFetchTimeout           = time.Minute
	DefaultMaxJWKSBytes       = 1 << 20
	MaxMaxJWKSBytes           = 16 << 20
	DefaultMaxTokenBytes      = 16 << 10
	MaxMaxTokenBytes          = 64 << 10

	// minRefetchFloor keeps min_refetch_interval from being set so low
	// that tokens with made-up key ids could drive the issuer's JWKS
	// endpoint at the rate clients connect.
	minRefetchFloor = time.Second
	// maxRefreshInterval: keys older than a day miss a rotation for
	// longer than any issuer announces one ahead.
	maxRefreshInterval = 24 * time.Hour
)

// DefaultAlgorithms are the algorithms allowed when Algorithms is empty:
// every asymmetric algorithm the validator supports. Each is safe to allow
// because a key is used only with the algorithms of its type (an RSA key
// never checks an ES256 signature) and, when the key names its alg, with
// that one only.
var DefaultAlgorithms = []string{
	"RS256", "RS384", "RS512",
	"PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512",
	"EdDSA", "Ed25519",
}

// Validate reports every problem of the config at once, each naming the
// setting and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case c.JWKSURL == "" && c.JWKSFile == "":
		bad("jwks_url: is empty, and so is jwks_file: set jwks_url to the issuer's key set (its OpenID configuration's jwks_uri), or jwks_file to a local copy")
	case c.JWKSURL != "" && c.JWKSFile != "":
		bad("jwks_url and jwks_file: are both set: keep one")
	case c.JWKSURL != "":
		if err := checkJWKSURL(c.JWKSURL); err != nil {
			bad("jwks_url: %v", err)
		}
	}
	if strings.TrimSpace(c.Issuer) == "" {
		bad("issuer: is empty: set the iss your tokens carry, e.g. https://idp.example.com/realms/kafka")
	}
	if len(c.Audience) == 0 {
		bad("audience: is empty: list the audiences a token may name for the gateway, e.g. audience: [kafka]")
	}
	for i, a := range c.Audience {
		if strings.TrimSpace(a) == "" {
			bad("audience[%d]: is empty: name an audience, e.g. kafka", i)
		}
	}
	if c.ClockSkew < 0 || c.ClockSkew > MaxClockSkew {
		bad("clock_skew: %s is out of range: use a duration from 0s to %s, or leave it out for %s", c.ClockSkew, MaxClockSkew, DefaultClockSkew)
	}
	for i, a := range c.Algorithms {
		if err := checkAlgorithm(a); err != nil {
			bad("algorithms[%d]: %v", i, err)
		}
	}
	if c.PrincipalClaim != "" && strings.TrimSpace(c.PrincipalClaim) != c.PrincipalClaim {
		bad("principal_claim: %q has spaces around it: name the claim alone, e.g. sub", c.PrincipalClaim)
	}
	if strings.ContainsAny(c.RequiredScope, " \t\r\n") {
		bad("required_scope: %q holds spaces: name one scope, e.g. kafka", c.RequiredScope)
	}
	errs = append(errs, c.validateFetching()...)
	if c.MaxTokenBytes < 0 || c.MaxTokenBytes > MaxMaxTokenBytes {
		bad("max_token_bytes: %d is out of range: use a size from 1 to %d, or leave it out for %d", c.MaxTokenBytes, MaxMaxTokenBytes, DefaultMaxTokenBytes)
	}
	return errors.Join(errs...)
}

// validateFetching checks the settings of how the key set is read.
func (c *Config) validateFetching() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.RefreshInterval < 0 || c.RefreshInterval > maxRefreshInterval {
		bad("refresh_interval: %s is out of range: use a duration up to %s, or leave it out for %s", c.RefreshInterval, maxRefreshInterval, DefaultRefreshInterval)
	}
	if c.MinRefetchInterval != 0 && c.MinRefetchInterval < minRefetchFloor {
		bad("min_refetch_interval: %s is below %s: a lower one would let tokens with unknown key ids drive fetches of the issuer's key set; leave it out for %s", c.MinRefetchInterval, minRefetchFloor, DefaultMinRefetchInterval)
	}
	d := c.withDefaults()
	if d.MinRefetchInterval > d.RefreshInterval && c.RefreshInterval >= 0 {
		bad("min_refetch_interval: %s is longer than refresh_interval (%s): keys would not be refreshed as often as asked; lower it or raise refresh_interval", d.MinRefetchInterval, d.RefreshInterval)
	}
	if c.FetchTimeout < 0 || c.FetchTimeout > MaxFetchTimeout {
		bad("fetch_timeout: %s is out of range: use a duration up to %s, or leave it out for %s", c.FetchTimeout, MaxFetchTimeout, DefaultFetchTimeout)
	}
	if c.MaxJWKSBytes < 0 || c.MaxJWKSBytes > MaxMaxJWKSBytes {
		bad("max_jwks_bytes: %d is out of range: use a size from 1 to %d, or leave it out for %d", c.MaxJWKSBytes, MaxMaxJWKSBytes, DefaultMaxJWKSBytes)
	}
	return errs
}

// withDefaults is c with every unset setting at its default.
func (c Config) withDefaults() Config {
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	if c.PrincipalClaim == "" {
		c.PrincipalClaim = DefaultPrincipalClaim
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.MinRefetchInterval == 0 {
		c.MinRefetchInterval = DefaultMinRefetchInterval
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.MaxJWKSBytes == 0 {
		c.MaxJWKSBytes = DefaultMaxJWKSBytes
	}
	if c.MaxTokenBytes == 0 {
		c.MaxTokenBytes = DefaultMaxTokenBytes
	}
	return c
}

// checkJWKSURL allows https anywhere and plain http on the loopback only:
// keys fetched in clear over a network could be replaced by anyone on the
// path, who could then sign tokens of their own.
func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("is not a URL (%v): use e.g. https://idp.example.com/.well-known/jwks.json", err)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q has no host: use e.g. https://idp.example.com/.well-known/jwks.json", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q is plain http to another machine, where the keys could be swapped on the way: use https (http is allowed for 127.0.0.1, ::1 and localhost only)", s)
	}
	return fmt.Errorf("%q: scheme %q is not https: use e.g. https://idp.example.com/.well-known/jwks.json", s, u.Scheme)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkAlgorithm allows the algorithms of DefaultAlgorithms.
func checkAlgorithm(a string) error {
	switch {
	case slices.Contains(DefaultAlgorithms, a):
		return nil
	case strings.EqualFold(a, "none"):
		return errors.New(`"none" is refused: it means an unsigned token, which anyone can write`)
	case strings.HasPrefix(strings.ToUpper(a), "HS"):
		return fmt.Errorf("%q is refused: an HMAC token is signed with the secret that checks it, so every service that checks such tokens can mint them for any principal; have the issuer sign with RS256, ES256 or EdDSA", a)
	}
	return fmt.Errorf("%q is not a supported algorithm: use some of %s", a, strings.Join(DefaultAlgorithms, ", "))
}
