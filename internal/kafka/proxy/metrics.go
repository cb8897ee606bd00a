package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/telemetry"
)

// vcMetrics are one virtual cluster's metrics, resolved to their label
// values once, so the frame path touches only atomics.
type vcMetrics struct {
	connsOpen   prometheus.Gauge
	connsTotal  prometheus.Counter
	bytesUp     prometheus.Counter
	bytesDown   prometheus.Counter
	requests    [wire.MaxKeys]prometheus.Counter
	responses   [wire.MaxKeys]prometheus.Counter
	latency     [wire.MaxKeys]prometheus.Observer
	errs        *prometheus.CounterVec
	clusterName string
}

func newVCMetrics(m *telemetry.KafkaMetrics, vc string) *vcMetrics {
	if m == nil {
		m = telemetry.NewKafkaMetrics(prometheus.NewRegistry())
	}
	v := &vcMetrics{
		connsOpen:   m.ConnsOpen.WithLabelValues(vc),
		connsTotal:  m.ConnsTotal.WithLabelValues(vc),
		bytesUp:     m.Bytes.WithLabelValues(vc, "client_to_broker"),
		bytesDown:   m.Bytes.WithLabelValues(vc, "broker_to_client"),
		errs:        m.Errors,
		clusterName: vc,
	}
	for k := int16(0); k < wire.MaxKeys; k++ {
		if !wire.KnownKey(k) {
			continue
		}
		name := wire.KeyName(k)
		v.requests[k] = m.Requests.WithLabelValues(vc, name)
		v.responses[k] = m.Responses.WithLabelValues(vc, name)
		v.latency[k] = m.UpstreamLatency.WithLabelValues(vc, name)
	}
	return v
}

// Error kinds, the values of strait_kafka_errors_total's kind label.
const (
	errFrameTooLarge   = "frame_too_large"
	errMalformed       = "malformed_frame"
	errUnknownAPI      = "unsupported_api"
	errUpstreamConnect = "upstream_connect"
	errUpstreamClosed  = "upstream_closed"
	errUpstreamTimeout = "upstream_timeout"
	errUpstreamProto   = "upstream_protocol"
	errTLSHandshake    = "tls_handshake"
	errFilter          = "filter"
	errClientIO        = "client_io"
)

func (v *vcMetrics) err(kind string) { v.errs.WithLabelValues(v.clusterName, kind).Inc() }
