package fieldencryption

import (
	"errors"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
	"github.com/straitgw/strait/internal/kms/kmsconfig"
)

func init() {
	registry.Of(TypeName,
		`{kms: {type: vault, path: /etc/strait/vault}, rules: [{topics: ["pii-*"], kek: "{topic}-kek", value: {format: json, fields: [{path: ssn}]}}]}`,
		"docs/field-encryption.md", newFromConfig)
}

// FilterConfig is the whole config block of a field-encryption filter: the
// KMS block every key-protecting filter shares, and the filter's own
// settings beside it.
type FilterConfig struct {
	KMS    kmsconfig.Config `yaml:"kms"`
	Config `yaml:",inline"`
}

// Validate reports every problem of the block at once.
func (c *FilterConfig) Validate() error {
	return errors.Join(c.KMS.Validate(), c.Config.Validate())
}

func newFromConfig(c *FilterConfig, env registry.Env) (filter.Filter, error) {
	open := env.OpenKMS
	if open == nil {
		open = kmsconfig.Open
	}
	k, err := open(c.KMS)
	if err != nil {
		return nil, err
	}
	cfg := c.Config
	cfg.KMSTimeout = c.KMS.Timeout
	return New(cfg, k)
}
