package config

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of the llm section (docs/llm.md).
const (
	DefaultLLMMaxBodyBytes    = 10 << 20 // 10 MiB
	DefaultLLMMaxTokens       = 4096
	DefaultLLMMaxConns        = 256
	DefaultLLMConnectTimeout  = 5 * time.Second
	DefaultLLMResponseTimeout = 60 * time.Second
	DefaultLLMRequestTimeout  = 10 * time.Minute
	// DefaultLLMBodyReadTimeout bounds receiving a request body.
	DefaultLLMBodyReadTimeout = 30 * time.Second
	// DefaultLLMStreamIdleTimeout is longer than the response timeout:
	// some models send their first chunk at once and then think for a
	// while before the next.
	DefaultLLMStreamIdleTimeout = 2 * time.Minute
)

// LLM configures the LLM gateway: listeners clients call with the OpenAI or
// Anthropic API, the gateway keys they present, the providers Strait calls
// and the routes from model names to providers.
type LLM struct {
	// Listeners are the addresses the gateway serves on.
	Listeners []*LLMListener `yaml:"listeners"`
	// APIKeys are the gateway keys clients may present.
	APIKeys []*LLMAPIKey `yaml:"api_keys,omitempty"`
	// APIKeysFile names a file of more keys, one "name sha256-hex" per
	// line; blank lines and lines starting with # are skipped.
	APIKeysFile string `yaml:"api_keys_file,omitempty"`
	// MaxBodyBytes is the largest request body accepted.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// BodyReadTimeout bounds the time a client may take to send a request
	// body, from the end of its headers.
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
	// Translation tunes requests translated between the dialects.
	Translation LLMTranslation `yaml:"translation"`
	// Providers are the upstream APIs, by name.
	Providers map[string]*LLMProvider `yaml:"providers"`
	// Routes map model names to providers; the first match wins.
	Routes []*LLMRoute `yaml:"routes"`
	// Prices are models' prices, for budgets and the spend metric.
	Prices []*LLMPrice `yaml:"prices,omitempty"`
	// Limits say where the keys' rate-limit and budget counters are kept.
	Limits LLMLimits `yaml:"limits"`
}

