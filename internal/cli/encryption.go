package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filters/encryption"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
)

func init() { filterTypes["record-encryption"] = newRecordEncryption }

// recordEncryptionYAML is the config block of a record-encryption filter:
// the KMS, which the CLI builds, and the filter's own settings.
type recordEncryptionYAML struct {
	KMS               kmsYAML `yaml:"kms"`
	encryption.Config `yaml:",inline"`
}

// kmsYAML selects and configures the KMS of an encryption filter.
type kmsYAML struct {
	Type    string        `yaml:"type"`
	Path    string        `yaml:"path"`
	Timeout time.Duration `yaml:"timeout"`
	Cache   kmsCacheYAML  `yaml:"cache"`
}

// kmsCacheYAML sets the cache in front of the KMS (kms.NewCache). It is on
// unless disabled; zero values take the cache's defaults.
type kmsCacheYAML struct {
	Disabled    bool          `yaml:"disabled"`
	MaxEntries  int           `yaml:"max_entries"`
	TTL         time.Duration `yaml:"ttl"`
	LatestTTL   time.Duration `yaml:"latest_ttl"`
	NegativeTTL time.Duration `yaml:"negative_ttl"`
}

// recordEncryptionKeys are the keys the config block may hold, per
// mapping: yaml.Node.Decode ignores unknown keys, and a misspelt
// "encrypt_header" must not silently leave headers in clear.
var recordEncryptionKeys = map[string][]string{
	"":          {"kms", "topics", "kek", "on_missing_kek", "unencrypted_on_fetch", "encrypt_headers", "encrypt_key", "bind_topic", "dek", "max_batch_bytes", "max_compression_ratio", "decompression_budget"},
	"kms":       {"type", "path", "timeout", "cache"},
	"kms.cache": {"disabled", "max_entries", "ttl", "latest_ttl", "negative_ttl"},
	"dek":       {"max_records", "max_age"},
}

// newRecordEncryption builds a record-encryption filter from its config
// block (docs/encryption.md).
func newRecordEncryption(n *yaml.Node) (filter.Filter, error) {
	if n.Kind == 0 {
		return nil, errors.New(`a record-encryption filter needs a config block: set at least kms, topics and kek, e.g. config: {kms: {type: vault, path: /etc/strait/vault}, topics: ["secure-*"], kek: "{topic}-kek"} (docs/encryption.md)`)
	}
	if err := checkConfigKeys(n, "", recordEncryptionKeys); err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "topics" && n.Content[i+1].Kind != yaml.SequenceNode {
			return nil, fmt.Errorf(`topics: must be a list (line %d), e.g. topics: [orders] or topics: ["secure-*"]`, n.Content[i+1].Line)
		}
	}
	var c recordEncryptionYAML
	if err := n.Decode(&c); err != nil {
		return nil, oneLineErrors([]error{err})
	}
	var errs []error
	k, err := buildKMS(c.KMS)
	if err != nil {
		errs = append(errs, err)
	}
	c.Config.KMSTimeout = c.KMS.Timeout
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, oneLineErrors(errs)
	}
	return encryption.New(c.Config, k)
}

// buildKMS opens the KMS a config names, behind a cache unless disabled.
func buildKMS(c kmsYAML) (kms.KMS, error) {
	var k kms.KMS
	switch c.Type {
	case "":
		return nil, errors.New("kms.type: is empty: set the KMS that holds the key-encryption keys; the one available is vault (a filesystem vault, see docs/kms.md)")
	case "vault":
		if c.Path == "" {
			return nil, errors.New("kms.path: is empty: set the vault directory (or single .json file), made with `strait keys create --vault PATH NAME`")
		}
		v, err := vault.Open(c.Path, vault.Options{})
		if err != nil {
			return nil, fmt.Errorf("kms.path: %w", err)
		}
		k = v
	default:
		return nil, fmt.Errorf("kms.type: unknown KMS %q: the one available is vault", c.Type)
	}
	if c.Cache.Disabled {
		return k, nil
	}
	cc := c.Cache
	if cc.MaxEntries < 0 || cc.TTL < 0 || cc.LatestTTL < 0 || cc.NegativeTTL < 0 {
		return nil, errors.New("kms.cache: max_entries, ttl, latest_ttl and negative_ttl must not be negative: leave one out for its default")
	}
	return kms.NewCache(k, kms.CacheOptions{MaxEntries: cc.MaxEntries, TTL: cc.TTL, LatestTTL: cc.LatestTTL, NegativeTTL: cc.NegativeTTL}), nil
}

// checkConfigKeys reports keys of mapping n (at path, "" for the top) and of the
// mappings below it that known does not list.
func checkConfigKeys(n *yaml.Node, path string, known map[string][]string) error {
	if n.Kind != yaml.MappingNode {
		if path == "" {
			return fmt.Errorf("config: must be a mapping of settings (kms, topics, kek, ...), got a %s", nodeKindName(n))
		}
		return nil // Decode reports the type mismatch
	}
	allowed, ok := known[path]
	if !ok {
		return nil
	}
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		full := key
		if path != "" {
			full = path + "." + key
		}
		if !slices.Contains(allowed, key) {
			errs = append(errs, fmt.Errorf("%s: unknown setting (line %d); known settings here: %s", full, n.Content[i].Line, strings.Join(slices.Sorted(slices.Values(allowed)), ", ")))
			continue
		}
		if err := checkConfigKeys(val, full, known); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return oneLineErrors(errs)
	}
	return nil
}

func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "single value"
	}
	return "non-mapping"
}

// oneLineErrors joins errors into one, separated by "; ", so that the CLI's
// single line per config problem stays one line. errors.Join's newlines
// inside nested joins are flattened the same way.
func oneLineErrors(errs []error) error {
	var parts []string
	for _, e := range errs {
		for _, line := range strings.Split(e.Error(), "\n") {
			if line != "" {
				parts = append(parts, line)
			}
		}
	}
	return errors.New(strings.Join(parts, "; "))
}
