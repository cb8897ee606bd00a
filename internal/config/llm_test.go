package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// llmMinimal is the smallest valid LLM-only configuration.
var llmMinimal = []string{
	/* 1 */ "llm:",
	/* 2 */ "  listeners:",
	/* 3 */ "    - listen: 127.0.0.1:8080",
	/* 4 */ "  api_keys:",
	/* 5 */ "    - {name: demo, sha256: " + sha("demo-key") + "}",
	/* 6 */ "  providers:",
	/* 7 */ "    mock: {dialect: openai, base_url: \"http://127.0.0.1:8000\"}",
	/* 8 */ "  routes:",
	/* 9 */ "    - {match: \"gpt-*\", provider: mock}",
}

func sha(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// llmWith is llmMinimal with line n (1-based) replaced by repl ("" deletes
// it) and extra lines appended.
func llmWith(n int, repl string, extra ...string) []string {
	out := append([]string(nil), llmMinimal...)
	if n > 0 {
		out[n-1] = repl
		if repl == "" {
			out = append(out[:n-1], out[n:]...)
		}
	}
	return append(out, extra...)
}

// http2_server: strait on a listener whose protocols are the default
// (http1 and h2c) is accepted.
func TestLLMStraitH2CDefaultProtocols(t *testing.T) {
	cfg := mustParse(t, doc(llmWith(3, "    - {listen: 127.0.0.1:8080, http2_server: strait}")...))
	if ln := cfg.LLM.Listeners[0]; !ln.StraitH2C() {
		t.Errorf("listener %+v", ln)
	}
	cfg = mustParse(t, doc(llmMinimal...))
	if ln := cfg.LLM.Listeners[0]; ln.StraitH2C() || ln.HTTP2Server != "" {
		t.Errorf("http2_server's default: %+v", ln)
	}
}

// http1_server: strait is accepted on a cleartext listener speaking
// HTTP/1.1, with either HTTP/2 server; net/http is the default.
func TestLLMStraitHTTP1(t *testing.T) {
	for _, ln := range []string{
		"    - {listen: 127.0.0.1:8080, http1_server: strait}",
		"    - {listen: 127.0.0.1:8080, http1_server: strait, protocols: [http1]}",
		"    - {listen: 127.0.0.1:8080, http1_server: strait, http2_server: strait}",
	} {
		cfg := mustParse(t, doc(llmWith(3, ln)...))
		if l := cfg.LLM.Listeners[0]; !l.StraitHTTP1() {
			t.Errorf("%s: %+v", ln, l)
		}
	}
	cfg := mustParse(t, doc(llmMinimal...))
	if ln := cfg.LLM.Listeners[0]; ln.StraitHTTP1() || ln.HTTP1Server != "" {
		t.Errorf("http1_server's default: %+v", ln)
	}
}

// http1_client is accepted wherever the provider speaks HTTP/1.1: http: h1
// (over http:// or https://) and the default over http://; a base_url
// that is already wrong gets no second error from it.
func TestLLMHTTP1Client(t *testing.T) {
	for _, line := range []string{
		"    mock: {dialect: openai, base_url: \"http://h:1\", http: h1, http1_client: net/http}",
		"    mock: {dialect: openai, base_url: \"https://h\", http: h1, http1_client: net/http}",
		"    mock: {dialect: openai, base_url: \"http://h:1\", http1_client: strait}",
	} {
		cfg := mustParse(t, doc(llmWith(7, line)...))
		if got := cfg.LLM.Providers["mock"].HTTP1Client; got == "" {
			t.Errorf("%s: http1_client not carried", line)
		}
	}
	if got := mustParse(t, doc(llmMinimal...)).LLM.Providers["mock"].HTTP1Client; got != "" {
		t.Errorf("http1_client's default: %q", got)
	}
	errs := parseErrs(t, doc(llmWith(7, "    mock: {dialect: openai, base_url: \"https//h\", http1_client: net/http}")...))
	if findErr(errs, "llm.providers.mock.base_url") == nil || findErr(errs, "llm.providers.mock.http1_client") != nil {
		t.Errorf("a bad base_url: %v; want an error on base_url only", errs)
	}
}

func TestLLMDefaults(t *testing.T) {
	cfg := mustParse(t, doc(llmMinimal...))
	l := cfg.LLM
	if l == nil {
		t.Fatal("llm section not decoded")
	}
	p := l.Providers["mock"]
	ln := l.Listeners[0]
	h1, h2c := ln.Cleartext()
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"max_body_bytes", l.MaxBodyBytes, ByteSize(DefaultLLMMaxBodyBytes)},
		{"max_tokens_default", l.Translation.MaxTokensDefault, DefaultLLMMaxTokens},
		{"protocols", fmt.Sprint(ln.Protocols), "[http1 h2c]"},
		{"cleartext", fmt.Sprint(h1, h2c), "true true"},
		{"provider name", p.Name, "mock"},
		{"max_conns", p.MaxConns, DefaultLLMMaxConns},
		{"connect_timeout", p.ConnectTimeout.Duration, DefaultLLMConnectTimeout},
		{"response_timeout", p.ResponseTimeout.Duration, DefaultLLMResponseTimeout},
		{"request_timeout", p.RequestTimeout.Duration, DefaultLLMRequestTimeout},
		{"stream_idle_timeout", p.StreamIdleTimeout.Duration, DefaultLLMStreamIdleTimeout},
		{"body_read_timeout", l.BodyReadTimeout.Duration, DefaultLLMBodyReadTimeout},
		{"route name", l.Routes[0].RouteName(), "gpt-*"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	keys, err := l.Keys()
	if err != nil || len(keys) != 1 || keys[0].Name != "demo" || keys[0].SHA256 != sha256.Sum256([]byte("demo-key")) {
		t.Errorf("Keys: %v %v", keys, err)
	}
}

func TestLLMFull(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir, "llm")
	keysFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keysFile, []byte("# team keys\n\nteam-a "+sha("a-key")+"\n  team-b   "+sha("b-key")+"  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLM_TEST_KEY", "env-key")
	t.Setenv("LLM_PROVIDER_KEY", "sk-provider")
	cfg := mustParse(t, doc(
		"admin: {listen: 127.0.0.1:9190}",
		"llm:",
		"  listeners:",
		"    - {listen: 127.0.0.1:8080, protocols: [h2c], http2_server: strait}",
		"    - listen: 127.0.0.1:8443",
		"      tls: {cert_file: "+cert+", key_file: "+key+"}",
		"  api_keys:",
		"    - {name: from-env, key: \"${env:LLM_TEST_KEY}\"}",
		"  api_keys_file: "+keysFile,
		"  max_body_bytes: 2MiB",
		"  body_read_timeout: 5s",
		"  translation: {max_tokens_default: 1024, max_tokens_cap: 8192, strict: true}",
		"  providers:",
		"    openai:",
		"      dialect: openai",
		"      base_url: https://api.example.com/openai",
		"      api_key: ${env:LLM_PROVIDER_KEY}",
		"      http: h2",
		"      tls: {ca_file: "+cert+", server_name: api.example.com}",
		"      max_conns: 16",
		"      connect_timeout: 2s",
		"      response_timeout: 30s",
		"      request_timeout: 5m",
		"      stream_idle_timeout: 45s",
		"    local: {dialect: anthropic, base_url: \"http://127.0.0.1:8000/\", http: h2c, http2_client: net/http}",
		"    plain: {dialect: openai, base_url: \"http://127.0.0.1:8001\", http1_client: net/http}",
		"  routes:",
		"    - {name: gpt, match: \"gpt-*\", provider: openai, models: [gpt-4o, gpt-4o-mini]}",
		"    - {match: claude-sonnet, provider: local, model: claude-sonnet-4-5}",
	))
	l := cfg.LLM
	if cfg.VirtualClusters != nil || cfg.Clusters != nil {
		t.Error("an LLM-only config grew Kafka settings")
	}
	h1, h2c := l.Listeners[0].Cleartext()
	if h1 || !h2c || l.Listeners[1].TLS.MinVersion != "1.2" || len(l.Listeners[1].Protocols) != 0 {
		t.Errorf("listeners: %+v %+v", l.Listeners[0], l.Listeners[1])
	}
	if !l.Listeners[0].StraitH2C() || l.Listeners[1].StraitH2C() {
		t.Errorf("http2_server: %q %q", l.Listeners[0].HTTP2Server, l.Listeners[1].HTTP2Server)
	}
	if l.MaxBodyBytes != 2<<20 || l.Translation != (LLMTranslation{1024, 8192, true}) {
		t.Errorf("max_body_bytes %d, translation %+v", l.MaxBodyBytes, l.Translation)
	}
	p := l.Providers["openai"]
	if string(p.APIKey) != "sk-provider" || p.HTTP != "h2" || p.MaxConns != 16 || p.ResponseTimeout.Duration != 30*time.Second || p.StreamIdleTimeout.Duration != 45*time.Second {
		t.Errorf("provider %+v", p)
	}
	if lp := l.Providers["local"]; lp.HTTP2Client != "net/http" {
		t.Errorf("local's http2_client %q", lp.HTTP2Client)
	}
	if pp := l.Providers["plain"]; pp.HTTP1Client != "net/http" || l.Providers["local"].HTTP1Client != "" {
		t.Errorf("plain's http1_client %q, local's %q", pp.HTTP1Client, l.Providers["local"].HTTP1Client)
	}
	if l.BodyReadTimeout.Duration != 5*time.Second {
		t.Errorf("body_read_timeout %v", l.BodyReadTimeout)
	}
	if tc, err := p.TLS.Build(); err != nil || tc.ServerName != "api.example.com" || tc.RootCAs == nil {
		t.Errorf("provider TLS: %v", err)
	}
	keys, err := l.Keys()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	if strings.Join(names, ",") != "from-env,team-a,team-b" || keys[0].SHA256 != sha256.Sum256([]byte("env-key")) || keys[2].SHA256 != sha256.Sum256([]byte("b-key")) {
		t.Errorf("keys %v", names)
	}
	if l.Routes[0].RouteName() != "gpt" || l.Routes[1].Model != "claude-sonnet-4-5" {
		t.Errorf("routes %+v %+v", l.Routes[0], l.Routes[1])
	}
}

