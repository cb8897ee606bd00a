package validation

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/kafka/filter/registry"
)

// build decodes a config block as the gateway does, through the filter
// registry: strictly, then Validate, then New.
func build(t *testing.T, src string) (*Filter, error) {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	f, err := registry.Build(TypeName, n.Content[0], registry.Env{})
	if err != nil {
		return nil, err
	}
	return f.(*Filter), nil
}

// The config block of examples/validation.yaml builds, and means what the
// example says: orders* by the topic-name strategy, events* as JSON.
func TestExampleConfig(t *testing.T) {
	raw, err := os.ReadFile("../../../../examples/validation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		VirtualClusters []struct {
			Filters []struct {
				Type   string    `yaml:"type"`
				Config yaml.Node `yaml:"config"`
			} `yaml:"filters"`
		} `yaml:"virtual_clusters"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	fc := doc.VirtualClusters[0].Filters[0]
	if fc.Type != TypeName {
		t.Fatalf("the example's filter is %q", fc.Type)
	}
	f, err := registry.Build(fc.Type, &fc.Config, registry.Env{})
	if err != nil {
		t.Fatalf("the example's config: %v", err)
	}
	vf := f.(*Filter)
	if vf.reg == nil {
		t.Error("no schema registry for a schema rule")
	}
	orders, events := vf.rules.get("orders-eu"), vf.rules.get("events")
	if orders == nil || orders.value == nil || orders.value.schema == nil || orders.value.schema.Strategy.String() != "topic-name" || orders.warn {
		t.Errorf("orders-eu: rule %+v", orders)
	}
	if events == nil || events.value == nil || !events.value.json || events.value.schema != nil {
		t.Errorf("events: rule %+v", events)
	}
	if r := vf.rules.get("payments"); r != nil {
		t.Errorf("payments is checked by %s", r.desc)
	}
}

func TestConfigDefaults(t *testing.T) {
	f, err := build(t, `
rules:
  - topics: [a]
    value: {json: {}}
    key: {max_bytes: 10}
  - topics: [a, b*]
    value: {schema: {subjects: [s]}}
schemas:
  - {subject: s, type: JSON, schema: '{"type": "object"}'}
`)
	if err != nil {
		t.Fatal(err)
	}
	a := f.rules.get("a")
	if a.label != "0" || a.warn {
		t.Errorf("a: the first matching rule applies in reject mode by default; got %+v", a)
	}
	if !a.value.allowNull || a.value.allowEmpty || a.value.jsonOpts.RejectDuplicateKeys {
		t.Errorf("value defaults: null %v, empty %v, reject duplicates %v; want true, false, false", a.value.allowNull, a.value.allowEmpty, a.value.jsonOpts.RejectDuplicateKeys)
	}
	if !a.key.allowNull || !a.key.allowEmpty || a.key.maxBytes != 10 {
		t.Errorf("a part with no format check allows null and empty: %+v", a.key)
	}
	if b := f.rules.get("bx"); b == nil || b.label != "1" || b.value.schema == nil {
		t.Errorf("bx: %+v", b)
	}
	if f.lookupTimeout != DefaultLookupTimeout {
		t.Errorf("lookup_timeout %s", f.lookupTimeout)
	}
}

// A JSON-only config needs no registry.
func TestConfigWithoutSchemas(t *testing.T) {
	f, err := build(t, `rules: [{topics: ["events*"], value: {json: {duplicate_keys: reject}}}]`)
	if err != nil {
		t.Fatal(err)
	}
	if f.reg != nil || !f.rules.get("events-1").value.jsonOpts.RejectDuplicateKeys {
		t.Errorf("registry %v, rule %+v", f.reg, f.rules.get("events-1").value)
	}
}

// Every problem is reported at once, each naming its setting.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"unknown keys", `
rules:
  - topics: [a]
    value: {json: {}, alow_null: true}
    keys: {}
registry: {url: "http://r", usename: x}`, []string{
			"rules[0].value.alow_null: unknown setting (line 4)",
			"rules[0].keys: unknown setting (line 5)",
			"registry.usename: unknown setting (line 6)",
		}},
		{"every rule problem", `
rules:
  - topics: []
    mode: enforce
  - topics: ["[a"]
    key: {json: {duplicate_keys: maybe}, schema: {}, max_bytes: -1}
    value: {schema: {strategy: by-topic, formats: [xml, ""], ids: [-1], subjects: [""], json: {duplicate_keys: no}}}
lookup_timeout: -1s
max_compression_ratio: 1`, []string{
			"rules[0].topics: is empty",
			`rules[0].mode: "enforce" is not a mode`,
			"rules[0]: checks nothing",
			`rules[1].topics[0]: "[a" is not a valid glob`,
			"rules[1].key: set json or schema, not both",
			`rules[1].key.json.duplicate_keys: "maybe" is not a choice`,
			"rules[1].key.max_bytes: -1 is negative",
			`rules[1].value.schema.strategy: unknown subject name strategy "by-topic"`,
			"rules[1].value.schema.strategy: is set along with subjects or ids",
			`rules[1].value.schema.formats[0]: "xml" is not a format`,
			"rules[1].value.schema.formats[1]: is empty",
			"rules[1].value.schema.ids[0]: -1 is negative",
			"rules[1].value.schema.subjects[0]: is empty",
			`rules[1].value.schema.json.duplicate_keys: "no" is not a choice`,
			"schemas: set a registry, schemas, or both",
			"lookup_timeout: -1s is negative",
			"max_compression_ratio: 1 is not a usable ratio",
		}},
		{"no rules", `registry: {url: "http://r"}`, []string{"rules: is empty"}},
		{"registry url", `{rules: [{topics: [a], value: {schema: {}}}], registry: {url: "ftp://r"}}`, []string{`registry url "ftp://r": want http:// or https://`}},
		{"inline schema does not compile", `
rules: [{topics: [a], value: {schema: {}}}]
schemas: [{id: 1, subject: a-value, schema: '{"type": "nope"}'}]`, []string{"does not compile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, tc.src)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
