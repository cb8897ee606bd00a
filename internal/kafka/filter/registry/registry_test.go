package registry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/kafka/filter"
)

type inner struct {
	MaxRecords uint64        `yaml:"max_records"`
	MaxAge     time.Duration `yaml:"max_age"`
}

type base struct {
	Topics []string `yaml:"topics"`
	KEK    string   `yaml:"kek"`
	Hidden int      `yaml:"-"`
}

type testConfig struct {
	Mode  string            `yaml:"mode"`
	DEK   inner             `yaml:"dek"`
	Rules []inner           `yaml:"rules"`
	ByKey map[string]*inner `yaml:"by_key"`
	base  `yaml:",inline"`
}

func node(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}

func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // substrings of the error; none means success
	}{
		{"valid", "mode: a\ntopics: [x]\nkek: k\ndek: {max_records: 5, max_age: 1h}\nrules: [{max_records: 1}]\nby_key: {a: {max_age: 1s}}", nil},
		{"unknown top key", "mode: a\nencrypt_header: true", []string{"encrypt_header: unknown setting (line 2)", "known settings here: by_key, dek, kek, mode, rules, topics"}},
		{"unknown nested key", "dek:\n  max_recs: 5", []string{"dek.max_recs: unknown setting (line 2)", "known settings here: max_age, max_records"}},
		{"unknown key in list element", "rules:\n  - max_age: 1s\n  - oops: 1", []string{"rules[1].oops: unknown setting (line 3)"}},
		{"unknown key in map value", "by_key:\n  a:\n    nope: 1", []string{"by_key.a.nope: unknown setting (line 3)"}},
		{"tag '-' is not a key", "hidden: 3", []string{"hidden: unknown setting"}},
		{"scalar for a list", "topics: orders", []string{"topics: must be a list, e.g. topics: [a, b], got a single value (line 1)"}},
		{"list for a scalar", "mode: [a]", []string{"mode: must be a single value, got a list"}},
		{"scalar for a mapping", "dek: 5", []string{"dek: must be a mapping of settings (max_age, max_records), got a single value"}},
		{"every error at once", "a: 1\nb: 2\ndek: {c: 3}", []string{"a: unknown", "b: unknown", "dek.c: unknown"}},
		{"type error keeps its line", "dek: {max_records: lots}", []string{"line 1", "lots"}},
		{"merge key", "base: &b {mode: x}\n", []string{"base: unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c testConfig
			err := Decode(node(t, tc.src), &c)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if c.Mode != "a" || c.KEK != "k" || c.DEK.MaxAge != time.Hour || len(c.Rules) != 1 || c.ByKey["a"].MaxAge != time.Second {
					t.Fatalf("decoded %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode accepted %q", tc.src)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDecodeTopLevelMustBeMapping(t *testing.T) {
	var c testConfig
	err := Decode(node(t, "[a, b]"), &c)
	if err == nil || !strings.Contains(err.Error(), "config: must be a mapping of settings") || !strings.Contains(err.Error(), "got a list") {
		t.Fatalf("err = %v", err)
	}
}

type validated struct {
	N int `yaml:"n"`
}

func (v *validated) Validate() error {
	if v.N <= 0 {
		return errors.New("n: must be positive")
	}
	return nil
}

func TestBuild(t *testing.T) {
	var got *validated
	Of("test-validated", "{n: 1}", "docs/filters.md", func(c *validated, env Env) (filter.Filter, error) {
		got = c
		return nil, nil
	})
	if _, err := Build("test-validated", node(t, "n: 3"), Env{}); err != nil || got == nil || got.N != 3 {
		t.Fatalf("Build: %v, config %+v", err, got)
	}
	if _, err := Build("test-validated", node(t, "n: 0"), Env{}); err == nil || !strings.Contains(err.Error(), "n: must be positive") {
		t.Fatalf("Validate not called: %v", err)
	}
	if _, err := Build("test-validated", &yaml.Node{}, Env{}); err == nil || !strings.Contains(err.Error(), "needs a config block, e.g. config: {n: 1} (docs/filters.md)") {
		t.Fatalf("missing block: %v", err)
	}
	_, err := Build("no-such-filter", node(t, "n: 1"), Env{})
	if !errors.Is(err, ErrUnknownType) || !strings.Contains(err.Error(), "test-validated") {
		t.Fatalf("unknown type: %v", err)
	}
}
