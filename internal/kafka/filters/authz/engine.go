package authz

import (
	"path"
	"strings"
	"sync"

	"github.com/straitgw/strait/internal/kafka/topicsel"
)

// operation is a Kafka ACL operation, numbered as Kafka's AclOperation so
// that a set of them is the bit set the authorized_operations fields of
// Metadata, DescribeGroups and DescribeCluster carry (KIP-430).
type operation int8

const (
	opAll             operation = 2
	opRead            operation = 3
	opWrite           operation = 4
	opCreate          operation = 5
	opDelete          operation = 6
	opAlter           operation = 7
	opDescribe        operation = 8
	opClusterAction   operation = 9
	opDescribeConfigs operation = 10
	opAlterConfigs    operation = 11
	opIdempotentWrite operation = 12
)

// opNames are the operations a rule may list, by their config names.
// CLUSTER_ACTION is missing on purpose: it is what brokers do to each
// other, and no rule grants it, so a request that needs it is always
// refused.
var opNames = map[string]operation{
	"ALL": opAll, "READ": opRead, "WRITE": opWrite, "CREATE": opCreate, "DELETE": opDelete,
	"ALTER": opAlter, "DESCRIBE": opDescribe, "DESCRIBE_CONFIGS": opDescribeConfigs,
	"ALTER_CONFIGS": opAlterConfigs, "IDEMPOTENT_WRITE": opIdempotentWrite,
}

// opStrings are the operations' names by code, for logs and messages.
var opStrings = [...]string{
	opAll: "ALL", opRead: "READ", opWrite: "WRITE", opCreate: "CREATE", opDelete: "DELETE",
	opAlter: "ALTER", opDescribe: "DESCRIBE", opClusterAction: "CLUSTER_ACTION",
	opDescribeConfigs: "DESCRIBE_CONFIGS", opAlterConfigs: "ALTER_CONFIGS", opIdempotentWrite: "IDEMPOTENT_WRITE",
}

func (o operation) String() string {
	if o >= 0 && int(o) < len(opStrings) && opStrings[o] != "" {
		return opStrings[o]
	}
	return "UNKNOWN"
}

// opSet is a set of operations, bit 1<<op for each.
type opSet uint32

func setOf(ops ...operation) opSet {
	var s opSet
	for _, o := range ops {
		s |= 1 << o
	}
	return s
}

func (s opSet) has(o operation) bool { return s&(1<<o) != 0 }

// resourceType is what a rule is about.
type resourceType int8

const (
	resTopic resourceType = iota + 1
	resGroup
	resTransactionalID
	resCluster
)

var resourceNames = map[string]resourceType{
	"topic": resTopic, "group": resGroup, "transactional_id": resTransactionalID, "cluster": resCluster,
}

var resourceStrings = [...]string{resTopic: "topic", resGroup: "group", resTransactionalID: "transactional_id", resCluster: "cluster"}

func (r resourceType) String() string {
	if r > 0 && int(r) < len(resourceStrings) {
		return resourceStrings[r]
	}
	return "unknown"
}

// clusterName is the one cluster resource's name, as Kafka calls it.
const clusterName = "kafka-cluster"

// supported are the operations that apply to each resource type, as
// Kafka's ACLs define them: what a rule may list, and the operations an
// authorized_operations bit set reports on.
var supported = map[resourceType]opSet{
	resTopic:           setOf(opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs),
	resGroup:           setOf(opRead, opDelete, opDescribe, opDescribeConfigs, opAlterConfigs),
	resTransactionalID: setOf(opWrite, opDescribe),
	resCluster:         setOf(opCreate, opAlter, opDescribe, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite),
}

// grantable is every operation a rule can grant: all but CLUSTER_ACTION.
var grantable = ^setOf(opClusterAction)

// granted is what an allow rule listing ops grants: ALL grants everything
// (but CLUSTER_ACTION);
// READ, WRITE, DELETE and ALTER grant DESCRIBE, and ALTER_CONFIGS grants
// DESCRIBE_CONFIGS, as in Kafka. A deny rule denies exactly what it lists
// (ALL: everything): denying READ leaves DESCRIBE as it was.
func granted(ops opSet, deny bool) opSet {
	if ops.has(opAll) {
		return grantable
	}
	if deny {
		return ops
	}
	if ops&setOf(opRead, opWrite, opDelete, opAlter) != 0 {
		ops |= setOf(opDescribe)
	}
	if ops.has(opAlterConfigs) {
		ops |= setOf(opDescribeConfigs)
	}
	return ops
}

// principalTemplate in a rule's names stands for the principal asking.
const principalTemplate = "{principal}"

// anonymousName, in a rule's principals, matches a client that has not
// authenticated; "*" matches every client that has.
const anonymousName = "anonymous"

// principals matches a principal against a rule's list.
type principals struct {
	exact     map[string]bool
	globs     []string
	any       bool // "*": every authenticated principal
	anonymous bool
}

