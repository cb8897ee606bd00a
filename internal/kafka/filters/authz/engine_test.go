package authz

import (
	"fmt"
	"testing"
)

// engineOf compiles rules after checking them as the config would.
func engineOf(t testing.TB, rules ...Rule) *engine {
	t.Helper()
	cfg := Config{Rules: rules}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("rules do not validate: %v", err)
	}
	return newEngine(compile(rules), 0)
}

func allow(principals []string, res string, names []string, ops ...string) Rule {
	return Rule{Effect: effectAllow, Principals: principals, Resource: res, Names: names, Operations: ops}
}

func deny(principals []string, res string, names []string, ops ...string) Rule {
	return Rule{Effect: effectDeny, Principals: principals, Resource: res, Names: names, Operations: ops}
}

func list(s ...string) []string { return s }

type decision struct {
	principal string
	res       resourceType
	name      string
	op        operation
	want      bool
}

func checkDecisions(t *testing.T, e *engine, cases []decision) {
	t.Helper()
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/%s/%s", c.principal, c.res, c.name, c.op), func(t *testing.T) {
			// Twice: the second answer comes from the cache.
			for i := range 2 {
				if got := e.allowed(c.principal, c.res, c.name, c.op); got != c.want {
					t.Errorf("try %d: allowed = %v, want %v", i, got, c.want)
				}
			}
		})
	}
}

func TestImpliedOperations(t *testing.T) {
	e := engineOf(t,
		allow(list("reader"), "topic", list("t"), "READ"),
		allow(list("writer"), "topic", list("t"), "WRITE"),
		allow(list("deleter"), "topic", list("t"), "DELETE"),
		allow(list("alterer"), "topic", list("t"), "ALTER"),
		allow(list("configurer"), "topic", list("t"), "ALTER_CONFIGS"),
		allow(list("admin"), "topic", list("t"), "ALL"),
		allow(list("describer"), "topic", list("t"), "DESCRIBE"),
	)
	checkDecisions(t, e, []decision{
		{"reader", resTopic, "t", opRead, true},
		{"reader", resTopic, "t", opDescribe, true},
		{"reader", resTopic, "t", opWrite, false},
		{"reader", resTopic, "t", opDescribeConfigs, false},
		{"writer", resTopic, "t", opDescribe, true},
		{"writer", resTopic, "t", opRead, false},
		{"deleter", resTopic, "t", opDescribe, true},
		{"alterer", resTopic, "t", opDescribe, true},
		{"alterer", resTopic, "t", opAlterConfigs, false},
		{"configurer", resTopic, "t", opDescribeConfigs, true},
		{"configurer", resTopic, "t", opDescribe, false},
		{"admin", resTopic, "t", opCreate, true},
		{"admin", resTopic, "t", opDescribeConfigs, true},
		{"admin", resGroup, "t", opRead, false}, // ALL on topics is not ALL on groups
		{"describer", resTopic, "t", opRead, false},
		{"describer", resTopic, "t", opDescribe, true},
	})
}

func TestDenyWins(t *testing.T) {
	e := engineOf(t,
		allow(list("*"), "topic", list("*"), "ALL"),
		deny(list("mallory"), "topic", list("secret*"), "READ"),
		deny(list("eve"), "topic", list("secret*"), "ALL"),
		allow(list("carol"), "group", list("g"), "READ"),
		deny(list("carol"), "group", list("g"), "READ"),
	)
	checkDecisions(t, e, []decision{
		{"mallory", resTopic, "secret-plans", opRead, false},
		// Denying READ does not deny what READ would imply.
		{"mallory", resTopic, "secret-plans", opDescribe, true},
		{"mallory", resTopic, "secret-plans", opWrite, true},
		{"mallory", resTopic, "public", opRead, true},
		{"eve", resTopic, "secret-plans", opDescribe, false},
		{"eve", resTopic, "secret-plans", opWrite, false},
		{"eve", resTopic, "public", opRead, true},
		// The deny comes after the allow and still wins.
		{"carol", resGroup, "g", opRead, false},
		{"carol", resGroup, "g", opDescribe, true},
	})
}

