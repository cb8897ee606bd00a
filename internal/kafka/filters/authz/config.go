package authz

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/topicsel"
)

// Config is the filter's config block (the `config:` of an
// `authorization` filter entry).
type Config struct {
	// Rules say who may do what. A request is allowed when a rule allows
	// it and no rule denies it; what no rule allows is refused.
	Rules []Rule `yaml:"rules"`
	// AllowUnknownKeys lists API keys, by name (DescribeAcls) or number,
	// that the filter does not check and lets through as they are. Every
	// other key the filter does not check is refused.
	AllowUnknownKeys []string `yaml:"allow_unknown_keys"`
	// CacheSize bounds the decisions remembered, over all principals and
	// resources. Default 65536.
	CacheSize int `yaml:"cache_size"`
}

// Rule allows or denies operations on resources to principals.
type Rule struct {
	// Effect is allow or deny.
	Effect string `yaml:"effect"`
	// Principals are user names ("alice"), globs ("team-*"), "*" (every
	// authenticated client) or "anonymous" (clients that have not
	// authenticated).
	Principals []string `yaml:"principals"`
	// Resource is topic, group, transactional_id or cluster.
	Resource string `yaml:"resource"`
	// Names select the resources: exact names, prefixes ("orders*"),
	// globs, "*" for all; {principal} stands for the user asking
	// ("{principal}-*"). Not set for cluster.
	Names []string `yaml:"names"`
	// Operations are Kafka's: READ, WRITE, CREATE, DELETE, ALTER,
	// DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL.
	Operations []string `yaml:"operations"`
}

// DefaultCacheSize is the default of cache_size.
const DefaultCacheSize = 65536

const (
	effectAllow = "allow"
	effectDeny  = "deny"
)

// ruleExample is quoted in errors about an empty rule list.
const ruleExample = `rules: [{effect: allow, principals: ["*"], resource: topic, names: ["{principal}-*"], operations: [ALL]}]`

// Validate reports every problem of the config at once, each naming the
// setting by its path and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Rules) == 0 {
		bad("rules: is empty, so every request would be refused: add a rule, e.g. %s", ruleExample)
	}
	for i, r := range c.Rules {
		errs = append(errs, r.validate(fmt.Sprintf("rules[%d]", i))...)
	}
	for i, k := range c.AllowUnknownKeys {
		if _, err := parseKey(k); err != nil {
			bad("allow_unknown_keys[%d]: %v", i, err)
		}
	}
	if c.CacheSize < 0 {
		bad("cache_size: %d is negative: give the number of decisions to remember, or leave it out for %d", c.CacheSize, DefaultCacheSize)
	}
	return errors.Join(errs...)
}

func (r *Rule) validate(at string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch r.Effect {
	case effectAllow, effectDeny:
	case "":
		bad("%s.effect: is missing: use allow or deny", at)
	default:
		bad("%s.effect: %q is not an effect: use allow or deny", at, r.Effect)
	}
	if len(r.Principals) == 0 {
		bad(`%s.principals: is empty: list user names, globs such as "team-*", "*" for every authenticated client, or anonymous`, at)
	}
	for i, p := range r.Principals {
		if err := checkPrincipal(p); err != nil {
			bad("%s.principals[%d]: %v", at, i, err)
		}
	}
	res, ok := resourceNames[r.Resource]
	switch {
	case r.Resource == "":
		bad("%s.resource: is missing: use topic, group, transactional_id or cluster", at)
	case !ok:
		bad("%s.resource: %q is not a resource type: use topic, group, transactional_id or cluster", at, r.Resource)
	}
	errs = append(errs, checkNames(at, res, r.Names)...)
	if len(r.Operations) == 0 {
		bad("%s.operations: is empty: list operations, e.g. [READ, DESCRIBE], or [ALL]", at)
	}
	for i, o := range r.Operations {
		op, known := opNames[strings.ToUpper(o)]
		switch {
		case !known:
			bad("%s.operations[%d]: %q is not an operation: use one of %s", at, i, o, strings.Join(sortedOpNames(), ", "))
		case ok && op != opAll && !supported[res].has(op):
			bad("%s.operations[%d]: %s does not apply to a %s: use %s", at, i, op, res, strings.Join(opsFor(res), ", "))
		}
	}
	return errs
}