func TestLLMErrors(t *testing.T) {
	dir := t.TempDir()
	badKeys := filepath.Join(dir, "bad-keys")
	os.WriteFile(badKeys, []byte("ok "+sha("k")+"\nonly-one-field\nbad/name "+sha("x")+"\nshort abc\n"), 0o600)
	goodKeys := filepath.Join(dir, "good-keys")
	os.WriteFile(goodKeys, []byte("ok "+sha("k")+"\n"), 0o600)
	emptyKeys := filepath.Join(dir, "empty-keys")
	os.WriteFile(emptyKeys, []byte("# nothing\n"), 0o600)
	tests := []struct {
		name     string
		yaml     []string
		wantPath string
		wantLine int
		wantMsg  string
	}{
		{"unknown key", llmWith(3, "    - {listen: 127.0.0.1:8080, protocol: [h2c]}"), "llm.listeners[0].protocol", 3, `did you mean "protocols"?`},
		{"no listeners", llmWith(3, "    []"), "llm.listeners", 2, "at least one listener"},
		{"bad listen", llmWith(3, "    - listen: 127.0.0.1"), "llm.listeners[0].listen", 3, "the port is missing"},
		{"bad protocol", llmWith(3, "    - {listen: 127.0.0.1:8080, protocols: [http2]}"), "llm.listeners[0].protocols[0]", 3, "use one of http1, h2c"},
		{"protocols with tls", llmWith(3, "    - {listen: 127.0.0.1:8080, protocols: [h2c], tls: {cert_file: x, key_file: y}}"), "llm.listeners[0].protocols", 3, "a TLS listener speaks HTTP/1.1 and HTTP/2 by ALPN"},
		{"bad http2_server", llmWith(3, "    - {listen: 127.0.0.1:8080, http2_server: lean}"), "llm.listeners[0].http2_server", 3, "use net/http (the default) or strait"},
		{"http2_server strait with tls", llmWith(3, "    - {listen: 127.0.0.1:8080, http2_server: strait, tls: {cert_file: x, key_file: y}}"), "llm.listeners[0].http2_server", 3, "strait serves h2c (HTTP/2 without TLS) only"},
		{"bad http1_server", llmWith(3, "    - {listen: 127.0.0.1:8080, http1_server: lean}"), "llm.listeners[0].http1_server", 3, "use net/http (the default) or strait"},
		{"http1_server strait with tls", llmWith(3, "    - {listen: 127.0.0.1:8080, http1_server: strait, tls: {cert_file: x, key_file: y}}"), "llm.listeners[0].http1_server", 3, "strait serves cleartext HTTP/1.1 only"},
		{"http1_server strait without http1", llmWith(3, "    - {listen: 127.0.0.1:8080, http1_server: strait, protocols: [h2c]}"), "llm.listeners[0].http1_server", 3, "list http1 in protocols and leave tls out"},
		{"http2_server strait without h2c", llmWith(3, "    - {listen: 127.0.0.1:8080, http2_server: strait, protocols: [http1]}"), "llm.listeners[0].http2_server", 3, "list h2c in protocols and leave tls out"},
		{"listeners clash", llmWith(3, "    - listen: 127.0.0.1:8080\n    - listen: :8080"), "llm.listeners[1].listen", 4, "also the listen port of llm.listeners[0]"},
		{"admin clash", llmWith(0, "", "admin: {listen: \"127.0.0.1:8080\"}"), "llm.listeners[0].listen", 3, "admin listener"},
		{"virtual cluster clash", llmWith(0, "", "clusters: {local: {bootstrap_servers: [\"127.0.0.1:9092\"]}}",
			"virtual_clusters: [{name: demo, cluster: local, listen: \"127.0.0.1:8079\"}]"), "llm.listeners[0].listen", 3, "inside node_ports 8080-9079 of virtual_clusters[0]"},
		{"no keys", llmWith(5, ""), "llm.api_keys", 4, "at least one gateway key"},
		{"key without name", llmWith(5, "    - {sha256: "+sha("k")+"}"), "llm.api_keys[0].name", 5, "is required"},
		{"bad sha256", llmWith(5, "    - {name: a, sha256: abc}"), "llm.api_keys[0].sha256", 5, "64 hexadecimal digits"},
		{"sha256 and key", llmWith(5, "    - {name: a, sha256: "+sha("k")+", key: k}"), "llm.api_keys[0].sha256", 5, "not both"},
		{"neither", llmWith(5, "    - {name: a}"), "llm.api_keys[0]", 5, "give the key's sha256"},
		{"duplicate key name", llmWith(5, "    - {name: a, key: k1}\n    - {name: a, key: k2}"), "llm.api_keys[1].name", 6, "already the name"},
		{"same key twice", llmWith(5, "    - {name: a, key: k1}\n    - {name: b, sha256: "+sha("k1")+"}"), "llm.api_keys[1]", 6, "same key as llm.api_keys[0]"},
		{"file key name clash", llmWith(5, "    - {name: ok, key: k1}", "  api_keys_file: "+goodKeys), "llm.api_keys_file", 10, `key name "ok" is already the name of llm.api_keys[0]`},
		{"keys file missing", llmWith(5, "", "  api_keys_file: "+filepath.Join(dir, "nope")), "llm.api_keys_file", 9, "cannot read"},
		{"keys file bad lines", llmWith(5, "", "  api_keys_file: "+badKeys), "llm.api_keys_file", 9, ":2: want \"name sha256-hex\""},
		{"keys file bad name", llmWith(5, "", "  api_keys_file: "+badKeys), "llm.api_keys_file", 9, ":3: \"bad/name\" is not a valid key name"},
		{"keys file bad hash", llmWith(5, "", "  api_keys_file: "+badKeys), "llm.api_keys_file", 9, ":4: sha256 must be 64"},
		{"keys file empty", llmWith(5, "", "  api_keys_file: "+emptyKeys), "llm.api_keys_file", 9, "holds no keys"},
		{"bad size", llmWith(0, "", "  max_body_bytes: 10 megs"), "llm.max_body_bytes", 10, "is not a size"},
		{"zero size", llmWith(0, "", "  max_body_bytes: 0"), "llm.max_body_bytes", 10, "must be greater than 0"},
		{"body_read_timeout zero", llmWith(0, "", "  body_read_timeout: 0s"), "llm.body_read_timeout", 10, "must be greater than zero (the default is 30s)"},
		{"body_read_timeout without unit", llmWith(0, "", "  body_read_timeout: 30"), "llm.body_read_timeout", 10, "add a unit"},
		{"bad http2_client", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", http: h2c, http2_client: go}"), "llm.providers.mock.http2_client", 7, "use strait (the default) or net/http"},
		{"http2_client without HTTP/2", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", http2_client: net/http}"), "llm.providers.mock.http2_client", 7, "set http to h2c or h2, or remove http2_client"},
		{"bad http1_client", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", http1_client: go}"), "llm.providers.mock.http1_client", 7, `"go" is not allowed: use strait (the default) or net/http`},
		{"http1_client with h2c", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", http: h2c, http1_client: net/http}"), "llm.providers.mock.http1_client", 7, "only applies to HTTP/1.1 toward the provider: set http to h1 (or leave it empty with an http:// base_url), or remove http1_client"},
		{"http1_client with h2", llmWith(7, "    mock: {dialect: openai, base_url: \"https://h\", http: h2, http1_client: strait}"), "llm.providers.mock.http1_client", 7, "only applies to HTTP/1.1"},
		{"http1_client with auto over https", llmWith(7, "    mock: {dialect: openai, base_url: \"https://h\", http1_client: net/http}"), "llm.providers.mock.http1_client", 7, "set http to h1 (or leave it empty with an http:// base_url)"},
		{"stream_idle_timeout zero", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", stream_idle_timeout: 0s}"), "llm.providers.mock.stream_idle_timeout", 7, "greater than zero (e.g. 2m)"},
		{"max tokens zero", llmWith(0, "", "  translation: {max_tokens_default: 0}"), "llm.translation.max_tokens_default", 10, "at least 1"},
		{"no providers", llmWith(7, "    {}"), "llm.providers", 6, "at least one provider"},
		{"bad dialect", llmWith(7, "    mock: {dialect: gemini, base_url: \"http://127.0.0.1:8000\"}"), "llm.providers.mock.dialect", 7, "use one of openai, anthropic"},
		{"missing base_url", llmWith(7, "    mock: {dialect: openai}"), "llm.providers.mock.base_url", 7, "is required"},
		{"bad base_url", llmWith(7, "    mock: {dialect: openai, base_url: \"127.0.0.1:8000\"}"), "llm.providers.mock.base_url", 7, "is not a base URL"},
		{"base_url with /v1", llmWith(7, "    mock: {dialect: openai, base_url: \"https://api.openai.com/v1\"}"), "llm.providers.mock.base_url", 7, "leave /v1 out"},
		{"bad http", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", http: http2}"), "llm.providers.mock.http", 7, "use one of"},
		{"h2c over https", llmWith(7, "    mock: {dialect: openai, base_url: \"https://h\", http: h2c}"), "llm.providers.mock.http", 7, "h2c is HTTP/2 without TLS"},
		{"h2 over http", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", http: h2}"), "llm.providers.mock.http", 7, "h2 is HTTP/2 over TLS"},
		{"tls over http", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", tls: {insecure_skip_verify: true}}"), "llm.providers.mock.tls", 7, "only used with an https://"},
		{"tls cert without key", llmWith(7, "    mock: {dialect: openai, base_url: \"https://h\", tls: {cert_file: x}}"), "llm.providers.mock.tls.key_file", 7, "is required"},
		{"max_conns zero", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", max_conns: 0}"), "llm.providers.mock.max_conns", 7, "at least 1"},
		{"timeout zero", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", response_timeout: 0s}"), "llm.providers.mock.response_timeout", 7, "greater than zero"},
		{"timeout without unit", llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", request_timeout: 30}"), "llm.providers.mock.request_timeout", 7, "add a unit"},
		{"no routes", llmWith(9, "    []"), "llm.routes", 8, "at least one route"},
		{"route without match", llmWith(9, "    - {provider: mock}"), "llm.routes[0].match", 9, "is required"},
		{"route to unknown provider", llmWith(9, "    - {match: x, provider: nope}"), "llm.routes[0].provider", 9, `"nope" is not defined under llm.providers (known providers: mock)`},
		{"unreachable route", llmWith(0, "", "    - {match: \"gpt-*\", provider: mock}"), "llm.routes[1].match", 10, "would never be used"},
		{"duplicate route name", llmWith(9, "    - {name: r, match: a, provider: mock}", "    - {name: r, match: b, provider: mock}"), "llm.routes[1].name", 10, "must be unique"},
		{"empty listed model", llmWith(9, "    - {match: a, provider: mock, models: [\"\"]}"), "llm.routes[0].models[0]", 9, "is empty"},
		{"empty llm", []string{"llm: {}"}, "llm.listeners", 1, "at least one listener"},
		{"provider and targets", llmWith(9, "    - {match: a, provider: mock, targets: [{provider: mock}]}"), "llm.routes[0].targets", 9, "not both"},
		{"target to unknown provider", llmWith(9, "    - {match: a, targets: [{provider: nope}]}"), "llm.routes[0].targets[0].provider", 9, `"nope" is not defined`},
		{"same target twice", llmWith(9, "    - {match: a, targets: [{provider: mock}, {provider: mock}]}"), "llm.routes[0].targets[1]", 9, "give one of them a name"},
		{"bad strategy", llmWith(9, "    - {match: a, strategy: random, targets: [{provider: mock}, {provider: mock, name: b}]}"), "llm.routes[0].strategy", 9, "use one of fallback, weighted"},
		{"negative weight", llmWith(9, "    - {match: a, targets: [{provider: mock, weight: -1}]}"), "llm.routes[0].targets[0].weight", 9, "must not be negative"},
		{"bad retry on", llmWith(9, "    - {match: a, provider: mock, retry: {attempts: 2, on: [5xx]}}"), "llm.routes[0].retry.on", 9, `"5xx" is not an HTTP status`},
		{"retry attempts zero", llmWith(9, "    - {match: a, provider: mock, retry: {attempts: 0}}"), "llm.routes[0].retry.attempts", 9, "from 1 to 10"},
		{"health without cooldown", llmWith(9, "    - {match: a, provider: mock, health: {failures: 3, window: 10s}}"), "llm.routes[0].health.cooldown", 9, "greater than zero"},
		{"budget without prices", llmWith(5, "    - {name: a, key: k1, limits: {budget: {dollars: 5, period: day}}}"), "llm.api_keys[0].limits.budget", 5, "needs llm.prices"},
		{"bad budget period", llmWith(5, "    - {name: a, key: k1, limits: {budget: {dollars: 5, period: week}}}"), "llm.api_keys[0].limits.budget.period", 5, "use one of hour, day, month"},
		{"bad price", llmWith(0, "", "  prices: [{model: m, input: cheap}]"), "llm.prices[0].input", 10, "must be a number"},
		{"bad redis url", llmWith(0, "", "  limits: {redis_url: \"127.0.0.1:6379\"}"), "llm.limits.redis_url", 0, "is not a Redis URL"},
		{"bad fail mode", llmWith(0, "", "  limits: {on_store_error: {budgets: open}}"), "llm.limits.on_store_error.budgets", 10, "use one of fail_open, fail_closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrs(t, doc(tt.yaml...))
			fe := findErr(errs, tt.wantPath)
			if fe == nil {
				t.Fatalf("no error at %s; got\n%v", tt.wantPath, errs)
			}
			if tt.wantLine != 0 && fe.Line != tt.wantLine {
				t.Errorf("line %d, want %d (%v)", fe.Line, tt.wantLine, fe)
			}
			if !strings.Contains(fe.Msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", fe.Msg, tt.wantMsg)
			}
		})
	}
}

