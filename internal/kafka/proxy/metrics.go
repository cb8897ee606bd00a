package proxy

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/telemetry"
)

// vcMetrics are one virtual cluster's metrics. Per-key series are resolved
// to their label values on first use and kept, so the frame path touches
// only an atomic load and the metric's own atomics, and /metrics lists only
// the API keys clients actually used.
type vcMetrics struct {
	connsOpen  prometheus.Gauge
	connsTotal prometheus.Counter
	bytesUp    prometheus.Counter
	bytesDown  prometheus.Counter
	perKey     [wire.MaxKeys]atomic.Pointer[keyMetrics]
	vec        *telemetry.KafkaMetrics
	vc         string
}

type keyMetrics struct {
	requests  prometheus.Counter
	responses prometheus.Counter
	latency   prometheus.Observer
}

func newVCMetrics(m *telemetry.KafkaMetrics, vc string) *vcMetrics {
	if m == nil {
		m = telemetry.NewKafkaMetrics(prometheus.NewRegistry())
	}
	return &vcMetrics{
		connsOpen:  m.ConnsOpen.WithLabelValues(vc),
		connsTotal: m.ConnsTotal.WithLabelValues(vc),
		bytesUp:    m.Bytes.WithLabelValues(vc, "client_to_broker"),
		bytesDown:  m.Bytes.WithLabelValues(vc, "broker_to_client"),
		vec:        m,
		vc:         vc,
	}
}

// key returns the series of a known API key.
func (v *vcMetrics) key(k int16) *keyMetrics {
	if km := v.perKey[k].Load(); km != nil {
		return km
	}
	name := wire.KeyName(k)
	km := &keyMetrics{
		requests:  v.vec.Requests.WithLabelValues(v.vc, name),
		responses: v.vec.Responses.WithLabelValues(v.vc, name),
		latency:   v.vec.UpstreamLatency.WithLabelValues(v.vc, name),
	}
	// Racing first uses resolve the same series; either pointer will do.
	v.perKey[k].CompareAndSwap(nil, km)
	return v.perKey[k].Load()
}

// Error kinds, the values of strait_kafka_errors_total's kind label.
const (
	errFrameTooLarge   = "frame_too_large"
	errMalformed       = "malformed_frame"
	errUnknownAPI      = "unsupported_api"
	errUpstreamConnect = "upstream_connect"
	// errUpstreamAuth: the broker refused credentials the gateway
	// presented for a client principal, or a session renewal failed.
	errUpstreamAuth    = "upstream_auth"
	errUpstreamClosed  = "upstream_closed"
	errUpstreamTimeout = "upstream_timeout"
	errUpstreamProto   = "upstream_protocol"
	errTLSHandshake    = "tls_handshake"
	errFilter          = "filter"
	errClientIO        = "client_io"
	// errFrameTimeout: a client sent a frame's size but not the whole
	// frame within frame_read_timeout.
	errFrameTimeout = "frame_timeout"
)

// refused counts a connection turned away at the edge.
func (v *vcMetrics) refused(reason string) {
	v.vec.ConnsRefused.WithLabelValues(v.vc, reason).Inc()
}

// auth records one authentication's outcome and duration.
func (v *vcMetrics) auth(mechanism string, ok bool, took time.Duration) {
	outcome := "failure"
	if ok {
		outcome = "success"
	}
	v.vec.Authentications.WithLabelValues(v.vc, mechanism, outcome).Inc()
	v.vec.AuthDuration.WithLabelValues(v.vc, mechanism).Observe(took.Seconds())
}

func (v *vcMetrics) err(kind string) { v.vec.Errors.WithLabelValues(v.vc, kind).Inc() }
