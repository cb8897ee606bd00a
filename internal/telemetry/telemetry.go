// Package telemetry holds Strait's logging setup and its one Prometheus
// registry, passed down to the components that record metrics. Metric
// names live here so that they are documented in one place. It imports
// nothing of Strait's.
package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), logSuppressed)
	return r
}

// NewLogger builds the process logger. level is debug, info, warn or error;
// format is text or json. Repeated warnings and errors are throttled per
// peer (see NewThrottle) so that one misbehaving client cannot fill a disk.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "", "text":
		return slog.New(NewThrottle(slog.NewTextHandler(w, opts), DefaultThrottleInterval)), nil
	case "json":
		return slog.New(NewThrottle(slog.NewJSONHandler(w, opts), DefaultThrottleInterval)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// KafkaMetrics are the Kafka proxy's metrics, labelled by virtual cluster.
type KafkaMetrics struct {
	ConnsOpen       *prometheus.GaugeVec
	ConnsTotal      *prometheus.CounterVec
	Requests        *prometheus.CounterVec
	Responses       *prometheus.CounterVec
	Bytes           *prometheus.CounterVec
	UpstreamLatency *prometheus.HistogramVec
	Errors          *prometheus.CounterVec
	// Authentications counts client authentications terminated at the
	// gateway by mechanism and outcome (success, failure); AuthDuration
	// times them from the handshake to the verdict; ExpiredSessions
	// counts connections closed because their session ran out.
	Authentications *prometheus.CounterVec
	AuthDuration    *prometheus.HistogramVec
	ExpiredSessions *prometheus.CounterVec
	// UpstreamReauths counts broker connections whose SASL session the
	// gateway renewed before the broker's limit (KIP-368).
	UpstreamReauths *prometheus.CounterVec
	// ConnsRefused counts client connections turned away at the edge, by
	// reason: max_connections, max_connections_per_address,
	// proxy_protocol, sni (a TLS server name no route serves).
	ConnsRefused *prometheus.CounterVec
}

// NewKafkaMetrics registers the Kafka proxy's metrics with reg.
func NewKafkaMetrics(reg prometheus.Registerer) *KafkaMetrics {
	m := &KafkaMetrics{
		ConnsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strait_kafka_connections_open", Help: "Client connections open now.",
		}, []string{"virtual_cluster"}),
		ConnsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_kafka_connections_total", Help: "Client connections accepted.",
		}, []string{"virtual_cluster"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_kafka_requests_total", Help: "Requests received from clients, by API key.",
		}, []string{"virtual_cluster", "api"}),
		Responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_kafka_responses_total", Help: "Responses sent to clients, by API key.",
		}, []string{"virtual_cluster", "api"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_kafka_bytes_total", Help: "Bytes relayed: direction is client_to_broker or broker_to_client.",
		}, []string{"virtual_cluster", "direction"}),
		UpstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strait_kafka_upstream_latency_seconds",
			Help:    "Time from forwarding a request to the broker to reading the start of its response, by API key.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"virtual_cluster", "api"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_kafka_errors_total", Help: "Connection-ending and request errors, by kind.",
		}, []string{"virtual_cluster", "kind"}),
	}
	m.Authentications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_kafka_authentications_total", Help: "Client SASL authentications terminated at the gateway, by mechanism and outcome (success, failure).",
	}, []string{"virtual_cluster", "mechanism", "outcome"})
	m.AuthDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strait_kafka_authentication_seconds",
		Help:    "Time from a client's SaslHandshake to the verdict on its credentials, failure delay included, by mechanism.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"virtual_cluster", "mechanism"})
	m.ExpiredSessions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_kafka_expired_sessions_total", Help: "Client connections closed because their SASL session expired without re-authentication (KIP-368).",
	}, []string{"virtual_cluster"})
	m.UpstreamReauths = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_kafka_upstream_reauthentications_total", Help: "Broker connections whose SASL session the gateway renewed before the broker's limit (KIP-368).",
	}, []string{"virtual_cluster"})
	m.ConnsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_kafka_connections_refused_total", Help: "Client connections turned away before any request, by reason: max_connections, max_connections_per_address, proxy_protocol, sni.",
	}, []string{"virtual_cluster", "reason"})
	reg.MustRegister(m.ConnsOpen, m.ConnsTotal, m.Requests, m.Responses, m.Bytes, m.UpstreamLatency, m.Errors,
		m.Authentications, m.AuthDuration, m.ExpiredSessions, m.UpstreamReauths, m.ConnsRefused)
	return m
}