// LLMPrice is a model's price in dollars per million tokens.
type LLMPrice struct {
	// Model is the model name a provider is asked for, or a glob.
	Model  string  `yaml:"model"`
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// LLMLimits is the store of the keys' counters.
type LLMLimits struct {
	// RedisURL, if set, keeps the counters in Redis, shared by every
	// instance; empty keeps them in memory.
	RedisURL Secret `yaml:"redis_url,omitempty"`
	// Timeout bounds each Redis command.
	Timeout Duration `yaml:"timeout"`
	// OnStoreError says what each kind of limit does when Redis fails.
	OnStoreError LLMStoreError `yaml:"on_store_error"`
}

// LLMStoreError is fail_open or fail_closed per kind of limit.
type LLMStoreError struct {
	RateLimits string `yaml:"rate_limits"`
	Budgets    string `yaml:"budgets"`
}

// LLMKeyLimits are a gateway key's limits.
type LLMKeyLimits struct {
	// RPM is requests per minute.
	RPM int64 `yaml:"rpm,omitempty"`
	// TPM is tokens (input and output) per minute.
	TPM int64 `yaml:"tpm,omitempty"`
	// Budget is the spend allowed per period.
	Budget *LLMBudget `yaml:"budget,omitempty"`
}

// LLMBudget is a spend limit per calendar period (UTC).
type LLMBudget struct {
	Dollars float64 `yaml:"dollars"`
	Period  string  `yaml:"period"`
}

// LLMListener is one LLM gateway listener.
type LLMListener struct {
	// Listen is the host:port to serve on.
	Listen string `yaml:"listen"`
	// Protocols are the cleartext protocols: http1 and/or h2c (HTTP/2
	// with prior knowledge). Both by default; not allowed with tls.
	Protocols []string `yaml:"protocols,omitempty"`
	// TLS makes the listener TLS, with HTTP/1.1 and HTTP/2 by ALPN.
	TLS *TLSServer `yaml:"tls,omitempty"`
	// HTTP2Server picks the server for h2c: net/http (x/net's, the
	// default) or strait (Strait's own, internal/llm/h2server).
	HTTP2Server string `yaml:"http2_server,omitempty"`
	// HTTP1Server picks the server for HTTP/1.1: net/http (the default)
	// or strait (Strait's own, internal/llm/h1server).
	HTTP1Server string `yaml:"http1_server,omitempty"`
}

// StraitHTTP1 reports whether the listener's HTTP/1.1 is served by
// Strait's own HTTP/1.1 server.
func (l *LLMListener) StraitHTTP1() bool { return l.HTTP1Server == "strait" }

// StraitH2C reports whether the listener's h2c is served by Strait's own
// HTTP/2 server.
func (l *LLMListener) StraitH2C() bool { return l.HTTP2Server == "strait" }

// LLMAPIKey is a gateway key: its SHA-256 (hex), or the key itself (hashed
// when the config loads; use a ${env:…} or ${file:…} reference).
type LLMAPIKey struct {
	// Name identifies the key in logs.
	Name   string `yaml:"name"`
	SHA256 string `yaml:"sha256,omitempty"`
	Key    Secret `yaml:"key,omitempty"`
	// Models (globs) and Routes (names), if either is set, are what the
	// key may use.
	Models []string `yaml:"models,omitempty"`
	Routes []string `yaml:"routes,omitempty"`
	// Limits are the key's rate limits and budget.
	Limits *LLMKeyLimits `yaml:"limits,omitempty"`
}

// LLMKey is a gateway key as the gateway holds it.
type LLMKey struct {
	Name           string
	SHA256         [sha256.Size]byte
	Models, Routes []string
	Limits         LLMKeyLimits
}

// LLMTranslation tunes translation between the dialects.
type LLMTranslation struct {
	// MaxTokensDefault is the max_tokens sent to an Anthropic provider
	// when an OpenAI client gave none (Anthropic requires one).
	MaxTokensDefault int `yaml:"max_tokens_default"`
	// MaxTokensCap, if above 0, caps max_tokens sent to Anthropic.
	MaxTokensCap int `yaml:"max_tokens_cap,omitempty"`
	// Strict rejects request fields that have no equivalent in the
	// provider's dialect instead of dropping them.
	Strict bool `yaml:"strict,omitempty"`
}

// LLMProvider is an upstream LLM API.
type LLMProvider struct {
	// Name is the provider's key under providers; not read from YAML.
	Name string `yaml:"-"`
	// Dialect is openai or anthropic.
	Dialect string `yaml:"dialect"`
	// BaseURL is http(s)://host[:port][/prefix]; Strait appends
	// /v1/chat/completions or /v1/messages.
	BaseURL string `yaml:"base_url"`
	// APIKey is the provider's key; empty sends none.
	APIKey Secret `yaml:"api_key,omitempty"`
	// HTTP is h1, h2c (http:// only) or h2 (https:// only); empty means
	// HTTP/1.1 for http:// and HTTP/2 or 1.1 by ALPN for https://.
	HTTP string `yaml:"http,omitempty"`
	// HTTP2Client picks the client for http: h2c or h2: strait (Strait's
	// own, the default) or net/http (Go's standard one, for a provider
	// Strait's does not get along with).
	HTTP2Client string `yaml:"http2_client,omitempty"`
	// HTTP1Client picks the client for HTTP/1.1 toward the provider
	// (http: h1, or the default over http://): strait (Strait's own, the
	// default) or net/http (Go's standard one, for a provider Strait's
	// does not get along with).
	HTTP1Client string `yaml:"http1_client,omitempty"`
	// TLS tunes https:// connections.
	TLS *LLMProviderTLS `yaml:"tls,omitempty"`
	// MaxConns bounds the connections open to the provider.
	MaxConns int `yaml:"max_conns"`
	// ConnectTimeout bounds opening one connection.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// ResponseTimeout bounds the wait for the first byte of a response.
	ResponseTimeout Duration `yaml:"response_timeout"`
	// RequestTimeout bounds a whole request, streams included.
	RequestTimeout Duration `yaml:"request_timeout"`
	// StreamIdleTimeout bounds the gap between two events of a stream,
	// once it has started.
	StreamIdleTimeout Duration `yaml:"stream_idle_timeout"`
}

// LLMProviderTLS tunes TLS toward a provider; https:// turns TLS on.
type LLMProviderTLS struct {
	CAFile             string `yaml:"ca_file,omitempty"`
	CertFile           string `yaml:"cert_file,omitempty"`
	KeyFile            string `yaml:"key_file,omitempty"`
	ServerName         string `yaml:"server_name,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify,omitempty"`
}

// LLMRoute sends the models Match matches to Provider.
type LLMRoute struct {
	// Name labels the route in metrics and logs; Match by default.
	Name string `yaml:"name,omitempty"`
	// Match is a model name or a glob ('*' any run of characters, '?'
	// one character).
	Match string `yaml:"match"`
	// Provider is a key under providers.
	Provider string `yaml:"provider"`
	// Model, if set, is the model name sent to the provider instead.
	Model string `yaml:"model,omitempty"`
	// Models are the names GET /v1/models lists for the route.
	Models []string `yaml:"models,omitempty"`
	// Targets, instead of provider and model, are where the route may
	// send a request, picked by Strategy.
	Targets []*LLMTarget `yaml:"targets,omitempty"`
	// Strategy is fallback (in order) or weighted.
	Strategy string `yaml:"strategy,omitempty"`
	// Retry says which failures are retried or fall back, and how.
	Retry *LLMRetry `yaml:"retry,omitempty"`
	// Deadline bounds a request across every attempt.
	Deadline Duration `yaml:"deadline"`
	// Health ejects targets that keep failing.
	Health *LLMHealth `yaml:"health,omitempty"`
}

// LLMTarget is one target of a route.
type LLMTarget struct {
	Name     string `yaml:"name,omitempty"`
	Provider string `yaml:"provider"`
	Model    string `yaml:"model,omitempty"`
	APIKey   Secret `yaml:"api_key,omitempty"`
	Weight   int    `yaml:"weight,omitempty"`
}

// LLMRetry is a route's retry policy.
type LLMRetry struct {
	// Attempts per target, the first included.
	Attempts   int      `yaml:"attempts"`
	Backoff    Duration `yaml:"backoff"`
	MaxBackoff Duration `yaml:"max_backoff"`
	// On lists what is retried: HTTP statuses, connect, timeout.
	On []string `yaml:"on,omitempty"`
}

// LLMHealth ejects a target after Failures failures within Window, for
// Cooldown.
type LLMHealth struct {
	Failures int      `yaml:"failures"`
	Window   Duration `yaml:"window"`
	Cooldown Duration `yaml:"cooldown"`
}

// Secret is a setting that is never shown: printing or marshalling it
// gives "[redacted]". Use string(s) for the value.
type Secret string

func (s Secret) String() string   { return "[redacted]" }
func (s Secret) GoString() string { return `"[redacted]"` }

// MarshalYAML redacts the secret.
func (s Secret) MarshalYAML() (any, error) {
	if s == "" {
		return "", nil
	}
	return "[redacted]", nil
}

// ByteSize is a size in bytes, written as a whole number or with a unit:
// B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
type ByteSize int64

// MarshalYAML writes the size as a number of bytes.
func (b ByteSize) MarshalYAML() (any, error) { return int64(b), nil }

var byteSizeType = reflect.TypeFor[ByteSize]()

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1},
}

