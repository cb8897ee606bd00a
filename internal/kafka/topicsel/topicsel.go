// Package topicsel matches topic names against the selectors a filter's
// config lists: exact names, prefixes (a trailing * and no other pattern
// character) and globs (path.Match syntax). Every filter that selects
// topics uses it, so the syntax is the same everywhere.
package topicsel

import (
	"fmt"
	"path"
	"strings"
)

// Selector matches topic names against a list of selectors.
type Selector struct {
	exact    map[string]bool
	prefixes []string
	globs    []string
}

// New builds a Selector; the patterns must have passed Check.
func New(patterns []string) *Selector {
	s := &Selector{exact: map[string]bool{}}
	for _, p := range patterns {
		switch {
		case !strings.ContainsAny(p, `*?[\`):
			s.exact[p] = true
		case strings.HasSuffix(p, "*") && !strings.ContainsAny(p[:len(p)-1], `*?[\`):
			s.prefixes = append(s.prefixes, p[:len(p)-1])
		default:
			s.globs = append(s.globs, p)
		}
	}
	return s
}

// Match reports whether topic is selected. Exact names cost a map lookup,
// prefixes a comparison each; only globs run the pattern matcher.
func (s *Selector) Match(topic string) bool {
	if s.exact[topic] {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(topic, p) {
			return true
		}
	}
	for _, g := range s.globs {
		if ok, _ := path.Match(g, topic); ok {
			return true
		}
	}
	return false
}

// Check checks one selector; example is a prefix to suggest in the error
// ("secure-*", "orders*").
func Check(s, example string) error {
	if s == "" {
		return fmt.Errorf(`is empty: give a topic name, a prefix such as %q, or a glob`, example)
	}
	if _, err := path.Match(s, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob (%v): check its [ ] classes, or escape a literal *, ? or [ with \\", s, err)
	}
	return nil
}