func TestLLMOrKafkaRequired(t *testing.T) {
	errs := parseErrs(t, doc("log: {level: info}"))
	if fe := findErr(errs, "virtual_clusters"); fe == nil || !strings.Contains(fe.Msg, "or an llm section") {
		t.Errorf("an empty config: %v; want virtual_clusters to ask for Kafka or llm", errs)
	}
	if cfg := mustParse(t, doc(llmMinimal...)); cfg.LLM == nil {
		t.Error("an LLM-only config was not accepted")
	}
	both := append(append([]string(nil), minimal...), llmMinimal...)
	if cfg := mustParse(t, doc(both...)); cfg.LLM == nil || len(cfg.VirtualClusters) != 1 {
		t.Error("a config with Kafka and llm was not accepted")
	}
	// Virtual clusters still need clusters, llm or not.
	noClusters := append(append([]string(nil), minimal[3:]...), llmMinimal...)
	if fe := findErr(parseErrs(t, doc(noClusters...)), "clusters"); fe == nil {
		t.Error("virtual clusters without clusters were accepted because llm is set")
	}
}

func TestLLMSecretsNeverShown(t *testing.T) {
	t.Setenv("LLM_SECRET_KEY", "super-secret-value")
	_, err := Parse(doc(
		"llm:",
		"  listeners: [{listen: \"${env:LLM_SECRET_KEY}\"}]",
		"  api_keys: [{name: a, key: \"${env:LLM_SECRET_KEY}\", sha256: \"${env:LLM_SECRET_KEY}\"}]",
		"  providers:",
		"    p: {dialect: \"${env:LLM_SECRET_KEY}\", base_url: \"${env:LLM_SECRET_KEY}\"}",
		"  routes: [{match: x, provider: \"${env:LLM_SECRET_KEY}\"}]",
	), "strait.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	if strings.Contains(err.Error(), "super-secret-value") {
		t.Errorf("an error shows the value of a reference:\n%v", err)
	}
	if n := len(err.(Errors)); n != 5 {
		t.Errorf("got %d errors, want 5:\n%v", n, err)
	}

	cfg := mustParse(t, doc(llmWith(7, "    mock: {dialect: openai, base_url: \"http://h:1\", api_key: \"${env:LLM_SECRET_KEY}\"}")...))
	p := cfg.LLM.Providers["mock"]
	out, _ := yaml.Marshal(cfg.LLM)
	for _, shown := range []string{fmt.Sprint(p.APIKey), fmt.Sprintf("%v %+v %#v", p, *p, *p), string(out)} {
		if strings.Contains(shown, "super-secret-value") {
			t.Errorf("a secret is shown: %s", shown)
		}
	}
	if string(p.APIKey) != "super-secret-value" {
		t.Error("the secret's value was lost")
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"10MiB", 10 << 20, true},
		{"10 MiB", 10 << 20, true},
		{"512KiB", 512 << 10, true},
		{"2GiB", 2 << 30, true},
		{"1KB", 1000, true},
		{"3MB", 3000000, true},
		{"1GB", 1000000000, true},
		{"7B", 7, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"1.5MiB", 0, false},
		{"ten", 0, false},
		{"10mib", 0, false},
		{"", 0, false},
		{"99999999999GiB", 0, false},
	} {
		got, err := parseByteSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestLLMExample(t *testing.T) {
	cfg, err := Load("../../examples/llm.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	l := cfg.LLM
	keys, err := l.Keys()
	if err != nil || len(keys) != 2 || keys[0].SHA256 != sha256.Sum256([]byte("strait-demo-key")) || keys[1].Limits.RPM != 60 {
		t.Errorf("the example's gateway keys are not strait-demo-key and a limited key: %v %v", keys, err)
	}
	h1, h2c := l.Listeners[0].Cleartext()
	if l.Listeners[0].Listen != "127.0.0.1:8080" || !h1 || !h2c || cfg.Admin.Listen != "127.0.0.1:9191" {
		t.Errorf("listener %+v admin %q", l.Listeners[0], cfg.Admin.Listen)
	}
	dialects := map[string]string{}
	for _, r := range l.Routes {
		prov := r.Provider
		if len(r.Targets) > 0 {
			prov = r.Targets[0].Provider
		}
		p := l.Providers[prov]
		dialects[r.Match] = p.Dialect
		if p.BaseURL != "http://127.0.0.1:8000" {
			t.Errorf("provider %s at %s, want the mock at http://127.0.0.1:8000", p.Name, p.BaseURL)
		}
	}
	if dialects["gpt-*"] != "openai" || dialects["claude-*"] != "anthropic" {
		t.Errorf("routes: %v", dialects)
	}
}
