package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/llm/limits/redistest"
)

const resilienceExample = "examples/llm-resilience.yaml"

// TestLLMResilienceExample runs examples/llm-resilience.yaml on its own
// ports, with the two mock providers of its header (the OpenAI one failing
// every request, so that the fallback is certain): gpt-* falls back to
// the Anthropic provider's claude-haiku-4-5 and the headers say so,
// claude-* goes to the Anthropic provider, strait-limited-key gets its
// 61st request of a minute refused, and GET /llm/keys on the admin port
// shows both keys, kept in memory; with STRAIT_REDIS_URL set, in Redis.
func TestLLMResilienceExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs strait")
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot, resilienceExample))
	if err != nil {
		t.Fatal(err)
	}
	header := string(b)
	for _, want := range []string{
		"strait mock llm --listen 127.0.0.1:8001", "strait run -c " + resilienceExample, "STRAIT_REDIS_URL=",
		"listen: 127.0.0.1:8080", "listen: 127.0.0.1:9191", "base_url: http://127.0.0.1:8001", "base_url: http://127.0.0.1:8000",
		"model: claude-haiku-4-5", "rpm: 60", `match: "gpt-*"`, `match: "claude-*"`, "${env:STRAIT_REDIS_URL:-}",
	} {
		if !strings.Contains(header, want) {
			t.Fatalf("%s no longer says %q, which scripts rely on: update the test with the example", resilienceExample, want)
		}
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "examples"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, resilienceExample), b, 0o600); err != nil {
		t.Fatal(err)
	}
	const gw, adm = "127.0.0.1:8080", "127.0.0.1:9191"
	needExamplePorts(t, []string{"127.0.0.1:8000", "127.0.0.1:8001", gw, adm})
	os.Unsetenv("STRAIT_REDIS_URL")
	startExampleCommand(t, dir, "strait mock llm --listen 127.0.0.1:8001 --error-rate 1 --error-kinds 503").waitListening("127.0.0.1:8001")
	startExampleCommand(t, dir, "strait mock llm").waitListening("127.0.0.1:8000")
	if out, err := exampleShell(dir, "strait validate -c "+resilienceExample).CombinedOutput(); err != nil {
		t.Fatalf("strait validate: %v\n%s", err, out)
	}

	run := startExampleCommand(t, dir, "strait run -c "+resilienceExample)
	run.waitListening(gw, adm)
	c := &http.Client{Timeout: 30 * time.Second}
	post := func(key, model string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"Hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("strait-demo-key", "gpt-4o-mini")
	if resp.StatusCode != 200 || resp.Header.Get("X-Strait-Target") != "anthropic-mock/claude-haiku-4-5" || resp.Header.Get("X-Strait-Attempts") < "2" {
		t.Errorf("gpt-4o-mini: status %d, target %q after %q attempts; want 200 from anthropic-mock/claude-haiku-4-5 after the OpenAI provider's 503s",
			resp.StatusCode, resp.Header.Get("X-Strait-Target"), resp.Header.Get("X-Strait-Attempts"))
	}
	if resp := post("strait-demo-key", "claude-sonnet-4-5"); resp.StatusCode != 200 || resp.Header.Get("X-Strait-Target") != "anthropic-mock" {
		t.Errorf("claude-sonnet-4-5: status %d target %q", resp.StatusCode, resp.Header.Get("X-Strait-Target"))
	}

	// 61 requests of the limited key within a minute: the last is refused.
	start := time.Now()
	refused := 0
	for i := range 61 {
		resp := post("strait-limited-key", "claude-sonnet-4-5")
		switch {
		case resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "":
			refused++
		case resp.StatusCode != 200:
			t.Fatalf("limited key, request %d: status %d", i, resp.StatusCode)
		}
	}
	sameMinute := start.Unix()/60 == time.Now().Unix()/60
	if sameMinute && refused != 1 {
		t.Errorf("strait-limited-key: %d of 61 requests in one minute refused, want 1 (rpm 60)", refused)
	}

	keys := func() (store string, byName map[string]map[string]any) {
		t.Helper()
		resp, err := c.Get("http://" + adm + "/llm/keys")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Store string
			Keys  []map[string]any
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("GET /llm/keys: %v", err)
		}
		byName = map[string]map[string]any{}
		for _, k := range out.Keys {
			byName[k["name"].(string)] = k
		}
		return out.Store, byName
	}
	store, byName := keys()
	if store != "memory" || byName["demo"] == nil || byName["limited"] == nil {
		t.Fatalf("GET /llm/keys: store %q keys %v; want memory, demo and limited", store, byName)
	}
	if rpm := byName["limited"]["limits"].(map[string]any)["rpm"]; rpm != 60.0 {
		t.Errorf("limited key's rpm: %v, want 60", rpm)
	}
	if strings.Contains(run.stderr.String(), "strait-limited-key") {
		t.Error("the gateway's log shows a key")
	}
	run.stop()

	// The same config with STRAIT_REDIS_URL keeps its counters in Redis.
	srv := redistest.Start(t)
	t.Setenv("STRAIT_REDIS_URL", srv.URL())
	needExamplePorts(t, []string{gw, adm})
	startExampleCommand(t, dir, "strait run -c "+resilienceExample).waitListening(gw, adm)
	if resp := post("strait-limited-key", "claude-sonnet-4-5"); resp.StatusCode != 200 {
		t.Errorf("with Redis: status %d", resp.StatusCode)
	}
	if store, byName := keys(); store != "redis" || byName["limited"]["window"].(map[string]any)["requests_this_minute"] != 1.0 {
		t.Errorf("with STRAIT_REDIS_URL: store %q, limited key %v; want redis counting 1 request", store, byName["limited"])
	}
}
