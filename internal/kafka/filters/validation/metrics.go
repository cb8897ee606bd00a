package validation

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The filter's metrics. They belong to the process, not to one filter:
// every record-validation filter counts into them, labelled by virtual
// cluster, so that a gateway with several virtual clusters registers them
// once.
var (
	recordsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_kafka_validation_records_total",
		Help: "Records of produce requests checked by a record-validation rule, by topic, rule (its index in rules) and outcome: " +
			"valid, invalid (failed a check), unchecked (the registry could not answer).",
	}, []string{"virtual_cluster", "topic", "rule", "outcome"})
	batchesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strait_kafka_validation_batches_total",
		Help: "Partitions of produce requests a record-validation rule applied to, by topic, rule and action: " +
			"forwarded (every record valid), refused, warned (forwarded in mode warn though the rule failed).",
	}, []string{"virtual_cluster", "topic", "rule", "action"})
)

// Describe implements prometheus.Collector.
func (*Filter) Describe(ch chan<- *prometheus.Desc) {
	recordsTotal.Describe(ch)
	batchesTotal.Describe(ch)
}

// Collect implements prometheus.Collector.
func (*Filter) Collect(ch chan<- prometheus.Metric) {
	recordsTotal.Collect(ch)
	batchesTotal.Collect(ch)
}

// counters are the metrics of one virtual cluster, topic and rule, looked
// up once: a partition's verdict then costs a few atomic adds.
type counters struct {
	valid, invalid, unchecked  prometheus.Counter
	forwarded, refused, warned prometheus.Counter
}

type countersKey struct {
	vc, topic, rule string
}

// maxTopicLabels bounds the topics the metrics name: topic names come from
// clients, and a rule with a prefix selects as many as they invent. Past
// it, further topics are counted as otherTopic.
const (
	maxTopicLabels = 1000
	otherTopic     = "_other"
)

var (
	countersMu sync.RWMutex
	countersBy = map[countersKey]*counters{}
	topicsSeen = map[string]bool{}
)

// metricsFor returns the counters of a virtual cluster, topic and rule.
func metricsFor(vc, topic, rule string) *counters {
	k := countersKey{vc, topic, rule}
	countersMu.RLock()
	m := countersBy[k]
	countersMu.RUnlock()
	if m != nil {
		return m
	}
	countersMu.Lock()
	defer countersMu.Unlock()
	if m = countersBy[k]; m != nil {
		return m
	}
	label := topic
	if !topicsSeen[topic] {
		if len(topicsSeen) >= maxTopicLabels {
			label = otherTopic
		} else {
			topicsSeen[topic] = true
		}
	}
	m = &counters{
		valid:     recordsTotal.WithLabelValues(vc, label, rule, "valid"),
		invalid:   recordsTotal.WithLabelValues(vc, label, rule, "invalid"),
		unchecked: recordsTotal.WithLabelValues(vc, label, rule, "unchecked"),
		forwarded: batchesTotal.WithLabelValues(vc, label, rule, "forwarded"),
		refused:   batchesTotal.WithLabelValues(vc, label, rule, "refused"),
		warned:    batchesTotal.WithLabelValues(vc, label, rule, "warned"),
	}
	if label == otherTopic && len(countersBy) >= 4*maxTopicLabels {
		// Do not remember every invented name either.
		return m
	}
	countersBy[k] = m
	return m
}

var _ prometheus.Collector = (*Filter)(nil)