// parseByteSize parses "10MiB", "512KB", "1048576". Its errors follow the
// value in a message.
func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	num := s
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New(`is not a size: write a whole number of bytes or one with a unit, such as "10MiB" or "512KB"`)
	}
	if n > (1<<62)/mult {
		return 0, errors.New("is too large")
	}
	return n * mult, nil
}

// decodeByteSize is the decoder's case for ByteSize.
func (d *decoder) decodeByteSize(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, fmt.Sprintf("must be a size such as \"10MiB\", not %s", kindName(n)))
		return
	}
	size, err := parseByteSize(n.Value)
	if err != nil {
		d.fail(n, path, d.show(n)+" "+err.Error())
		return
	}
	v.SetInt(size)
}

// Build returns the TLS configuration for an https:// provider.
func (t *LLMProviderTLS) Build() (*tls.Config, error) {
	if t == nil {
		return (&TLSClient{Enabled: true}).Build()
	}
	return (&TLSClient{
		Enabled: true, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
		ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify,
	}).Build()
}

// Keys returns every gateway key: the api_keys entries (a key given in
// clear is hashed here) and the lines of api_keys_file.
func (l *LLM) Keys() ([]LLMKey, error) {
	var keys []LLMKey
	var errs []error
	for i, k := range l.APIKeys {
		if k == nil {
			continue
		}
		sum, err := k.hash()
		if err != nil {
			errs = append(errs, fmt.Errorf("api_keys[%d]: %w", i, err))
			continue
		}
		lk := LLMKey{Name: k.Name, SHA256: sum, Models: k.Models, Routes: k.Routes}
		if k.Limits != nil {
			lk.Limits = *k.Limits
		}
		keys = append(keys, lk)
	}
	if l.APIKeysFile != "" {
		fk, err := readKeysFile(l.APIKeysFile)
		if err != nil {
			errs = append(errs, err)
		}
		keys = append(keys, fk...)
	}
	return keys, errors.Join(errs...)
}

func (k *LLMAPIKey) hash() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	switch {
	case k.SHA256 != "" && k.Key != "":
		return sum, errors.New("give sha256 or key, not both")
	case k.Key != "":
		return sha256.Sum256([]byte(k.Key)), nil
	case k.SHA256 == "":
		return sum, errors.New("give the key's sha256 (printf %s KEY | sha256sum) or key: ${env:NAME}")
	}
	b, err := hex.DecodeString(k.SHA256)
	if err != nil || len(b) != sha256.Size {
		return sum, errors.New("sha256 must be 64 hexadecimal digits (printf %s KEY | sha256sum)")
	}
	copy(sum[:], b)
	return sum, nil
}

// readKeysFile reads "name sha256-hex" lines. Errors name the file and
// line, never a key.
func readKeysFile(path string) ([]LLMKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read api_keys_file %s: %s; check the path and its permissions", path, fileErrReason(err))
	}
	var keys []LLMKey
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		k := &LLMAPIKey{}
		if len(f) >= 2 {
			k.Name, k.SHA256 = f[0], f[1]
		}
		sum, err := k.hash()
		var lk LLMKey
		var attrErr error
		if len(f) > 2 {
			lk, attrErr = ParseKeyAttributes(f[2:])
		}
		switch {
		case len(f) < 2:
			errs = append(errs, fmt.Errorf("%s:%d: want \"name sha256-hex\" and optionally rpm=N, tpm=N, budget=DOLLARS/PERIOD, models=GLOB,…, routes=NAME,…; found %d fields", path, line, len(f)))
		case !nameRE.MatchString(k.Name):
			errs = append(errs, fmt.Errorf("%s:%d: %q is not a valid key name: use only letters, digits, '_', '.' and '-'", path, line, k.Name))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, line, err))
		case attrErr != nil:
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, line, attrErr))
		default:
			lk.Name, lk.SHA256 = k.Name, sum
			keys = append(keys, lk)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("reading api_keys_file %s: %w", path, err))
	}
	return keys, errors.Join(errs...)
}

