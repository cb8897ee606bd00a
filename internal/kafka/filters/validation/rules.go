package validation

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/straitgw/strait/internal/kafka/topicsel"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/jsonschema"
)

// rule is a config rule made ready to check records.
type rule struct {
	label string // the metric label: the rule's index
	desc  string // how messages name it: rules[0] (orders*)
	sel   *topicsel.Selector
	warn  bool
	key   *part // nil: keys are not checked
	value *part // nil: values are not checked
	// schemas: a part checks schemas, so checking may wait for the
	// registry.
	schemas bool
}

// part is what one part of a record (its key or its value) must be.
type part struct {
	name       string // "key" or "value", as messages begin
	isKey      bool
	allowNull  bool
	allowEmpty bool
	maxBytes   int
	json       bool // syntax only, no prefix
	jsonOpts   jsonschema.SyntaxOptions
	schema     *schema.Rule // nil: no schema check
}

func compileRules(cfg []Rule) ([]*rule, bool) {
	out := make([]*rule, len(cfg))
	needSchemas := false
	for i, r := range cfg {
		cr := &rule{
			label: strconv.Itoa(i),
			desc:  fmt.Sprintf("rules[%d] (%s)", i, strings.Join(r.Topics, ", ")),
			sel:   topicsel.New(r.Topics),
			warn:  r.Mode == modeWarn,
		}
		if r.Key != nil {
			cr.key = compilePart(r.Key, "key")
		}
		if r.Value != nil {
			cr.value = compilePart(r.Value, "value")
		}
		cr.schemas = r.Key != nil && r.Key.Schema != nil || r.Value != nil && r.Value.Schema != nil
		needSchemas = needSchemas || cr.schemas
		out[i] = cr
	}
	return out, needSchemas
}

// compilePart turns a validated PartRule into a part.
func compilePart(p *PartRule, name string) *part {
	cp := &part{name: name, isKey: name == "key", allowNull: true, maxBytes: p.MaxBytes}
	if p.AllowNull != nil {
		cp.allowNull = *p.AllowNull
	}
	cp.allowEmpty = p.JSON == nil && p.Schema == nil
	if p.AllowEmpty != nil {
		cp.allowEmpty = *p.AllowEmpty
	}
	if p.JSON != nil {
		cp.json, cp.jsonOpts = true, p.JSON.options()
	}
	if s := p.Schema; s != nil {
		st, _ := schema.ParseStrategy(s.Strategy)
		sr := &schema.Rule{Strategy: st, Subjects: s.Subjects, IDs: s.IDs, JSON: s.JSON.options()}
		for _, f := range s.Formats {
			pf, _ := parseFormat(f)
			sr.Formats = append(sr.Formats, pf)
		}
		cp.schema = sr
	}
	return cp
}

// ruleCache maps topic names to their rule (nil for none). Names come
// from clients, so it is bounded: when full it starts over.
type ruleCache struct {
	rules []*rule
	mu    sync.RWMutex
	m     map[string]*rule
}

const maxCachedTopics = 10000

func (rc *ruleCache) get(topic string) *rule {
	rc.mu.RLock()
	r, ok := rc.m[topic]
	rc.mu.RUnlock()
	if ok {
		return r
	}
	for _, cand := range rc.rules {
		if cand.sel.Match(topic) {
			r = cand
			break
		}
	}
	rc.mu.Lock()
	if len(rc.m) >= maxCachedTopics {
		clear(rc.m)
	}
	rc.m[topic] = r
	rc.mu.Unlock()
	return r
}
