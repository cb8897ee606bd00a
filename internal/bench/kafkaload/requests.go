package kafkaload

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/bench/promscrape"
	"github.com/straitgw/strait/internal/bench/result"
)

// requestsMetric is the gateway's counter of requests received from
// clients, labelled by virtual cluster and API name.
const requestsMetric = "strait_kafka_requests_total"

// requestCounter counts the requests the run's clients write, by API key:
// a franz-go HookBrokerWrite, one atomic add per request.
type requestCounter struct {
	byKey [128]atomic.Int64 // API keys run to about 90
	other atomic.Int64      // a key beyond those
}

var _ kgo.HookBrokerWrite = (*requestCounter)(nil)

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	if key >= 0 && int(key) < len(c.byKey) {
		c.byKey[key].Add(1)
	} else {
		c.other.Add(1)
	}
}

// snapshot is the counts so far.
func (c *requestCounter) snapshot() [129]int64 {
	var s [129]int64
	for k := range c.byKey {
		s[k] = c.byKey[k].Load()
	}
	s[128] = c.other.Load()
	return s
}

// since is the requests written between two snapshots, by API name, as
// the gateway's api label names them.
func since(start, end [129]int64) map[string]int64 {
	out := map[string]int64{}
	for k := range 128 {
		if d := end[k] - start[k]; d > 0 {
			name := kmsg.NameForKey(int16(k))
			if name == "" {
				name = "Unknown"
			}
			out[name] += d
		}
	}
	if d := end[128] - start[128]; d > 0 {
		out["Unknown"] += d
	}
	return out
}

// scrapeGateway reads the gateway's request counters by API, summed over
// its virtual clusters.
func scrapeGateway(ctx context.Context, url string) (map[string]float64, error) {
	sums, err := promscrape.Fetch(ctx, url, requestsMetric, "api")
	if errors.Is(err, promscrape.ErrNoMetric) {
		return nil, fmt.Errorf("--gateway-metrics: the page at %s has no %s: is it a Strait gateway's admin /metrics, and does the benchmark connect through that gateway?", url, requestsMetric)
	}
	if err != nil {
		return nil, fmt.Errorf("--gateway-metrics: %w", err)
	}
	return sums, nil
}

// requestWindow counts requests over the measurement: the clients' own
// count always, and the gateway's when its metrics page is given.
type requestWindow struct {
	url              string // the gateway's metrics page, or ""
	started, stopped bool
	client0, client1 [129]int64
	gw0, gw1         map[string]float64
	err              error // reading the gateway's counters failed
}

// start notes the counts at the start of the measurement. The gateway is
// scraped first and stop scrapes it last, so that serving the page is
// outside the window of its CPU time.
func (w *requestWindow) start(ctx context.Context, c *requestCounter) {
	if w.url != "" {
		w.gw0, w.err = scrapeGateway(ctx, w.url)
	}
	w.client0, w.started = c.snapshot(), true
}

// stop notes the counts at the end of the measurement.
func (w *requestWindow) stop(ctx context.Context, c *requestCounter) {
	if !w.started {
		return
	}
	w.client1, w.stopped = c.snapshot(), true
	if w.url != "" && w.err == nil {
		w.gw1, w.err = scrapeGateway(ctx, w.url)
	}
}

// fill puts the counts in res and sizes each process by them; it returns
// the error of reading the gateway's counters, if any.
func (w *requestWindow) fill(res *result.Kafka, durationS float64) error {
	if !w.stopped {
		return nil
	}
	res.ClientRequests = result.NewRequests(since(w.client0, w.client1), durationS)
	res.RequestsCountedBy = result.CountedByClient
	if w.url != "" {
		res.GatewayMetrics = w.url
		if w.err == nil {
			var inc map[string]int64
			if inc, w.err = promscrape.Increase(w.gw0, w.gw1); w.err == nil {
				res.GatewayRequests = result.NewRequests(inc, durationS)
				res.RequestsCountedBy = result.CountedByGateway
			} else {
				w.err = fmt.Errorf("--gateway-metrics %s: %w", w.url, w.err)
			}
		}
	}
	return w.err
}
