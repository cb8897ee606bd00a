package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// selector is a metric a PromQL expression selects, with the label names
// its matchers use.
type selector struct {
	name   string
	labels []string
}

// query is what the dashboard test reads from one PromQL expression: the
// metrics it selects and the labels it groups or matches by (by, without,
// on, ignoring, group_left, group_right).
type query struct {
	selectors []selector
	grouping  []string
}

// aggregations are PromQL's aggregation operators: the only names that may
// stand before a by or without clause instead of a parenthesis.
var aggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio"}

// keywords are PromQL's other reserved words.
var keywords = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end"}

var groupingWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// parsePromQL reads the metric names and label names out of a PromQL
// expression, as written in a Grafana panel: $variables and ${variables}
// are skipped wherever they appear (in durations, in label values).
// It does not check the expression's grammar, only what it names.
func parsePromQL(expr string) (query, error) {
	var q query
	i := 0
	skipSpace := func() {
		for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
			i++
		}
	}
	ident := func() string {
		start := i
		for i < len(expr) && isIdentChar(expr[i]) {
			i++
		}
		return expr[start:i]
	}
	skipString := func() error {
		quote := expr[i]
		for i++; i < len(expr); i++ {
			if expr[i] == '\\' && quote != '`' {
				i++
				continue
			}
			if expr[i] == quote {
				i++
				return nil
			}
		}
		return fmt.Errorf("unterminated string in %q", expr)
	}
	// matchers reads {label op "value", ...} and returns the label names.
	matchers := func() ([]string, error) {
		var labels []string
		i++ // {
		for {
			skipSpace()
			if i >= len(expr) {
				return nil, fmt.Errorf("unterminated {...} in %q", expr)
			}
			switch c := expr[i]; {
			case c == '}':
				i++
				return labels, nil
			case c == ',':
				i++
			case c == '"' || c == '\'' || c == '`':
				if err := skipString(); err != nil {
					return nil, err
				}
			case isIdentStart(c):
				labels = append(labels, ident())
				skipSpace()
				for i < len(expr) && strings.IndexByte("=!~", expr[i]) >= 0 {
					i++
				}
			default:
				return nil, fmt.Errorf("unexpected %q in the matchers of %q", c, expr)
			}
		}
	}
	for {
		skipSpace()
		if i >= len(expr) {
			return q, nil
		}
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if err := skipString(); err != nil {
				return q, err
			}
		case c == '$': // a Grafana variable: $name or ${name...}
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return q, fmt.Errorf("unterminated ${...} in %q", expr)
				}
				i += end + 1
			} else {
				ident()
			}
		case c == '[': // a range or subquery: durations only
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return q, fmt.Errorf("unterminated [...] in %q", expr)
			}
			i += end + 1
		case c == '{': // a selector with no name before it
			labels, err := matchers()
			if err != nil {
				return q, err
			}
			q.selectors = append(q.selectors, selector{labels: labels})
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdentChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			name := ident()
			skipSpace()
			switch {
			case slices.Contains(groupingWords, name):
				if i < len(expr) && expr[i] == '(' {
					end := strings.IndexByte(expr[i:], ')')
					if end < 0 {
						return q, fmt.Errorf("unterminated %s (...) in %q", name, expr)
					}
					for _, l := range strings.Split(expr[i+1:i+end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							q.grouping = append(q.grouping, l)
						}
					}
					i += end + 1
				}
			case slices.Contains(aggregations, name), slices.Contains(keywords, name):
			case i < len(expr) && expr[i] == '(': // a function call
			default:
				s := selector{name: name}
				if i < len(expr) && expr[i] == '{' {
					labels, err := matchers()
					if err != nil {
						return q, err
					}
					s.labels = labels
				}
				q.selectors = append(q.selectors, s)
			}
		default:
			i++ // operators and parentheses
		}
	}
}

func TestParsePromQL(t *testing.T) {
	for _, c := range []struct {
		expr      string
		selectors []selector
		grouping  []string
	}{
		{`sum by (virtual_cluster, api) (rate(strait_kafka_requests_total{job=~"$job", virtual_cluster=~"$virtual_cluster"}[$__rate_interval]))`,
			[]selector{{"strait_kafka_requests_total", []string{"job", "virtual_cluster"}}}, []string{"virtual_cluster", "api"}},
		{`histogram_quantile(0.99, sum by (le, api) (rate(x_seconds_bucket{a="}{\"", b!~'x'}[5m])))`,
			[]selector{{"x_seconds_bucket", []string{"a", "b"}}}, []string{"le", "api"}},
		{`sum(rate(a_sum[1m])) by (vc) / on (vc) group_left sum(rate(a_count[1m])) by (vc)`,
			[]selector{{"a_sum", nil}, {"a_count", nil}}, []string{"vc", "vc", "vc"}},
		{`time() - max without (pod) (last_ts{instance=~"${instance:regex}"}) * 3600 > bool 1e3`,
			[]selector{{"last_ts", []string{"instance"}}}, []string{"pod"}},
		{`{__name__="up"} offset 5m`, []selector{{"", []string{"__name__"}}}, nil},
	} {
		q, err := parsePromQL(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if fmt.Sprint(q.selectors) != fmt.Sprint(c.selectors) || fmt.Sprint(q.grouping) != fmt.Sprint(c.grouping) {
			t.Errorf("%s:\n got %v %v\nwant %v %v", c.expr, q.selectors, q.grouping, c.selectors, c.grouping)
		}
	}
}