func compilePrincipals(list []string) principals {
	p := principals{exact: map[string]bool{}}
	for _, s := range list {
		switch {
		case s == "*":
			p.any = true
		case s == anonymousName:
			p.anonymous = true
		case strings.ContainsAny(s, `*?[\`):
			p.globs = append(p.globs, s)
		default:
			p.exact[s] = true
		}
	}
	return p
}

// match reports whether principal is in the list. The empty principal is
// anonymous, and only "anonymous" matches it: no pattern does.
func (p *principals) match(principal string) bool {
	if principal == "" {
		return p.anonymous
	}
	if p.any || p.exact[principal] {
		return true
	}
	for _, g := range p.globs {
		if globMatch(g, principal) {
			return true
		}
	}
	return false
}

// globMatch matches as topicsel does: path.Match syntax, "*" stopping at
// no character but "/".
func globMatch(pattern, s string) bool {
	ok, _ := path.Match(pattern, s)
	return ok
}

// rule is one config rule, ready to apply.
type rule struct {
	deny       bool
	principals principals
	resource   resourceType
	// names holds the patterns without a template; templates those that
	// name the principal, expanded per principal.
	names     *topicsel.Selector
	templates []string
	// every: the names include "*", so the rule covers every resource of
	// its type.
	every bool
	ops   opSet
}

// matchName reports whether the rule covers the named resource for
// principal.
func (r *rule) matchName(principal, name string) bool {
	if r.resource == resCluster || r.names.Match(name) {
		return true
	}
	if principal == "" {
		return false // a template needs a name to put in
	}
	for _, t := range r.templates {
		pattern := strings.ReplaceAll(t, principalTemplate, escapeGlob(principal))
		if topicsel.New([]string{pattern}).Match(name) {
			return true
		}
	}
	return false
}

// escapeGlob quotes the pattern characters of a principal put into a
// template, so that user "a*" is granted "a*-x", not every name starting
// with "a".
func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// engine decides requests against the rules: deny wins over allow, and
// what no rule allows is denied. Decisions are cached, so the per-request
// cost on Produce and Fetch is a map lookup per topic.
type engine struct {
	rules []rule
	cache *decisionCache
}

func newEngine(rules []rule, cacheSize int) *engine {
	return &engine{rules: rules, cache: newDecisionCache(cacheSize)}
}

// allowed reports whether principal may do op on the named resource.
func (e *engine) allowed(principal string, res resourceType, name string, op operation) bool {
	k := decisionKey{principal: principal, name: name, res: res, op: op}
	if v, ok := e.cache.get(k); ok {
		return v
	}
	v := e.decide(principal, res, name, op)
	e.cache.put(k, v)
	return v
}

// decide applies the rules, uncached.
func (e *engine) decide(principal string, res resourceType, name string, op operation) bool {
	allow := false
	for i := range e.rules {
		r := &e.rules[i]
		if r.resource != res || !r.ops.has(op) || (allow && !r.deny) {
			continue
		}
		if !r.principals.match(principal) || !r.matchName(principal, name) {
			continue
		}
		if r.deny {
			return false
		}
		allow = true
	}
	return allow
}

// authorizedOps is the bit set of the operations principal may do on the
// named resource, over those that apply to its type, as a broker reports
// them in authorized_operations fields.
func (e *engine) authorizedOps(principal string, res resourceType, name string) int32 {
	var bits int32
	for op := opAll; op <= opIdempotentWrite; op++ {
		if supported[res].has(op) && e.allowed(principal, res, name, op) {
			bits |= 1 << op
		}
	}
	return bits
}

// allowsSome reports whether some resource of type res allows op to
// principal: a rule allows it, and no rule denies it on every name. It is
// Kafka's check for idempotent producers without IDEMPOTENT_WRITE on the
// cluster (KIP-679): WRITE on some topic.
func (e *engine) allowsSome(principal string, res resourceType, op operation) bool {
	allow := false
	for i := range e.rules {
		r := &e.rules[i]
		if r.resource != res || !r.ops.has(op) || !r.principals.match(principal) {
			continue
		}
		if r.deny && r.every {
			return false
		}
		allow = allow || !r.deny
	}
	return allow
}

// allowsEvery reports whether principal may do op on every resource of
// type res: a rule allows it on "*", and no rule denies it anywhere. A
// regular-expression subscription is allowed only then, since the gateway
// cannot see which topics the broker will match.
func (e *engine) allowsEvery(principal string, res resourceType, op operation) bool {
	allow := false
	for i := range e.rules {
		r := &e.rules[i]
		if r.resource != res || !r.ops.has(op) || !r.principals.match(principal) {
			continue
		}
		if r.deny {
			return false
		}
		allow = allow || r.every
	}
	return allow
}

// decisionKey is one question put to the engine.
type decisionKey struct {
	principal, name string
	res             resourceType
	op              operation
}

// decisionCache remembers decisions in two generations of at most half
// the size each: when the current one is full, it becomes the previous
// one and the old previous is dropped. Memory stays bounded whatever
// names clients invent, and decisions in use survive a turnover.
type decisionCache struct {
	mu        sync.RWMutex
	cur, prev map[decisionKey]bool
	half      int
}

func newDecisionCache(size int) *decisionCache {
	half := max(size/2, 1)
	return &decisionCache{cur: make(map[decisionKey]bool, min(half, 1024)), half: half}
}

func (c *decisionCache) get(k decisionKey) (allowed, ok bool) {
	c.mu.RLock()
	allowed, ok = c.cur[k]
	if !ok {
		allowed, ok = c.prev[k]
	}
	c.mu.RUnlock()
	return allowed, ok
}

func (c *decisionCache) put(k decisionKey, allowed bool) {
	c.mu.Lock()
	if len(c.cur) >= c.half {
		c.prev, c.cur = c.cur, make(map[decisionKey]bool, min(c.half, 1024))
	}
	c.cur[k] = allowed
	c.mu.Unlock()
}

func (c *decisionCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur) + len(c.prev)
}