func TestNoMatchDenies(t *testing.T) {
	e := engineOf(t, allow(list("alice"), "topic", list("orders"), "READ"))
	checkDecisions(t, e, []decision{
		{"alice", resTopic, "orders", opRead, true},
		{"alice", resTopic, "orders2", opRead, false},
		{"bob", resTopic, "orders", opRead, false},
		{"alice", resGroup, "orders", opRead, false},
		{"alice", resCluster, clusterName, opDescribe, false},
		{"alice", resTopic, "orders", opClusterAction, false},
		{"", resTopic, "orders", opRead, false},
	})
}

func TestPrincipalTemplates(t *testing.T) {
	e := engineOf(t,
		allow(list("*"), "topic", list("{principal}-*"), "ALL"),
		allow(list("*"), "group", list("{principal}-*", "shared-{principal}"), "READ"),
		allow(list("anonymous"), "topic", list("{principal}*"), "ALL"),
	)
	checkDecisions(t, e, []decision{
		{"alice", resTopic, "alice-orders", opWrite, true},
		{"alice", resTopic, "alice-", opWrite, true},
		{"alice", resTopic, "alice", opWrite, false},
		{"alice", resTopic, "bob-orders", opWrite, false},
		{"alice", resTopic, "alicex-orders", opWrite, false},
		{"alice", resGroup, "alice-g", opRead, true},
		{"alice", resGroup, "shared-alice", opRead, true},
		{"alice", resGroup, "shared-alice2", opRead, false},
		// A principal's pattern characters are literal in a template.
		{"a*", resTopic, "a*-x", opWrite, true},
		{"a*", resTopic, "ab-x", opWrite, false},
		{"a?", resTopic, "ab-x", opWrite, false},
		{"a[b]", resTopic, "ab-x", opWrite, false},
		{`a\`, resTopic, `a\-x`, opWrite, true},
		// Anonymous has no name to put in a template.
		{"", resTopic, "-x", opWrite, false},
		{"", resTopic, "anything", opWrite, false},
	})
}

func TestPrincipalPatterns(t *testing.T) {
	e := engineOf(t,
		allow(list("team-*"), "topic", list("team-data"), "READ"),
		allow(list("svc-?"), "topic", list("svc"), "READ"),
		allow(list("*"), "topic", list("authenticated"), "READ"),
		allow(list("anonymous"), "topic", list("public"), "READ"),
		allow(list("bob", "carol"), "topic", list("pair"), "READ"),
	)
	checkDecisions(t, e, []decision{
		{"team-a", resTopic, "team-data", opRead, true},
		{"team-", resTopic, "team-data", opRead, true},
		{"teamx", resTopic, "team-data", opRead, false},
		{"svc-1", resTopic, "svc", opRead, true},
		{"svc-12", resTopic, "svc", opRead, false},
		{"anyone", resTopic, "authenticated", opRead, true},
		{"", resTopic, "authenticated", opRead, false},
		{"", resTopic, "public", opRead, true},
		// "anonymous" is the unauthenticated client, not a user so named.
		{"anonymous", resTopic, "public", opRead, false},
		{"carol", resTopic, "pair", opRead, true},
		{"dave", resTopic, "pair", opRead, false},
	})
}

func TestNamePatterns(t *testing.T) {
	e := engineOf(t,
		allow(list("u"), "topic", list("orders*", "*-events", "exact", "team-?-[ab]"), "READ"),
		allow(list("u"), "transactional_id", list("tx-*"), "WRITE"),
		allow(list("u"), "cluster", nil, "IDEMPOTENT_WRITE"),
	)
	checkDecisions(t, e, []decision{
		{"u", resTopic, "orders", opRead, true},
		{"u", resTopic, "orders-eu", opRead, true},
		{"u", resTopic, "click-events", opRead, true},
		{"u", resTopic, "exact", opRead, true},
		{"u", resTopic, "exactly", opRead, false},
		{"u", resTopic, "team-1-a", opRead, true},
		{"u", resTopic, "team-1-c", opRead, false},
		{"u", resTransactionalID, "tx-1", opWrite, true},
		{"u", resTransactionalID, "tx-1", opDescribe, true},
		{"u", resTransactionalID, "other", opWrite, false},
		{"u", resCluster, clusterName, opIdempotentWrite, true},
		{"u", resCluster, clusterName, opCreate, false},
	})
}

func TestAuthorizedOps(t *testing.T) {
	e := engineOf(t,
		allow(list("u"), "topic", list("t"), "READ", "ALTER_CONFIGS"),
		allow(list("u"), "group", list("g"), "ALL"),
		deny(list("u"), "group", list("g"), "DELETE"),
		allow(list("u"), "cluster", nil, "ALL"),
	)
	bit := func(ops ...operation) int32 { return int32(setOf(ops...)) }
	for _, c := range []struct {
		res  resourceType
		name string
		want int32
	}{
		{resTopic, "t", bit(opRead, opDescribe, opAlterConfigs, opDescribeConfigs)},
		{resTopic, "other", 0},
		{resGroup, "g", bit(opRead, opDescribe, opDescribeConfigs, opAlterConfigs)},
		// CLUSTER_ACTION is never granted, even by ALL.
		{resCluster, clusterName, bit(opCreate, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs, opIdempotentWrite)},
	} {
		if got := e.authorizedOps("u", c.res, c.name); got != c.want {
			t.Errorf("%s %s: authorized ops %b, want %b", c.res, c.name, got, c.want)
		}
	}
}

func TestClusterActionNeverGranted(t *testing.T) {
	e := engineOf(t, allow(list("*", "anonymous"), "cluster", nil, "ALL"), allow(list("*"), "topic", list("*"), "ALL"))
	for _, p := range []string{"admin", ""} {
		if e.allowed(p, resCluster, clusterName, opClusterAction) {
			t.Errorf("%q has CLUSTER_ACTION", p)
		}
	}
}

func TestAllowsSome(t *testing.T) {
	e := engineOf(t,
		allow(list("*"), "topic", list("{principal}-*"), "WRITE"),
		allow(list("reader"), "topic", list("*"), "READ"),
		deny(list("blocked"), "topic", list("*"), "WRITE"),
		deny(list("partly"), "topic", list("x*"), "WRITE"),
	)
	for p, want := range map[string]bool{"alice": true, "blocked": false, "partly": true, "": false, "reader": true} {
		if got := e.allowsSome(p, resTopic, opWrite); got != want {
			t.Errorf("allowsSome(%q, topic, WRITE) = %v, want %v", p, got, want)
		}
	}
	if e.allowsSome("alice", resTopic, opDelete) {
		t.Error("allowsSome(alice, topic, DELETE): no rule allows it")
	}
}

func TestAllowsEvery(t *testing.T) {
	e := engineOf(t,
		allow(list("ops"), "topic", list("*"), "DESCRIBE"),
		allow(list("ops2"), "topic", list("*"), "READ"),
		deny(list("ops2"), "topic", list("secret"), "DESCRIBE"),
		allow(list("alice"), "topic", list("alice-*"), "ALL"),
	)
	for p, want := range map[string]bool{"ops": true, "ops2": false, "alice": false, "": false} {
		if got := e.allowsEvery(p, resTopic, opDescribe); got != want {
			t.Errorf("allowsEvery(%q, topic, DESCRIBE) = %v, want %v", p, got, want)
		}
	}
}

func TestDecisionCacheBounded(t *testing.T) {
	e := engineOf(t, allow(list("*"), "topic", list("a*"), "READ"))
	e.cache = newDecisionCache(100)
	for i := range 1000 {
		name := fmt.Sprintf("a%d", i)
		if !e.allowed("u", resTopic, name, opRead) {
			t.Fatalf("%s denied", name)
		}
		if e.allowed("u", resTopic, "b"+name, opRead) {
			t.Fatalf("b%s allowed", name)
		}
		if n := e.cache.len(); n > 100 {
			t.Fatalf("the cache holds %d decisions, bound 100", n)
		}
	}
	// The latest decisions are still there.
	if v, ok := e.cache.get(decisionKey{principal: "u", name: "a999", res: resTopic, op: opRead}); !ok || !v {
		t.Errorf("latest decision: %v, %v", v, ok)
	}
}

func TestNames(t *testing.T) {
	for name, op := range opNames {
		if op.String() != name {
			t.Errorf("%s prints as %s", name, op)
		}
	}
	if opClusterAction.String() != "CLUSTER_ACTION" || operation(1).String() != "UNKNOWN" || operation(99).String() != "UNKNOWN" {
		t.Error("operations without a config name")
	}
	for name, r := range resourceNames {
		if r.String() != name {
			t.Errorf("%s prints as %s", name, r)
		}
	}
	if resourceType(0).String() != "unknown" || resourceType(9).String() != "unknown" {
		t.Error("unknown resource types")
	}
}
