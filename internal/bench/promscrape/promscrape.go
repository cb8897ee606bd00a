// Package promscrape reads one counter from a Prometheus text exposition:
// the harness scrapes a gateway's admin /metrics page at the start and the
// end of a measurement to count the requests the gateway relayed in it.
//
// It asks for the classic text format (version 0.0.4), which Strait's
// admin listener serves, and reads it with the Prometheus text parser.
package promscrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
// on a page the Prometheus text parser cannot read.
func Parse(r io.Reader, metric, label string) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	mf, ok := families[metric]
	if !ok || len(mf.GetMetric()) == 0 {
		return nil, fmt.Errorf("%s: %w", metric, ErrNoMetric)
	}
	sums := map[string]float64{}
	for _, m := range mf.GetMetric() {
		key := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				key = lp.GetValue()
			}
		}
		switch {
		case m.GetCounter() != nil:
			sums[key] += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			sums[key] += m.GetUntyped().GetValue()
		default:
			return nil, fmt.Errorf("%s is a %s, not a counter", metric, strings.ToLower(mf.GetType().String()))
		}
	}
	return sums, nil
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
