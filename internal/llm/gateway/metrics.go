package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/llm/translate"
)

// Metrics are the LLM gateway's Prometheus metrics. Every label value is
// bounded by the configuration: route and provider names, the model names
// the config spells out (see Route), dialects, status codes, error kinds
// and stage names. A model no route matches is counted with empty route,
// provider and model labels.
type Metrics struct {
	Requests  *prometheus.CounterVec
	Errors    *prometheus.CounterVec
	Duration  *prometheus.HistogramVec
	FirstByte *prometheus.HistogramVec
	Upstream  *prometheus.HistogramVec
	Tokens    *prometheus.CounterVec
	Overhead  *prometheus.HistogramVec
	Stages    *prometheus.HistogramVec
	InFlight  prometheus.Gauge

	// Routing targets: attempts by result, retries on the same target,
	// fallbacks away from a target, ejections, whether a target is in
	// rotation, and stream failures on either side of the first byte.
	Attempts       *prometheus.CounterVec
	Retries        *prometheus.CounterVec
	Fallbacks      *prometheus.CounterVec
	Ejections      *prometheus.CounterVec
	TargetUp       *prometheus.GaugeVec
	StreamFailures *prometheus.CounterVec

	// Gateway keys: requests refused by a limit, spend, and failures of
	// the limit store by the way they were resolved.
	LimitRefusals *prometheus.CounterVec
	Spend         *prometheus.CounterVec
	StoreErrors   *prometheus.CounterVec
}

// Buckets for the time spent inside the gateway: 1 µs to 1 s.
var overheadBuckets = []float64{
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, .1, .25, 1,
}

// Buckets for provider-bound times: 1 ms to 10 min.
var latencyBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// NewMetrics registers the LLM gateway's metrics with reg; nil registers
// them nowhere (for tests and embedded use).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	route := []string{"route", "provider", "model"}
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_llm_requests_total",
			Help: "Requests answered, by client dialect, route, provider, model and HTTP status.",
		}, append([]string{"client"}, append(route, "code")...)),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_llm_errors_total",
			Help: "Failed requests, by kind (auth, bad_request, too_large, no_route, translate, upstream_connect, upstream_timeout, upstream_status, upstream_protocol, stream, client_gone, shutdown, internal…), route, provider and model.",
		}, append([]string{"kind"}, route...)),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strait_llm_request_duration_seconds",
			Help:    "Time from receiving a request to sending the last byte of its response, by route, provider, model and whether it streamed.",
			Buckets: latencyBuckets,
		}, append(route, "stream")),
		FirstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strait_llm_time_to_first_event_seconds",
			Help:    "Streams: time from receiving the request to sending the client its first event.",
			Buckets: latencyBuckets,
		}, route),
		Upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strait_llm_upstream_latency_seconds",
			Help:    "Time from the request being written to the provider to its response headers.",
			Buckets: latencyBuckets,
		}, []string{"provider"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_llm_tokens_total",
			Help: "Tokens reported by providers, by direction (input, output), route, provider and model. Input includes cached prompt tokens.",
		}, append([]string{"direction"}, route...)),
		Overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strait_llm_overhead_seconds",
			Help:    "Time spent inside the gateway per request: total time minus time blocked on the provider, by path (passthrough, translate).",
			Buckets: overheadBuckets,
		}, []string{"path"}),
		Stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strait_llm_stage_seconds",
			Help:    "Time per request spent in each stage inside the gateway, by stage and path (passthrough, translate).",
			Buckets: overheadBuckets,
		}, []string{"stage", "path"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strait_llm_requests_in_flight",
			Help: "Requests being handled now.",
		}),
	}
	rtl := []string{"route", "target"}
	m.Attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_attempts_total",
		Help: "Attempts to send a request to a route target, by result: ok (the answer began), retryable (a failure the route retries or falls back on), failed (a failure answered as it is).",
	}, append(rtl, "result"))
	m.Retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_retries_total",
		Help: "Attempts that retried the same target after a failure.",
	}, rtl)
	m.Fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_fallbacks_total",
		Help: "Requests that left this target for the route's next one after a failure.",
	}, rtl)
	m.Ejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_target_ejections_total",
		Help: "Times a target was taken out of rotation for its cooldown (a failed half-open probe counts again).",
	}, rtl)
	m.TargetUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strait_llm_target_up",
		Help: "1 while a target is in rotation, 0 while it is ejected.",
	}, rtl)
	m.StreamFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_stream_failures_total",
		Help: "Provider streams that failed, by side of the first byte sent to the client: before_first_byte (retried or fallen back when the route allows) or after_first_byte (the client's stream ends with an error event).",
	}, append(rtl, "boundary"))
	m.LimitRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_limit_refusals_total",
		Help: "Requests refused by a gateway key's limit, by key and limit (rpm, tpm, budget, model).",
	}, []string{"key", "limit"})
	m.Spend = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_spend_dollars_total",
		Help: "Spend settled per gateway key, from the providers' usage and the price table.",
	}, []string{"key"})
	m.StoreErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_llm_limit_store_errors_total",
		Help: "Limit store (Redis) failures, by what was done: allowed (fail_open) or refused (fail_closed), and the operation.",
	}, []string{"op", "outcome"})
	if reg != nil {
		reg.MustRegister(m.Requests, m.Errors, m.Duration, m.FirstByte, m.Upstream, m.Tokens, m.Overhead, m.Stages, m.InFlight,
			m.Attempts, m.Retries, m.Fallbacks, m.Ejections, m.TargetUp, m.StreamFailures, m.LimitRefusals, m.Spend, m.StoreErrors)
	}
	return m
}

