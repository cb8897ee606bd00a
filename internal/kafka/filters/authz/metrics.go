package authz

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// decisionsTotal counts the filter's decisions. It belongs to the process,
// not to one filter: every authorization filter counts into it, labelled by
// virtual cluster, so that a gateway with several virtual clusters
// registers it once.
var decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "strait_kafka_authz_decisions_total",
	Help: "Authorization decisions on the resources requests name, by virtual cluster and outcome: allowed or denied. " +
		"Entries cut from lists the broker returned (topics of all-topics Metadata, ListGroups) are not counted.",
}, []string{"virtual_cluster", "outcome"})

// Describe implements prometheus.Collector.
func (*Filter) Describe(ch chan<- *prometheus.Desc) { decisionsTotal.Describe(ch) }

// Collect implements prometheus.Collector.
func (*Filter) Collect(ch chan<- prometheus.Metric) { decisionsTotal.Collect(ch) }

// outcomes are a virtual cluster's two counters, looked up once.
type outcomes struct{ allowed, denied prometheus.Counter }

var (
	outcomesMu sync.RWMutex
	outcomesBy = map[string]*outcomes{}
)

// countDecisions adds a request's decisions to its virtual cluster's
// counters.
func countDecisions(vc string, allowed, denied int) {
	if allowed == 0 && denied == 0 {
		return
	}
	o := outcomesOf(vc)
	if allowed > 0 {
		o.allowed.Add(float64(allowed))
	}
	if denied > 0 {
		o.denied.Add(float64(denied))
	}
}

func outcomesOf(vc string) *outcomes {
	outcomesMu.RLock()
	o := outcomesBy[vc]
	outcomesMu.RUnlock()
	if o != nil {
		return o
	}
	outcomesMu.Lock()
	defer outcomesMu.Unlock()
	if o = outcomesBy[vc]; o == nil {
		// Virtual clusters come from the config: there are few of them.
		o = &outcomes{allowed: decisionsTotal.WithLabelValues(vc, "allowed"), denied: decisionsTotal.WithLabelValues(vc, "denied")}
		outcomesBy[vc] = o
	}
	return o
}

var _ prometheus.Collector = (*Filter)(nil)
