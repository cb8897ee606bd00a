package authz

import (
	"strings"
	"testing"
)

func TestValidateErrors(t *testing.T) {
	good := allow(list("*"), "topic", list("{principal}-*"), "ALL")
	for _, c := range []struct {
		name string
		cfg  Config
		want []string // each must be in the error
	}{
		{"no rules", Config{}, []string{"rules: is empty", "effect: allow"}},
		{"effect missing", Config{Rules: []Rule{{Principals: list("a"), Resource: "topic", Names: list("t"), Operations: list("READ")}}},
			[]string{"rules[0].effect: is missing: use allow or deny"}},
		{"effect wrong", Config{Rules: []Rule{{Effect: "permit", Principals: list("a"), Resource: "topic", Names: list("t"), Operations: list("READ")}}},
			[]string{`rules[0].effect: "permit" is not an effect`}},
		{"principals empty", Config{Rules: []Rule{allow(nil, "topic", list("t"), "READ")}},
			[]string{"rules[0].principals: is empty", "anonymous"}},
		{"principal blank", Config{Rules: []Rule{allow(list(" "), "topic", list("t"), "READ")}},
			[]string{"rules[0].principals[0]: is empty"}},
		{"principal bad glob", Config{Rules: []Rule{allow(list("a", "team-[x"), "topic", list("t"), "READ")}},
			[]string{`rules[0].principals[1]: "team-[x" is not a valid glob`}},
		{"resource missing", Config{Rules: []Rule{allow(list("a"), "", list("t"), "READ")}},
			[]string{"rules[0].resource: is missing: use topic, group, transactional_id or cluster"}},
		{"resource wrong", Config{Rules: []Rule{allow(list("a"), "topics", list("t"), "READ")}},
			[]string{`rules[0].resource: "topics" is not a resource type`}},
		{"names empty", Config{Rules: []Rule{allow(list("a"), "group", nil, "READ")}},
			[]string{"rules[0].names: is empty: list the groups", `"*" for all`}},
		{"name bad glob", Config{Rules: []Rule{allow(list("a"), "topic", list("ok", "[a-"), "READ")}},
			[]string{`rules[0].names[1]: "[a-" is not a valid glob`}},
		{"name empty", Config{Rules: []Rule{allow(list("a"), "topic", list(""), "READ")}},
			[]string{"rules[0].names[0]: is empty"}},
		{"template bad glob", Config{Rules: []Rule{allow(list("a"), "topic", list("{principal}-[x"), "READ")}},
			[]string{"rules[0].names[0]:", "not a valid glob"}},
		{"cluster names", Config{Rules: []Rule{allow(list("a"), "cluster", list("prod"), "CREATE")}},
			[]string{`rules[0].names[0]: "prod": a cluster rule is about the one cluster: leave names out`}},
		{"operations empty", Config{Rules: []Rule{allow(list("a"), "topic", list("t"))}},
			[]string{"rules[0].operations: is empty", "[ALL]"}},
		{"operation unknown", Config{Rules: []Rule{allow(list("a"), "topic", list("t"), "READ", "CONSUME")}},
			[]string{`rules[0].operations[1]: "CONSUME" is not an operation: use one of ALL, ALTER,`}},
		{"operation not for resource", Config{Rules: []Rule{allow(list("a"), "topic", list("t"), "IDEMPOTENT_WRITE")}},
			[]string{"rules[0].operations[0]: IDEMPOTENT_WRITE does not apply to a topic: use ALL, ALTER, ALTER_CONFIGS, CREATE, DELETE, DESCRIBE, DESCRIBE_CONFIGS, READ, WRITE"}},
		{"cluster action", Config{Rules: []Rule{allow(list("a"), "cluster", nil, "CLUSTER_ACTION")}},
			[]string{`rules[0].operations[0]: "CLUSTER_ACTION" is not an operation`}},
		{"group create", Config{Rules: []Rule{allow(list("a"), "group", list("g"), "CREATE")}},
			[]string{"rules[0].operations[0]: CREATE does not apply to a group"}},
		{"txn read", Config{Rules: []Rule{allow(list("a"), "transactional_id", list("x"), "READ")}},
			[]string{"rules[0].operations[0]: READ does not apply to a transactional_id: use ALL, DESCRIBE, WRITE"}},
		{"cache size", Config{Rules: []Rule{good}, CacheSize: -1},
			[]string{"cache_size: -1 is negative"}},
		{"second rule", Config{Rules: []Rule{good, deny(list("x"), "topic", list("t"), "READ", "NOPE")}},
			[]string{`rules[1].operations[1]: "NOPE"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := Config{
		Rules:     []Rule{{Effect: "x", Resource: "y"}},
		CacheSize: -5,
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"effect", "principals", "resource", "operations", "cache_size"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}

func TestValidateGood(t *testing.T) {
	cfg := Config{Rules: []Rule{
		allow(list("*"), "topic", list("{principal}-*"), "ALL"),
		allow(list("*"), "group", list("{principal}-*"), "all"),
		allow(list("ops"), "cluster", nil, "IDEMPOTENT_WRITE", "DESCRIBE"),
		allow(list("ops"), "cluster", list("*", "kafka-cluster"), "ALTER_CONFIGS"),
		deny(list("anonymous"), "transactional_id", list("*"), "WRITE"),
	}, CacheSize: 10}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