// ParseKeyAttributes reads the attributes after a key's hash in an
// api_keys_file line: rpm=N, tpm=N, budget=DOLLARS/PERIOD (period hour,
// day or month), models=GLOB,… and routes=NAME,….
func ParseKeyAttributes(fields []string) (LLMKey, error) {
	var k LLMKey
	for _, f := range fields {
		name, val, ok := strings.Cut(f, "=")
		if !ok || val == "" {
			return k, fmt.Errorf("%q is not name=value (rpm=N, tpm=N, budget=DOLLARS/PERIOD, models=GLOB,…, routes=NAME,…)", f)
		}
		switch name {
		case "rpm", "tpm":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 1 {
				return k, fmt.Errorf("%s=%s: want a whole number of at least 1", name, val)
			}
			if name == "rpm" {
				k.Limits.RPM = n
			} else {
				k.Limits.TPM = n
			}
		case "budget":
			amount, period, _ := strings.Cut(val, "/")
			d, err := strconv.ParseFloat(amount, 64)
			if err != nil || !(d > 0) {
				return k, fmt.Errorf("budget=%s: want DOLLARS/PERIOD with dollars above 0, such as budget=25/day", val)
			}
			if period == "" {
				period = "day"
			}
			if period != "hour" && period != "day" && period != "month" {
				return k, fmt.Errorf("budget=%s: the period is hour, day or month", val)
			}
			k.Limits.Budget = &LLMBudget{Dollars: d, Period: period}
		case "models":
			k.Models = strings.Split(val, ",")
		case "routes":
			k.Routes = strings.Split(val, ",")
		default:
			return k, fmt.Errorf("%q is not a key attribute: use rpm, tpm, budget, models or routes", name)
		}
	}
	return k, nil
}

// RetryOn parses retry.on: statuses, "connect" and "timeout".
func RetryOn(on []string) (statuses []int, connect, timeout bool, err error) {
	for _, s := range on {
		switch s {
		case "connect":
			connect = true
		case "timeout":
			timeout = true
		default:
			n, e := strconv.Atoi(s)
			if e != nil || n < 400 || n > 599 {
				return nil, false, false, fmt.Errorf("%q is not an HTTP status from 400 to 599, connect or timeout", s)
			}
			statuses = append(statuses, n)
		}
	}
	return statuses, connect, timeout, nil
}

// RouteName is the route's metric label: its name, or else its match.
func (r *LLMRoute) RouteName() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Match
}

// Cleartext reports which cleartext protocols a listener speaks.
func (l *LLMListener) Cleartext() (http1, h2c bool) {
	for _, p := range l.Protocols {
		switch p {
		case "http1":
			http1 = true
		case "h2c":
			h2c = true
		}
	}
	return http1, h2c
}

func (c *Config) applyLLMDefaults() {
	l := c.LLM
	if l == nil {
		return
	}
	if !c.set["llm.max_body_bytes"] && l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultLLMMaxBodyBytes
	}
	if !c.set["llm.body_read_timeout"] && l.BodyReadTimeout.Duration == 0 {
		l.BodyReadTimeout.Duration = DefaultLLMBodyReadTimeout
	}
	if l.Limits.OnStoreError.RateLimits == "" {
		l.Limits.OnStoreError.RateLimits = "fail_open"
	}
	if l.Limits.OnStoreError.Budgets == "" {
		l.Limits.OnStoreError.Budgets = "fail_closed"
	}
	if !c.set["llm.translation.max_tokens_default"] && l.Translation.MaxTokensDefault == 0 {
		l.Translation.MaxTokensDefault = DefaultLLMMaxTokens
	}
	for i, ln := range l.Listeners {
		if ln == nil {
			continue
		}
		p := joinIndex("llm.listeners", i)
		if ln.TLS == nil && !c.set[p+".protocols"] && len(ln.Protocols) == 0 {
			ln.Protocols = []string{"http1", "h2c"}
		}
		if ln.TLS != nil {
			if ln.TLS.ClientAuth == "" {
				ln.TLS.ClientAuth = DefaultClientAuth
			}
			if ln.TLS.MinVersion == "" {
				ln.TLS.MinVersion = DefaultMinVersion
			}
		}
	}
	for name, pr := range l.Providers {
		if pr == nil {
			continue
		}
		pr.Name = name
		p := joinKey("llm.providers", name)
		if !c.set[p+".max_conns"] && pr.MaxConns == 0 {
			pr.MaxConns = DefaultLLMMaxConns
		}
		if !c.set[p+".connect_timeout"] && pr.ConnectTimeout.Duration == 0 {
			pr.ConnectTimeout.Duration = DefaultLLMConnectTimeout
		}
		if !c.set[p+".response_timeout"] && pr.ResponseTimeout.Duration == 0 {
			pr.ResponseTimeout.Duration = DefaultLLMResponseTimeout
		}
		if !c.set[p+".request_timeout"] && pr.RequestTimeout.Duration == 0 {
			pr.RequestTimeout.Duration = DefaultLLMRequestTimeout
		}
		if !c.set[p+".stream_idle_timeout"] && pr.StreamIdleTimeout.Duration == 0 {
			pr.StreamIdleTimeout.Duration = DefaultLLMStreamIdleTimeout
		}
	}
}

