package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strait llm-keys add prints a new key once and stores only its hash and
// limits; list shows names and limits, never hashes; the file is an
// api_keys_file a config loads; remove takes a key out.
func TestLLMKeysCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "llm-keys")
	code, stdout, stderr := run(t, "llm-keys", "add", "--file", file, "--rpm", "60", "--budget", "25/day", "--models", "gpt-*,claude-*", "team-a")
	if code != 0 {
		t.Fatalf("add: exit %d\n%s", code, stderr)
	}
	key := strings.TrimSpace(stdout)
	if !strings.HasPrefix(key, "sk-strait-") || len(key) < 40 {
		t.Fatalf("add printed %q, want a new key", stdout)
	}
	data, _ := os.ReadFile(file)
	sum := sha256.Sum256([]byte(key))
	if strings.Contains(string(data), key) || !strings.Contains(string(data), "team-a "+hex.EncodeToString(sum[:])+" rpm=60 budget=25/day models=gpt-*,claude-*") {
		t.Errorf("the file holds %q; want the hash and limits, never the key", data)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode is %v, want 0600", fi.Mode().Perm())
	}
	if code, _, stderr := run(t, "llm-keys", "add", "--file", file, "team-a"); code == 0 || !strings.Contains(stderr, "already has a key named team-a") {
		t.Errorf("adding team-a twice: exit %d, %s", code, stderr)
	}
	if code, _, stderr := run(t, "llm-keys", "add", "--file", file, "--budget", "ten/day", "team-b"); code == 0 || !strings.Contains(stderr, "budget") {
		t.Errorf("a bad budget: exit %d, %s", code, stderr)
	}
	run(t, "llm-keys", "add", "--file", file, "team-b")
	code, stdout, _ = run(t, "llm-keys", "list", "--file", file, "--json")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 2 || list[0]["rpm"] != 60.0 || list[0]["budget_dollars"] != 25.0 {
		t.Errorf("list: exit %d\n%s", code, stdout)
	}
	if strings.Contains(stdout, hex.EncodeToString(sum[:])) {
		t.Error("list shows a hash")
	}

	cfg := filepath.Join(dir, "llm.yaml")
	os.WriteFile(cfg, []byte(`llm:
  listeners: [{listen: "127.0.0.1:18080"}]
  api_keys_file: `+file+`
  prices: [{model: "gpt-*", input: 2.5, output: 10}]
  providers: {p: {dialect: openai, base_url: "http://127.0.0.1:1"}}
  routes: [{match: "gpt-*", provider: p}]
`), 0o600)
	if code, stdout, stderr := run(t, "validate", "-c", cfg); code != 0 {
		t.Errorf("a config with the file: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "llm-keys", "remove", "--file", file, "team-a"); code != 0 || !strings.Contains(stdout, "removed key team-a") {
		t.Errorf("remove: exit %d %s", code, stdout)
	}
	if data, _ := os.ReadFile(file); strings.Contains(string(data), "team-a") || !strings.Contains(string(data), "team-b") {
		t.Errorf("after remove the file holds %q", data)
	}
}
