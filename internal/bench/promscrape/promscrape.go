// Package promscrape reads one counter from a Prometheus text exposition:
// the harness scrapes a gateway's admin /metrics page at the start and the
// end of a measurement to count the requests the gateway relayed in it.
//
// It reads the classic text format (version 0.0.4), which Strait's admin
// listener serves, and nothing more: no histograms, no OpenMetrics.
package promscrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxPage bounds the page read: a gateway's is tens of KiB.
const maxPage = 16 << 20

// ErrNoMetric is returned when a page has no series of the counter.
var ErrNoMetric = errors.New("no such metric")

// CheckURL checks that s is an absolute http or https URL.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL with a host (want e.g. http://127.0.0.1:9190/metrics)", s)
	}
	return nil
}

// Fetch gets the page at pageURL and returns the counter metric summed by
// the value of label (series without the label count under ""). It fails
// with ErrNoMetric when the page has no series of metric.
func Fetch(ctx context.Context, pageURL, metric, label string) (map[string]float64, error) {
	if err := CheckURL(pageURL); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return nil, err
	}
	// The classic text format, which Parse reads.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err // it names the method and the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", pageURL, resp.Status)
	}
	sums, err := Parse(io.LimitReader(resp.Body, maxPage), metric, label)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", pageURL, err)
	}
	return sums, nil
}

// Parse reads a text exposition and returns the samples of metric summed
// by the value of label. It fails with ErrNoMetric when there is none, and
// on a sample line of metric it cannot read.
func Parse(r io.Reader, metric, label string) (map[string]float64, error) {
	sums := map[string]float64{}
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || line == "" || line[0] == '#' {
			continue
		}
		// The name must end here: strait_kafka_requests_total is not
		// strait_kafka_requests_total_created.
		if rest != "" && rest[0] != '{' && rest[0] != ' ' && rest[0] != '\t' {
			continue
		}
		labels, value, err := parseSample(rest)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n, metric, err)
		}
		sums[labels[label]] += value
		found = true
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", metric, ErrNoMetric)
	}
	return sums, nil
}

// parseSample reads what follows a metric name on a sample line: an
// optional label set, the value, and an optional timestamp.
func parseSample(s string) (map[string]string, float64, error) {
	labels := map[string]string{}
	if strings.HasPrefix(s, "{") {
		var err error
		if labels, s, err = parseLabels(s[1:]); err != nil {
			return nil, 0, err
		}
	}
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return nil, 0, fmt.Errorf("want a value (and perhaps a timestamp) after the labels, got %q", s)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil, 0, fmt.Errorf("value %q: %w", fields[0], err)
	}
	return labels, v, nil
}

// parseLabels reads `name="value",...}` and returns the labels and what
// follows the closing brace. Values may hold \\, \" and \n escapes, commas
// and braces.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		name, rest, ok := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, `{}",`) {
			return nil, "", fmt.Errorf("bad label set near %q", clip(s))
		}
		rest = strings.TrimLeft(rest, " \t")
		if !strings.HasPrefix(rest, `"`) {
			return nil, "", fmt.Errorf("label %s: value not quoted", name)
		}
		var v strings.Builder
		i, closed := 1, false
		for ; i < len(rest); i++ {
			c := rest[i]
			if c == '"' {
				closed = true
				break
			}
			if c == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					v.WriteByte('\n')
				default: // \\ and \"
					v.WriteByte(rest[i])
				}
				continue
			}
			v.WriteByte(c)
		}
		if !closed {
			return nil, "", fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = v.String()
		s = strings.TrimLeft(rest[i+1:], " \t")
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if !strings.HasPrefix(s, "}") {
			return nil, "", fmt.Errorf("bad label set near %q", clip(s))
		}
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Increase is how much each counter grew from start to end, both as
// Fetch returned them. A counter lower at the end than at the start was
// reset (the process restarted): its increase is unknown, and Increase
// fails naming it. A counter new at the end grew from 0.
func Increase(start, end map[string]float64) (map[string]int64, error) {
	out := map[string]int64{}
	var reset []string
	for _, k := range slices.Sorted(maps.Keys(end)) {
		d := end[k] - start[k]
		if d < 0 {
			reset = append(reset, fmt.Sprintf("%q went from %g to %g", k, start[k], end[k]))
			continue
		}
		out[k] = int64(d + 0.5)
	}
	for _, k := range slices.Sorted(maps.Keys(start)) {
		if _, ok := end[k]; !ok && start[k] > 0 {
			reset = append(reset, fmt.Sprintf("%q went from %g to nothing", k, start[k]))
		}
	}
	if len(reset) > 0 {
		return nil, fmt.Errorf("the counter was reset during the measurement (did the process restart?): %s", strings.Join(reset, ", "))
	}
	return out, nil
}
