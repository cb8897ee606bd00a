package gateway

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Route sends requests for the models Match matches to a provider.
type Route struct {
	// Name labels the route in metrics and logs; empty means Match.
	Name string
	// Match is a glob over the requested model name: '*' matches any run
	// of characters ('/' included, unlike path.Match), '?' any one
	// character, every other character itself.
	Match string
	// Provider names the provider that serves the route, when it has one
	// target; Targets names several.
	Provider string
	// Model, if set, replaces the model name sent to the provider.
	Model string
	// Targets, instead of Provider and Model, are the places the route
	// may send a request, picked by Strategy.
	Targets []Target
	// Strategy picks among Targets; StrategyFallback by default.
	Strategy Strategy
	// Retry says which failures are retried (on the same target, then the
	// next). A route with several targets, or more than one attempt, that
	// names no failure retries DefaultRetryStatuses, connection failures
	// and response timeouts.
	Retry Retry
	// Deadline, if above 0, bounds a request across all its attempts and
	// the waits between them: no retry outlives it.
	Deadline time.Duration
	// Health ejects targets that keep failing; off when Failures is 0.
	Health Health
	// Models, if set, are the model names GET /v1/models lists for the
	// route. Without it an exact Match (no '*' or '?') is listed, and a
	// glob lists nothing.
	Models []string
}

type route struct {
	Route
	g       *Gateway
	targets []*target
	p       *provider // the first target's, for GET /v1/models
	exact   bool      // Match has no wildcard
	// resilient: more than one attempt is possible, or targets cool
	// down: a stream's first event is awaited before the client's
	// response starts, and retry-after is honoured across requests.
	resilient bool
	deadline  time.Duration
}

func newRoute(g *Gateway, i int, r Route, providers map[string]*provider) (*route, error) {
	if r.Match == "" {
		return nil, fmt.Errorf("route %d: match is empty: give a model name or a glob such as gpt-*", i)
	}
	if r.Name == "" {
		r.Name = r.Match
	}
	if len(r.Targets) > 0 && (r.Provider != "" || r.Model != "") {
		return nil, fmt.Errorf("route %d (%s): give provider (and model) or targets, not both", i, r.Match)
	}
	if len(r.Targets) == 0 {
		if _, ok := providers[r.Provider]; !ok {
			return nil, fmt.Errorf("route %d (%s): provider %q is not defined", i, r.Match, r.Provider)
		}
	}
	switch r.Strategy {
	case "":
		r.Strategy = StrategyFallback
	case StrategyFallback, StrategyWeighted:
	default:
		return nil, fmt.Errorf("route %d (%s): strategy %q is not fallback or weighted", i, r.Match, r.Strategy)
	}
	if r.Retry.Attempts <= 0 {
		r.Retry.Attempts = 1
	}
	if (len(r.Targets) > 1 || r.Retry.Attempts > 1) && len(r.Retry.OnStatus) == 0 && !r.Retry.OnConnect && !r.Retry.OnTimeout {
		r.Retry.OnStatus, r.Retry.OnConnect, r.Retry.OnTimeout = DefaultRetryStatuses, true, true
	}
	if r.Retry.Backoff <= 0 {
		r.Retry.Backoff = DefaultBackoff
	}
	if r.Retry.MaxBackoff <= 0 {
		r.Retry.MaxBackoff = max(DefaultMaxBackoff, r.Retry.Backoff)
	}
	if r.Health.Failures > 0 && (r.Health.Window <= 0 || r.Health.Cooldown <= 0) {
		return nil, fmt.Errorf("route %d (%s): health needs a window and a cooldown above zero", i, r.Match)
	}
	rt := &route{Route: r, g: g, exact: !strings.ContainsAny(r.Match, "*?"), deadline: r.Deadline}
	ts, err := newTargets(rt, providers)
	if err != nil {
		return nil, err
	}
	rt.targets, rt.p = ts, ts[0].p
	rt.resilient = len(ts) > 1 || r.Retry.Attempts > 1 || r.Health.Failures > 0
	return rt, nil
}

// match returns the first route whose pattern matches model, or nil.
func (g *Gateway) match(model string) *route {
	for _, r := range g.routes {
		if r.exact {
			if r.Match == model {
				return r
			}
			continue
		}
		if Glob(r.Match, model) {
			return r
		}
	}
	return nil
}

// upstreamModel is the model name the target's provider is asked for.
func (t *target) upstreamModel(model string) string {
	if t.Model != "" {
		return t.Model
	}
	return model
}

// modelLabel is the model metric label: never the client's string unless
// the config names it (an exact match, a listed model, a target's
// model), so that clients cannot grow the number of series. t is nil
// before a target is picked.
func (r *route) modelLabel(t *target, model string) string {
	switch {
	case t != nil && t.Model != "":
		return t.Model
	case r.exact, slices.Contains(r.Models, model):
		return model
	}
	return r.Match
}

// Glob reports whether name matches pattern: '*' matches any run of
// characters, '?' any one character (rune), anything else itself.
func Glob(pattern, name string) bool {
	// Iterative matching with one backtrack point: linear in practice,
	// and never exponential however many stars the pattern has.
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				p++
				n += runeLen(name[n:])
				continue
			default:
				if c == name[n] {
					p++
					n++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star take one more character and retry.
		starN += runeLen(name[starN:])
		p, n = starP+1, starN
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// runeLen is the byte length of the first rune of s (1 for invalid UTF-8).
func runeLen(s string) int {
	_, n := utf8.DecodeRuneInString(s)
	return n
}