// llm checks the llm section; others are the addresses already taken (the
// admin listener and the virtual clusters), for clashes.
func (v *validator) llm(infos []vcInfo, admin vcInfo) {
	l := v.c.LLM
	if l == nil {
		return
	}
	c := v.c
	const lp = "llm.listeners"
	if len(l.Listeners) == 0 {
		v.add(lp, `at least one listener is required (e.g. listeners: [{listen: "127.0.0.1:8080"}])`)
	}
	var mine []vcInfo
	for i, ln := range l.Listeners {
		p := joinIndex(lp, i)
		if ln == nil {
			v.add(p, "is empty: set listen")
			continue
		}
		var info vcInfo
		if ln.Listen == "" {
			v.add(p+".listen", "is required: the host:port clients call (e.g. 127.0.0.1:8080)")
		} else {
			info.host, info.port, info.listenOK = v.hostPort(p+".listen", ln.Listen, false, "127.0.0.1:8080")
		}
		if ln.TLS != nil && len(ln.Protocols) > 0 {
			v.add(p+".protocols", "is for cleartext listeners: a TLS listener speaks HTTP/1.1 and HTTP/2 by ALPN; remove protocols")
		}
		seen := map[string]bool{}
		for j, proto := range ln.Protocols {
			pp := joinIndex(p+".protocols", j)
			if v.oneOf(pp, proto, "http1", "h2c") && seen[proto] {
				v.add(pp, fmt.Sprintf("%q is listed twice", proto))
			}
			seen[proto] = true
		}
		if ln.TLS == nil && len(ln.Protocols) == 0 && c.set[p+".protocols"] {
			v.add(p+".protocols", "is empty: list http1, h2c or both (or leave protocols out for both)")
		}
		switch ln.HTTP2Server {
		case "", "net/http":
		case "strait":
			if _, h2c := ln.Cleartext(); ln.TLS != nil || !h2c {
				v.add(p+".http2_server", "strait serves h2c (HTTP/2 without TLS) only: list h2c in protocols and leave tls out, or use net/http (the default)")
			}
		default:
			v.add(p+".http2_server", v.c.show(p+".http2_server", ln.HTTP2Server)+" is not allowed: use net/http (the default) or strait")
		}
		switch ln.HTTP1Server {
		case "", "net/http":
		case "strait":
			if h1, _ := ln.Cleartext(); ln.TLS != nil || !h1 {
				v.add(p+".http1_server", "strait serves cleartext HTTP/1.1 only: list http1 in protocols and leave tls out, or use net/http (the default)")
			}
		default:
			v.add(p+".http1_server", v.c.show(p+".http1_server", ln.HTTP1Server)+" is not allowed: use net/http (the default) or strait")
		}
		v.tlsServer(p+".tls", ln.TLS)
		if info.listenOK {
			v.llmClash(p+".listen", info, mine, infos, admin)
		}
		mine = append(mine, info)
	}

	v.llmKeys(l)
	if l.MaxBodyBytes <= 0 {
		v.add("llm.max_body_bytes", fmt.Sprintf("must be greater than 0 (the default is %d, 10MiB)", DefaultLLMMaxBodyBytes))
	}
	if l.BodyReadTimeout.Duration <= 0 {
		v.add("llm.body_read_timeout", "must be greater than zero (the default is 30s): it bounds how long a client may take to send a request body")
	}
	if l.Translation.MaxTokensDefault < 1 {
		v.add("llm.translation.max_tokens_default", fmt.Sprintf("must be at least 1 (the default is %d)", DefaultLLMMaxTokens))
	}
	if l.Translation.MaxTokensCap < 0 {
		v.add("llm.translation.max_tokens_cap", "must not be negative (0 means no cap)")
	}

	names := make([]string, 0, len(l.Providers))
	for name := range l.Providers {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		v.add("llm.providers", `at least one provider is required (e.g. providers: {openai: {dialect: openai, base_url: "https://api.openai.com", api_key: "${env:OPENAI_API_KEY}"}})`)
	}
	for _, name := range names {
		v.llmProvider(joinKey("llm.providers", name), name, l.Providers[name])
	}
	v.llmRoutes(l, names)
	v.llmLimits(l)
}

