package authz

import (
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
)

func init() {
	registry.Of(TypeName,
		`{rules: [{effect: allow, principals: ["*"], resource: topic, names: ["{principal}-*"], operations: [ALL]}]}`,
		"docs/security.md",
		func(c *Config, _ registry.Env) (filter.Filter, error) { return New(*c) })
}
