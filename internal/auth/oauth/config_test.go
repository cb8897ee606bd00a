package oauth

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		return Config{JWKSURL: "https://idp.example.com/jwks", Issuer: testIssuer, Audience: []string{"kafka"}}
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // each must be in the error; none: valid
	}{
		{"good", func(*Config) {}, nil},
		{"jwks file", func(c *Config) { c.JWKSURL, c.JWKSFile = "", "/etc/strait/jwks.json" }, nil},
		{"http on 127.0.0.1", func(c *Config) { c.JWKSURL = "http://127.0.0.1:8080/jwks" }, nil},
		{"http on localhost", func(c *Config) { c.JWKSURL = "http://localhost/jwks" }, nil},
		{"http on ::1", func(c *Config) { c.JWKSURL = "http://[::1]:80/jwks" }, nil},
		{"all settings", func(c *Config) {
			c.ClockSkew, c.Algorithms, c.PrincipalClaim, c.RequiredScope = time.Minute, []string{"ES256", "EdDSA"}, "client_id", "kafka"
			c.RefreshInterval, c.MinRefetchInterval, c.FetchTimeout = time.Hour, time.Minute, 5*time.Second
			c.MaxJWKSBytes, c.MaxTokenBytes = 4096, 32<<10
		}, nil},
		{"neither url nor file", func(c *Config) { c.JWKSURL = "" }, []string{"jwks_url: is empty", "jwks_file"}},
		{"both", func(c *Config) { c.JWKSFile = "/x" }, []string{"jwks_url and jwks_file: are both set"}},
		{"http elsewhere", func(c *Config) { c.JWKSURL = "http://idp.example.com/jwks" }, []string{"jwks_url:", "use https"}},
		{"http on a private address", func(c *Config) { c.JWKSURL = "http://10.0.0.1/jwks" }, []string{"jwks_url:", "use https"}},
		{"ftp", func(c *Config) { c.JWKSURL = "ftp://idp.example.com/jwks" }, []string{"jwks_url:", `scheme "ftp"`}},
		{"no host", func(c *Config) { c.JWKSURL = "https:///jwks" }, []string{"jwks_url:", "no host"}},
		{"not a URL", func(c *Config) { c.JWKSURL = "https://idp example.com/%zz" }, []string{"jwks_url: is not a URL"}},
		{"no issuer", func(c *Config) { c.Issuer = " " }, []string{"issuer: is empty"}},
		{"no audience", func(c *Config) { c.Audience = nil }, []string{"audience: is empty"}},
		{"empty audience", func(c *Config) { c.Audience = []string{"kafka", ""} }, []string{"audience[1]: is empty"}},
		{"negative skew", func(c *Config) { c.ClockSkew = -time.Second }, []string{"clock_skew:", "out of range"}},
		{"skew too large", func(c *Config) { c.ClockSkew = 6 * time.Minute }, []string{"clock_skew:", "5m0s"}},
		{"none", func(c *Config) { c.Algorithms = []string{"RS256", "none"} }, []string{"algorithms[1]:", "unsigned"}},
		{"HS256", func(c *Config) { c.Algorithms = []string{"HS256"} }, []string{"algorithms[0]:", "HMAC", "mint"}},
		{"hs512", func(c *Config) { c.Algorithms = []string{"hs512"} }, []string{"algorithms[0]:", "HMAC"}},
		{"unknown algorithm", func(c *Config) { c.Algorithms = []string{"RS1"} }, []string{"algorithms[0]:", "not a supported algorithm", "ES256"}},
		{"principal claim with spaces", func(c *Config) { c.PrincipalClaim = " sub" }, []string{"principal_claim:"}},
		{"two scopes", func(c *Config) { c.RequiredScope = "kafka admin" }, []string{"required_scope:", "one scope"}},
		{"negative refresh", func(c *Config) { c.RefreshInterval = -time.Second }, []string{"refresh_interval:"}},
		{"refresh too long", func(c *Config) { c.RefreshInterval = 48 * time.Hour }, []string{"refresh_interval:"}},
		{"refetch floor", func(c *Config) { c.MinRefetchInterval = time.Millisecond }, []string{"min_refetch_interval:", "unknown key ids"}},
		{"refetch above refresh", func(c *Config) { c.RefreshInterval = time.Minute; c.MinRefetchInterval = 2 * time.Minute }, []string{"min_refetch_interval:", "refresh_interval"}},
		{"refetch above the default refresh", func(c *Config) { c.MinRefetchInterval = 10 * time.Minute }, []string{"min_refetch_interval:", "5m0s"}},
		{"timeout too long", func(c *Config) { c.FetchTimeout = 2 * time.Minute }, []string{"fetch_timeout:"}},
		{"negative timeout", func(c *Config) { c.FetchTimeout = -1 }, []string{"fetch_timeout:"}},
		{"jwks bytes", func(c *Config) { c.MaxJWKSBytes = 1 << 30 }, []string{"max_jwks_bytes:"}},
		{"token bytes", func(c *Config) { c.MaxTokenBytes = -1 }, []string{"max_token_bytes:"}},
		{"token bytes too many", func(c *Config) { c.MaxTokenBytes = MaxMaxTokenBytes + 1 }, []string{"max_token_bytes:"}},
		{"every problem at once", func(c *Config) { *c = Config{ClockSkew: -1, Algorithms: []string{"none"}} },
			[]string{"jwks_url:", "issuer:", "audience:", "clock_skew:", "algorithms[0]:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.change(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed, want an error saying %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	d := Config{}.withDefaults()
	if d.ClockSkew != 30*time.Second || d.PrincipalClaim != "sub" || d.RefreshInterval != 5*time.Minute ||
		d.MinRefetchInterval != 30*time.Second || d.FetchTimeout != 10*time.Second ||
		d.MaxJWKSBytes != 1<<20 || d.MaxTokenBytes != 16<<10 {
		t.Errorf("defaults: %+v", d)
	}
	if !slices.Equal(d.Algorithms, DefaultAlgorithms) {
		t.Errorf("algorithms %v, want %v", d.Algorithms, DefaultAlgorithms)
	}
	for _, a := range d.Algorithms {
		if a == "none" || strings.HasPrefix(a, "HS") {
			t.Errorf("default algorithm %s", a)
		}
	}
}

// The settings read from YAML as docs/security.md writes them.
func TestConfigYAML(t *testing.T) {
	var c Config
	doc := `
jwks_url: https://idp.example.com/realms/kafka/protocol/openid-connect/certs
issuer: https://idp.example.com/realms/kafka
audience: [kafka]
clock_skew: 1m
algorithms: [RS256, ES256]
principal_claim: preferred_username
required_scope: kafka
refresh_interval: 10m
min_refetch_interval: 1m
fetch_timeout: 5s
max_jwks_bytes: 65536
max_token_bytes: 32768
`
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	want := Config{
		JWKSURL: "https://idp.example.com/realms/kafka/protocol/openid-connect/certs", Issuer: "https://idp.example.com/realms/kafka",
		Audience: []string{"kafka"}, ClockSkew: time.Minute, Algorithms: []string{"RS256", "ES256"}, PrincipalClaim: "preferred_username",
		RequiredScope: "kafka", RefreshInterval: 10 * time.Minute, MinRefetchInterval: time.Minute, FetchTimeout: 5 * time.Second,
		MaxJWKSBytes: 65536, MaxTokenBytes: 32768,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