func checkPrincipal(p string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New(`is empty: give a user name, a glob such as "team-*", "*" or anonymous`)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob (%v): check its [ ] classes, or escape a literal *, ? or [ with \\", p, err)
	}
	return nil
}

// checkNames checks a rule's names: required for every resource type but
// the cluster, which has one resource and takes none (or "*", or Kafka's
// name for it).
func checkNames(at string, res resourceType, names []string) []error {
	var errs []error
	if res == resCluster {
		for i, n := range names {
			if n != "*" && n != clusterName {
				errs = append(errs, fmt.Errorf("%s.names[%d]: %q: a cluster rule is about the one cluster: leave names out", at, i, n))
			}
		}
		return errs
	}
	if len(names) == 0 && res != 0 {
		errs = append(errs, fmt.Errorf(`%s.names: is empty: list the %ss the rule is about: names, prefixes such as "orders*", globs, or "*" for all`, at, res))
	}
	for i, n := range names {
		// A template is checked with a stand-in for the principal.
		if err := topicsel.Check(strings.ReplaceAll(n, principalTemplate, "user"), "{principal}-*"); err != nil {
			errs = append(errs, fmt.Errorf("%s.names[%d]: %v", at, i, err))
		}
	}
	return errs
}

func sortedOpNames() []string {
	names := make([]string, 0, len(opNames))
	for n := range opNames {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// opsFor lists the operations a rule about res may name.
func opsFor(res resourceType) []string {
	var names []string
	for _, n := range sortedOpNames() {
		if op := opNames[n]; op == opAll || supported[res].has(op) {
			names = append(names, n)
		}
	}
	return names
}

// parseKey reads an API key as allow_unknown_keys lists it: its name as
// Kafka spells it (any case), or its number. A key the filter checks
// cannot be listed: it is never unknown.
func parseKey(s string) (int16, error) {
	k, err := keyByName(s)
	if err != nil {
		return 0, err
	}
	if _, checked := handlers[k]; checked || alwaysAllowed(k) {
		return 0, fmt.Errorf("%s is checked by the filter (or always allowed): remove it from the list", kmsg.NameForKey(k))
	}
	return k, nil
}

func keyByName(s string) (int16, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n >= 0 && n <= 32767 && kmsg.RequestForKey(int16(n)) != nil {
			return int16(n), nil
		}
		return 0, fmt.Errorf("%d is not an API key Strait knows", n)
	}
	for k := int16(0); k < 128; k++ {
		if kmsg.RequestForKey(k) != nil && strings.EqualFold(kmsg.NameForKey(k), s) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%q is not an API key: use its name as Kafka spells it (DescribeAcls, ElectLeaders, …) or its number", s)
}

// compile turns the validated rules into the engine's.
func compile(rules []Rule) []rule {
	out := make([]rule, 0, len(rules))
	for _, r := range rules {
		cr := rule{
			deny:       r.Effect == effectDeny,
			principals: compilePrincipals(r.Principals),
			resource:   resourceNames[r.Resource],
		}
		var static []string
		for _, n := range r.Names {
			if strings.Contains(n, principalTemplate) {
				cr.templates = append(cr.templates, n)
				continue
			}
			static = append(static, n)
			cr.every = cr.every || n == "*"
		}
		cr.every = cr.every || cr.resource == resCluster
		cr.names = topicsel.New(static)
		var ops opSet
		for _, o := range r.Operations {
			ops |= setOf(opNames[strings.ToUpper(o)])
		}
		cr.ops = granted(ops, cr.deny)
		out = append(out, cr)
	}
	return out
}
