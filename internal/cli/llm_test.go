package cli_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
)

func TestValidateLLMExample(t *testing.T) {
	const path = "../../examples/llm.yaml"
	code, stdout, stderr := run(t, "validate", "-c", path)
	if code != 0 || !strings.Contains(stdout, "is valid") {
		t.Fatalf("strait validate -c %s: exit %d\nstdout: %s\nstderr: %s", path, code, stdout, stderr)
	}
}

func TestValidateLLMErrors(t *testing.T) {
	t.Setenv("STRAIT_TEST_PROVIDER_KEY", "sk-do-not-print")
	path := filepath.Join(t.TempDir(), "llm.yaml")
	os.WriteFile(path, []byte(`llm:
  listeners: [{listen: "127.0.0.1:8080", protocols: [h3]}]
  api_keys: [{name: demo, sha256: abc}]
  providers:
    p: {dialect: openai, base_url: "http://127.0.0.1:8000/v1", api_key: "${env:STRAIT_TEST_PROVIDER_KEY}"}
  routes: [{match: "gpt-*", provider: q}]
`), 0o600)
	code, _, stderr := run(t, "validate", "-c", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"llm.yaml:2: llm.listeners[0].protocols[0]",
		"llm.yaml:3: llm.api_keys[0].sha256",
		"llm.yaml:5: llm.providers.p.base_url",
		"llm.yaml:6: llm.routes[0].provider",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "sk-do-not-print") {
		t.Errorf("a provider key was printed:\n%s", stderr)
	}
}

// TestRunLLM runs `strait run` on an LLM-only config in front of a fake
// provider, sends one request of each dialect, reads the metrics and
// readiness, and stops it with SIGTERM.
func TestRunLLM(t *testing.T) {
	needBinary(t)
	t.Parallel()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/chat/completions" && r.Header.Get("Authorization") == "Bearer sk-test-openai":
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"hello from openai"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
		case r.URL.Path == "/v1/messages" && r.Header.Get("X-Api-Key") == "sk-test-anthropic":
			io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hello from anthropic"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":3}}`)
		default:
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"bad key or path","type":"invalid_request_error"}}`)
		}
	}))
	defer provider.Close()

	cfgPath := filepath.Join(t.TempDir(), "llm.yaml")
	var listen, adminPort int
	p := startOnFreePorts(t, func() (*proc, error) {
		listen = testkit.PortBlock(t, 1)
		adminPort = testkit.PortBlock(t, 1, testkit.Range{Lo: listen, Hi: listen})
		cfg := fmt.Sprintf(`admin: {listen: "%s"}
llm:
  listeners: [{listen: "%s"}]
  api_keys: [{name: e2e, key: e2e-key}]
  providers:
    oa: {dialect: openai, base_url: "%s", api_key: sk-test-openai}
    an: {dialect: anthropic, base_url: "%s", api_key: sk-test-anthropic}
  routes:
    - {match: "gpt-*", provider: oa}
    - {match: "claude-*", provider: an}
`, addr(adminPort), addr(listen), provider.URL, provider.URL)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startStrait(t, "run", "-c", cfgPath)
		return p, p.listening(addr(listen), addr(adminPort))
	})

	c := &http.Client{Timeout: 10 * time.Second}
	for _, tt := range []struct {
		path, model, header, want string
	}{
		{"/v1/chat/completions", "gpt-4o", "Authorization", "hello from openai"},
		{"/v1/messages", "claude-x", "X-Api-Key", "hello from anthropic"},
		{"/v1/chat/completions", "claude-x", "Authorization", "hello from anthropic"},
	} {
		req, _ := http.NewRequest("POST", "http://"+addr(listen)+tt.path,
			strings.NewReader(`{"model":"`+tt.model+`","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		v := "e2e-key"
		if tt.header == "Authorization" {
			v = "Bearer " + v
		}
		req.Header.Set(tt.header, v)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s %s: %d %s", tt.path, tt.model, resp.StatusCode, body)
		}
	}

	if code, body, err := httpGet("http://" + addr(adminPort) + "/readyz"); err != nil || code != 200 {
		t.Errorf("/readyz: %d %q %v", code, body, err)
	}
	_, metrics, err := httpGet("http://" + addr(adminPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := metricSum(metrics, "strait_llm_requests_total", `code="200"`); n != 3 {
		t.Errorf("strait_llm_requests_total{code=200} = %v, want 3", n)
	}
	if n, _ := metricSum(metrics, "strait_llm_tokens_total", `direction="input"`); n != 15 {
		t.Errorf("input tokens = %v, want 15", n)
	}
	p.signalAndWait(syscall.SIGTERM, drainWait)
	if !strings.Contains(p.stderr.String(), "llm gateway listening") || !strings.Contains(p.stderr.String(), `msg="llm request"`) {
		t.Errorf("the log lacks the listener or the access log:\n%s", p.stderr)
	}
}

// A gateway that cannot listen on one of its addresses stops with one error
// that names the listener, the address and the config key to change, and
// logs nothing about the listeners it had opened and closes again.
func TestRunPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tt := range []struct {
		name     string
		llm, adm func(free int) string
		wantKey  string
		wantWhat string
	}{
		{"admin", func(free int) string { return addr(free) }, func(int) string { return taken.Addr().String() }, "admin.listen", "admin listener"},
		{"llm", func(int) string { return taken.Addr().String() }, func(free int) string { return addr(free) }, "llm.listeners[0].listen", "llm listener"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			free := testkit.PortBlock(t, 1)
			cfgPath := filepath.Join(t.TempDir(), "llm.yaml")
			cfg := fmt.Sprintf(`admin: {listen: "%s"}
llm:
  listeners: [{listen: "%s"}]
  api_keys: [{name: e2e, key: e2e-key}]
  providers:
    oa: {dialect: openai, base_url: "http://127.0.0.1:1", api_key: sk-test-openai}
  routes: [{match: "gpt-*", provider: oa}]
`, tt.adm(free), tt.llm(free))
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := run(t, "run", "-c", cfgPath)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			want := fmt.Sprintf("strait run: %s: cannot listen on %s: the port is already in use: stop what holds it (another strait?) or change %s\n",
				tt.wantWhat, taken.Addr(), tt.wantKey)
			if !strings.HasSuffix(stderr, want) {
				t.Errorf("stderr does not end with %q:\n%s", want, stderr)
			}
			for _, bad := range []string{"Serve called after Shutdown", "llm listener stopped", "listening", "level=ERROR", "level=WARN"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr contains %q, which is not what failed:\n%s", bad, stderr)
				}
			}
			if !canListen(addr(free)) {
				t.Errorf("%s is still open after the failed start", addr(free))
			}
		})
	}
}
