package validation

import (
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
)

// TypeName is the filter's `type:` in a virtual cluster's filter list.
const TypeName = "record-validation"

func init() {
	registry.Of(TypeName,
		`{registry: {url: "http://127.0.0.1:8081"}, rules: [{topics: ["orders*"], value: {schema: {strategy: topic-name}}}]}`,
		"docs/validation.md",
		func(c *Config, _ registry.Env) (filter.Filter, error) { return New(*c) })
}