// The series a request touches are resolved once per label combination
// and kept, so that counting a request costs a map lookup rather than
// hashing every label value of every metric.

// seriesKey names the per-request series; route is nil for requests no
// route matched.
type seriesKey struct {
	client translate.Dialect
	route  *route
	target *target
	label  string
	code   int
	stream bool
}

type series struct {
	requests            prometheus.Counter
	duration            prometheus.Observer
	firstEvent          prometheus.Observer
	tokensIn, tokensOut prometheus.Counter
}

// pathSeries are the overhead and stage series of one path.
type pathSeries struct {
	overhead prometheus.Observer
	stages   [numStages]prometheus.Observer
}

func (g *Gateway) initSeries() {
	for i, path := range [...]string{"passthrough", "translate"} {
		g.paths[i].overhead = g.m.Overhead.WithLabelValues(path)
		for s := range numStages {
			g.paths[i].stages[s] = g.m.Stages.WithLabelValues(stageNames[s], path)
		}
	}
	for _, p := range g.providers {
		p.upstreamObs = g.m.Upstream.WithLabelValues(p.Name)
	}
	m := g.m
	for _, r := range g.routes {
		for _, t := range r.targets {
			l := []string{r.Name, t.Name}
			t.ms = targetSeries{
				attemptOK:        m.Attempts.WithLabelValues(r.Name, t.Name, "ok"),
				attemptRetryable: m.Attempts.WithLabelValues(r.Name, t.Name, "retryable"),
				attemptFailed:    m.Attempts.WithLabelValues(r.Name, t.Name, "failed"),
				retries:          m.Retries.WithLabelValues(l...),
				fallbacks:        m.Fallbacks.WithLabelValues(l...),
				ejections:        m.Ejections.WithLabelValues(l...),
				up:               m.TargetUp.WithLabelValues(l...),
				streamBefore:     m.StreamFailures.WithLabelValues(r.Name, t.Name, "before_first_byte"),
				streamAfter:      m.StreamFailures.WithLabelValues(r.Name, t.Name, "after_first_byte"),
			}
			t.ms.up.Set(1)
		}
	}
}

func (g *Gateway) seriesFor(k seriesKey) *series {
	g.seriesMu.RLock()
	s := g.series[k]
	g.seriesMu.RUnlock()
	if s != nil {
		return s
	}
	return g.newSeries(k)
}

// newSeries resolves a key's series the first time it is seen. It is
// apart from seriesFor so that the hot path's frame stays small.
func (g *Gateway) newSeries(k seriesKey) *series {
	var route, prov string
	if k.route != nil {
		route = k.route.Name
	}
	if k.target != nil {
		prov = k.target.p.Name
	}
	m := g.m
	s := &series{
		requests:   m.Requests.WithLabelValues(string(k.client), route, prov, k.label, codeLabel(k.code)),
		duration:   m.Duration.WithLabelValues(route, prov, k.label, strconv.FormatBool(k.stream)),
		firstEvent: m.FirstByte.WithLabelValues(route, prov, k.label),
		tokensIn:   m.Tokens.WithLabelValues("input", route, prov, k.label),
		tokensOut:  m.Tokens.WithLabelValues("output", route, prov, k.label),
	}
	g.seriesMu.Lock()
	defer g.seriesMu.Unlock()
	if had := g.series[k]; had != nil {
		return had
	}
	if g.series == nil {
		g.series = make(map[seriesKey]*series)
	}
	g.series[k] = s
	return s
}
