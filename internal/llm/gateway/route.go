package gateway

import (
	"fmt"
	"slices"
	"strings"
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
	// Provider names the provider that serves the route.
	Provider string
	// Model, if set, replaces the model name sent to the provider.
	Model string
	// Models, if set, are the model names GET /v1/models lists for the
	// route. Without it an exact Match (no '*' or '?') is listed, and a
	// glob lists nothing.
	Models []string
}

type route struct {
	Route
	p     *provider
	exact bool // Match has no wildcard
}

func newRoute(i int, r Route, providers map[string]*provider) (*route, error) {
	if r.Match == "" {
		return nil, fmt.Errorf("route %d: match is empty: give a model name or a glob such as gpt-*", i)
	}
	p, ok := providers[r.Provider]
	if !ok {
		return nil, fmt.Errorf("route %d (%s): provider %q is not defined", i, r.Match, r.Provider)
	}
	if r.Name == "" {
		r.Name = r.Match
	}
	return &route{
		Route: r,
		p:     p,
		exact: !strings.ContainsAny(r.Match, "*?"),
	}, nil
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

// upstreamModel is the model name the provider is asked for.
func (r *route) upstreamModel(model string) string {
	if r.Model != "" {
		return r.Model
	}
	return model
}

// modelLabel is the model metric label: never the client's string unless
// the config names it (an exact match, a listed model), so that clients
// cannot grow the number of series.
func (r *route) modelLabel(model string) string {
	switch {
	case r.Model != "":
		return r.Model
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