// llmClash reports a listener address already taken.
func (v *validator) llmClash(path string, me vcInfo, mine, vcs []vcInfo, admin vcInfo) {
	for i, o := range mine {
		if o.listenOK && o.port == me.port && sameHost(o.host, me.host) {
			v.add(path, fmt.Sprintf("port %d is also the listen port of llm.listeners[%d]: give each listener its own", me.port, i))
		}
	}
	if admin.listenOK && admin.port == me.port && sameHost(admin.host, me.host) {
		v.add(path, fmt.Sprintf("port %d is also the admin listener's: use another port", me.port))
	}
	for j, b := range vcs {
		if !sameHost(b.host, me.host) {
			continue
		}
		if b.listenOK && b.port == me.port {
			v.add(path, fmt.Sprintf("port %d is also the listen port of virtual_clusters[%d]: use another port", me.port, j))
		}
		if b.rangeOK && b.start <= me.port && me.port <= b.end {
			v.add(path, fmt.Sprintf("port %d is inside node_ports %d-%d of virtual_clusters[%d]: use a port outside that range", me.port, b.start, b.end, j))
		}
	}
}

func (v *validator) llmKeys(l *LLM) {
	const kp = "llm.api_keys"
	seen := map[string]string{}
	byHash := map[[sha256.Size]byte]string{}
	for i, k := range l.APIKeys {
		p := joinIndex(kp, i)
		if k == nil {
			v.add(p, "is empty: set name and sha256 (or key)")
			continue
		}
		switch {
		case k.Name == "":
			v.add(p+".name", "is required: name the key, for the access log (e.g. name: team-a)")
		case !nameRE.MatchString(k.Name):
			v.add(p+".name", v.c.show(p+".name", k.Name)+" is not a valid name: use only letters, digits, '_', '.' and '-'")
		case seen[k.Name] != "":
			v.add(p+".name", fmt.Sprintf("%q is already the name of %s: names must be unique", k.Name, seen[k.Name]))
		default:
			seen[k.Name] = p
		}
		sum, err := k.hash()
		if err != nil {
			field := ".sha256"
			if k.SHA256 == "" && k.Key == "" {
				field = ""
			}
			v.add(p+field, err.Error())
			continue
		}
		if other, dup := byHash[sum]; dup {
			v.add(p, fmt.Sprintf("is the same key as %s: give each client its own key", other))
		}
		byHash[sum] = p
	}
	n := len(l.APIKeys)
	if l.APIKeysFile != "" {
		keys, err := readKeysFile(l.APIKeysFile)
		if err != nil {
			v.add("llm.api_keys_file", err.Error())
		}
		for _, k := range keys {
			if k.Limits.Budget != nil && len(l.Prices) == 0 {
				v.add("llm.api_keys_file", fmt.Sprintf("key %q has a budget, which needs llm.prices: spend is counted from the price of each model (dollars per million tokens)", k.Name))
			}
			if seen[k.Name] != "" {
				v.add("llm.api_keys_file", fmt.Sprintf("key name %q is already the name of %s: names must be unique", k.Name, seen[k.Name]))
			}
			seen[k.Name] = "a key in api_keys_file"
		}
		n += len(keys)
		if err == nil && len(keys) == 0 {
			v.add("llm.api_keys_file", fmt.Sprintf("%s holds no keys: add \"name sha256-hex\" lines", l.APIKeysFile))
		}
	}
	if n == 0 && !v.c.isBad("llm.api_keys_file") {
		v.add(kp, `at least one gateway key is required: clients must present one (e.g. api_keys: [{name: demo, key: "${env:STRAIT_LLM_KEY}"}])`)
	}
}

