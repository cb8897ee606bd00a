package encryption_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/cli"
	"github.com/straitgw/strait/internal/kms/vault"
)

// validate runs `strait validate` on a config whose one virtual cluster
// has the given filter entry, and returns its exit code and output.
func validate(t *testing.T, filterYAML string) (int, string) {
	t.Helper()
	conf := `clusters:
  local:
    bootstrap_servers: [127.0.0.1:9092]
virtual_clusters:
  - name: enc
    cluster: local
    listen: 127.0.0.1:19092
    filters:
` + filterYAML
	path := filepath.Join(t.TempDir(), "strait.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := cli.Run([]string{"validate", "-c", path}, &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestYAMLConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	if _, err := vault.CreateKey(dir, "orders-kek"); err != nil {
		t.Fatal(err)
	}
	good := `      - type: record-encryption
        config:
          kms: {type: vault, path: ` + dir + `, timeout: 2s, cache: {ttl: 1m}}
          topics: ["orders", "secure-*"]
          kek: "{topic}-kek"
          on_missing_kek: reject
          unencrypted_on_fetch: pass
          encrypt_headers: true
          encrypt_key: true
          bind_topic: false
          dek: {max_records: 5000, max_age: 30m}
          max_batch_bytes: 33554432
          max_compression_ratio: 50
          decompression_budget: 134217728
`
	if code, out := validate(t, good); code != 0 {
		t.Fatalf("a good config: exit %d\n%s", code, out)
	}
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"no config", "      - type: record-encryption\n", []string{"filters[0].config", "needs a config block"}},
		{"misspelt keys", `      - type: record-encryption
        config:
          kms: {type: vault, path: ` + dir + `, cahce: {}}
          topics: [orders]
          kek: k
          encrypt_header: true
`, []string{"kms.cahce: unknown setting", "encrypt_header: unknown setting", "encrypt_headers"}},
		{"bad values", `      - type: record-encryption
        config:
          kms: {type: hsm}
          topics: []
          kek: "${X}{name}"
          on_missing_kek: drop
          dek: {max_age: 10ms}
`, []string{`kms.type: unknown KMS "hsm"`, "topics: is empty", "kek:", "on_missing_kek:", "dek.max_age:"}},
		{"decompression limits", `      - type: record-encryption
        config:
          kms: {type: vault, path: ` + dir + `}
          topics: [orders]
          kek: k
          max_compression_ratio: 1
          decompression_budget: 1048576
`, []string{"max_compression_ratio: 1 is not a usable ratio", "decompression_budget: 1048576 is less than max_batch_bytes"}},
		{"missing vault", `      - type: record-encryption
        config:
          kms: {type: vault, path: ` + filepath.Join(dir, "nope") + `}
          topics: [orders]
          kek: k
`, []string{"kms.path:", "does not exist"}},
		{"wrong type", `      - type: record-encryption
        config:
          kms: {type: vault, path: ` + dir + `}
          topics: orders
          kek: k
`, []string{"config:", "topics"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := validate(t, tt.yaml)
			if code == 0 {
				t.Fatalf("accepted:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
		})
	}
}