func (v *validator) llmProvider(p, name string, pr *LLMProvider) {
	if !nameRE.MatchString(name) {
		v.add(p, fmt.Sprintf("%q is not a valid provider name: use only letters, digits, '_', '.' and '-'", name))
	}
	if pr == nil {
		v.add(p, "has no settings: set dialect and base_url")
		return
	}
	v.oneOf(p+".dialect", pr.Dialect, "openai", "anthropic")
	tlsOn := false
	bp := p + ".base_url"
	if pr.BaseURL == "" {
		v.add(bp, "is required: the provider's address, e.g. https://api.openai.com or http://127.0.0.1:8000")
	} else if u, err := url.Parse(pr.BaseURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
		v.add(bp, v.c.show(bp, pr.BaseURL)+" is not a base URL: write http(s)://host[:port][/prefix], e.g. https://api.anthropic.com")
	} else {
		tlsOn = u.Scheme == "https"
		if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") {
			v.add(bp, v.c.show(bp, pr.BaseURL)+" ends in /v1, but Strait appends /v1/chat/completions or /v1/messages itself: leave /v1 out")
		}
	}
	if v.oneOf(p+".http", pr.HTTP, "", "h1", "h2c", "h2") && pr.BaseURL != "" {
		switch {
		case pr.HTTP == "h2c" && tlsOn:
			v.add(p+".http", "h2c is HTTP/2 without TLS, but base_url is https://: use h2, or an http:// base_url")
		case pr.HTTP == "h2" && !tlsOn && !v.c.isBad(bp):
			v.add(p+".http", "h2 is HTTP/2 over TLS, but base_url is http://: use h2c, or an https:// base_url")
		}
	}
	switch pr.HTTP2Client {
	case "", "strait", "net/http":
		if pr.HTTP2Client != "" && pr.HTTP != "h2c" && pr.HTTP != "h2" {
			v.add(p+".http2_client", "only applies to HTTP/2 toward the provider: set http to h2c or h2, or remove http2_client")
		}
	default:
		v.add(p+".http2_client", v.c.show(p+".http2_client", pr.HTTP2Client)+" is not allowed: use strait (the default) or net/http")
	}
	switch pr.HTTP1Client {
	case "", "strait", "net/http":
		// tlsOn is only true for a good https:// base_url, so a bad one
		// gets no second error here.
		if pr.HTTP1Client != "" && (pr.HTTP == "h2c" || pr.HTTP == "h2" || (pr.HTTP == "" && tlsOn)) {
			v.add(p+".http1_client", "only applies to HTTP/1.1 toward the provider: set http to h1 (or leave it empty with an http:// base_url), or remove http1_client")
		}
	default:
		v.add(p+".http1_client", v.c.show(p+".http1_client", pr.HTTP1Client)+" is not allowed: use strait (the default) or net/http")
	}
	if t := pr.TLS; t != nil {
		if !tlsOn && !v.c.isBad(bp) {
			v.add(p+".tls", "is only used with an https:// base_url: remove it, or use https://")
		}
		switch {
		case t.CertFile == "" && t.KeyFile != "":
			v.add(p+".tls.cert_file", "is required when key_file is set")
		case t.CertFile != "" && t.KeyFile == "":
			v.add(p+".tls.key_file", "is required when cert_file is set")
		case t.CertFile != "":
			v.keyPair(p+".tls", t.CertFile, t.KeyFile)
		}
		if t.CAFile != "" {
			v.caFile(p+".tls.ca_file", t.CAFile)
		}
	}
	if pr.MaxConns < 1 {
		v.add(p+".max_conns", fmt.Sprintf("must be at least 1 (the default is %d)", DefaultLLMMaxConns))
	}
	for _, d := range []struct {
		key string
		val time.Duration
		eg  string
	}{
		{"connect_timeout", pr.ConnectTimeout.Duration, "5s"},
		{"response_timeout", pr.ResponseTimeout.Duration, "60s"},
		{"request_timeout", pr.RequestTimeout.Duration, "10m"},
		{"stream_idle_timeout", pr.StreamIdleTimeout.Duration, "2m"},
	} {
		if d.val <= 0 {
			v.add(p+"."+d.key, "must be greater than zero (e.g. "+d.eg+")")
		}
	}
}

func (v *validator) llmRoutes(l *LLM, providers []string) {
	const rp = "llm.routes"
	if len(l.Routes) == 0 {
		v.add(rp, `at least one route is required (e.g. routes: [{match: "gpt-*", provider: openai}])`)
	}
	known := "no providers are defined under llm.providers"
	if len(providers) > 0 {
		known = "known providers: " + strings.Join(providers, ", ")
	}
	names := map[string]int{}
	matches := map[string]int{}
	for i, r := range l.Routes {
		p := joinIndex(rp, i)
		if r == nil {
			v.add(p, "is empty: set match and provider")
			continue
		}
		if r.Match == "" {
			v.add(p+".match", `is required: a model name or a glob such as "gpt-*"`)
		} else if j, dup := matches[r.Match]; dup {
			v.add(p+".match", fmt.Sprintf("%q is also the match of llm.routes[%d], which comes first, so this route would never be used", r.Match, j))
		} else {
			matches[r.Match] = i
		}
		if name := r.RouteName(); name != "" {
			if j, dup := names[name]; dup && r.Match != l.Routes[j].Match {
				v.add(p+".name", fmt.Sprintf("%q is already the name of llm.routes[%d]: route names must be unique", name, j))
			}
			names[name] = i
		}
		switch {
		case len(r.Targets) > 0 && (r.Provider != "" || r.Model != ""):
			v.add(p+".targets", "is given with provider or model: give provider (and model) for one target, or targets for several, not both")
		case len(r.Targets) == 0 && r.Provider == "":
			v.add(p+".provider", "is required: name the provider that serves this route ("+known+"), or list targets")
		case len(r.Targets) == 0:
			if _, ok := l.Providers[r.Provider]; !ok {
				v.add(p+".provider", fmt.Sprintf("%s is not defined under llm.providers (%s)", v.c.show(p+".provider", r.Provider), known))
			}
		}
		v.llmTargets(l, p, r, known)
		for j, m := range r.Models {
			if strings.TrimSpace(m) == "" {
				v.add(joinIndex(p+".models", j), "is empty: give a model name")
			}
		}
	}
}

// llmTargets checks a route's targets, strategy, retry, deadline and
// health.
func (v *validator) llmTargets(l *LLM, p string, r *LLMRoute, known string) {
	tnames := map[string]int{}
	for j, t := range r.Targets {
		tp := joinIndex(p+".targets", j)
		if t == nil {
			v.add(tp, "is empty: set provider (and optionally model, weight, api_key)")
			continue
		}
		if t.Provider == "" {
			v.add(tp+".provider", "is required: name the provider of this target ("+known+")")
		} else if _, ok := l.Providers[t.Provider]; !ok {
			v.add(tp+".provider", fmt.Sprintf("%s is not defined under llm.providers (%s)", v.c.show(tp+".provider", t.Provider), known))
		}
		if t.Weight < 0 {
			v.add(tp+".weight", "must not be negative (the default is 1)")
		}
		name := t.Name
		if name == "" {
			name = t.Provider
			if t.Model != "" && len(r.Targets) > 1 {
				name += "/" + t.Model
			}
		} else if !nameRE.MatchString(name) && !strings.Contains(name, "/") {
			v.add(tp+".name", v.c.show(tp+".name", name)+" is not a valid name: use only letters, digits, '_', '.', '-' and '/'")
		}
		if k, dup := tnames[name]; dup {
			v.add(tp, fmt.Sprintf("is also %s[%d] (%q): give one of them a name (targets[].name), so that metrics and headers tell them apart", p+".targets", k, name))
		}
		tnames[name] = j
	}
	if r.Strategy != "" {
		v.oneOf(p+".strategy", r.Strategy, "fallback", "weighted")
		if len(r.Targets) < 2 {
			v.add(p+".strategy", "is for a route with several targets: list them under targets")
		}
	}
	if rt := r.Retry; rt != nil {
		if rt.Attempts < 1 || rt.Attempts > 10 {
			v.add(p+".retry.attempts", "must be from 1 to 10: how many times each target is tried, the first included")
		}
		if rt.Backoff.Duration < 0 {
			v.add(p+".retry.backoff", "must not be negative (e.g. 100ms)")
		}
		if rt.MaxBackoff.Duration < 0 || (rt.MaxBackoff.Duration > 0 && rt.MaxBackoff.Duration < rt.Backoff.Duration) {
			v.add(p+".retry.max_backoff", "must be at least backoff (e.g. 2s)")
		}
		if _, _, _, err := RetryOn(rt.On); err != nil {
			v.add(p+".retry.on", err.Error())
		}
	}
	if r.Deadline.Duration < 0 {
		v.add(p+".deadline", "must not be negative (0, the default, means none)")
	}
	if h := r.Health; h != nil {
		if h.Failures < 1 {
			v.add(p+".health.failures", "must be at least 1: the failures within window that eject a target")
		}
		if h.Window.Duration <= 0 {
			v.add(p+".health.window", "must be greater than zero (e.g. 30s)")
		}
		if h.Cooldown.Duration <= 0 {
			v.add(p+".health.cooldown", "must be greater than zero (e.g. 30s): how long an ejected target is left out")
		}
	}
}

// llmLimits checks prices, the limit store and the keys' limits.
func (v *validator) llmLimits(l *LLM) {
	for i, pr := range l.Prices {
		p := joinIndex("llm.prices", i)
		if pr == nil {
			v.add(p, "is empty: set model, input and output (dollars per million tokens)")
			continue
		}
		if pr.Model == "" {
			v.add(p+".model", "is required: the model name a provider is asked for, or a glob")
		}
		if pr.Input < 0 || pr.Output < 0 {
			v.add(p, "prices must not be negative")
		}
	}
	if l.Limits.RedisURL != "" {
		u, err := url.Parse(string(l.Limits.RedisURL))
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			v.add("llm.limits.redis_url", "is not a Redis URL: write redis://host:port[/db] (rediss:// for TLS)")
		}
	}
	if l.Limits.Timeout.Duration < 0 {
		v.add("llm.limits.timeout", "must not be negative (e.g. 250ms)")
	}
	if s := l.Limits.OnStoreError.RateLimits; s != "" {
		v.oneOf("llm.limits.on_store_error.rate_limits", s, "fail_open", "fail_closed")
	}
	if s := l.Limits.OnStoreError.Budgets; s != "" {
		v.oneOf("llm.limits.on_store_error.budgets", s, "fail_open", "fail_closed")
	}
	for i, k := range l.APIKeys {
		if k == nil || k.Limits == nil {
			continue
		}
		p := joinIndex("llm.api_keys", i) + ".limits"
		if k.Limits.RPM < 0 {
			v.add(p+".rpm", "must not be negative (leave it out for no limit)")
		}
		if k.Limits.TPM < 0 {
			v.add(p+".tpm", "must not be negative (leave it out for no limit)")
		}
		if b := k.Limits.Budget; b != nil {
			if !(b.Dollars > 0) {
				v.add(p+".budget.dollars", "must be above 0")
			}
			if b.Period != "" {
				v.oneOf(p+".budget.period", b.Period, "hour", "day", "month")
			}
			if len(l.Prices) == 0 {
				v.add(p+".budget", "needs llm.prices: spend is counted from the price of each model (dollars per million tokens)")
			}
		}
	}
}
