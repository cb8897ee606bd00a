package validation

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// onProduce checks the records of every topic a rule selects. A partition
// whose batch is refused is taken out of the request, so none of its
// records reach the broker, and gets an error entry in the response: at
// once, through Respond, when nothing is left to send, or added to the
// broker's response otherwise. With acks=0 there is no response: the
// partition is simply dropped. When nothing is refused the client's bytes
// go upstream as they came.
func (f *Filter) onProduce(c *filter.Context, req *filter.Request, r *kmsg.ProduceRequest) {
	if r.Version > maxProduceVersion {
		f.refuseAll(c, req, r, fmt.Errorf("%w: Produce v%d (this filter reads up to v%d)", errVersion, r.Version, maxProduceVersion))
		return
	}
	var (
		failed []failure
		lookup context.Context
		cancel context.CancelFunc
	)
	// One deadline for every registry lookup of the request, made only
	// once a rule that checks schemas applies: other requests pay for no
	// timer.
	lookupCtx := func() context.Context {
		if lookup == nil {
			lookup, cancel = context.WithTimeout(ctxOf(c), f.lookupTimeout)
		}
		return lookup
	}
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	topics := r.Topics[:0]
	for _, t := range r.Topics {
		name := t.Topic
		if r.Version >= 13 {
			n, err := resolveTopic(ctxOf(c), c, t.TopicID)
			if err != nil {
				// Which rule applies cannot be known: refuse rather
				// than pass records unchecked. Retriable.
				msg := "strait record-validation: " + err.Error()
				for _, p := range t.Partitions {
					failed = append(failed, failure{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, code: kerr.UnknownTopicID.Code, msg: msg})
				}
				logOf(c).Warn("record-validation: refused a produce to a topic ID that does not resolve; none of its records went to the broker",
					"topic_id", fmt.Sprintf("%x", t.TopicID), "partitions", len(t.Partitions), "err", err)
				continue
			}
			name = n
		}
		ru := f.rules.get(name)
		if ru == nil {
			topics = append(topics, t)
			continue
		}
		ctx := ctxOf(c)
		if ru.schemas {
			ctx = lookupCtx()
		}
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			v := f.checkPartition(ctx, name, ru, p.Records)
			refuse := f.account(c, name, p.Partition, ru, &v)
			if !refuse {
				parts = append(parts, p)
				continue
			}
			failed = append(failed, failure{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, code: v.code.Code, msg: v.msg, records: v.records})
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	r.Topics = topics
	switch {
	case len(failed) == 0:
		// Every selected batch is valid (or warned about): the client's
		// bytes go upstream as they came.
		req.Unchanged()
	case len(r.Topics) == 0:
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = r.Version
		addFailures(resp, failed)
		req.Respond(resp)
	case r.Acks != 0:
		f.remember(c, req.Header.CorrelationID, failed)
	}
}

// account counts a partition's verdict, logs a refused or warned batch, and
// reports whether the partition is refused.
func (f *Filter) account(c *filter.Context, topic string, partition int32, ru *rule, v *verdict) bool {
	m := metricsFor(c.VirtualCluster, topic, ru.label)
	m.valid.Add(float64(v.valid))
	m.invalid.Add(float64(v.invalid))
	m.unchecked.Add(float64(v.unchecked))
	switch {
	case v.code == nil:
		m.forwarded.Inc()
		return false
	case ru.warn:
		m.warned.Inc()
		logOf(c).Warn("record-validation: forwarded a batch that does not pass its rule (mode warn)",
			"topic", topic, "partition", partition, "rule", ru.desc, "error_code", v.code.Message,
			"invalid_records", v.invalid, "unchecked_records", v.unchecked, "reason", v.reason)
		return false
	}
	m.refused.Inc()
	logOf(c).Warn("record-validation: refused a produce to a partition; none of its records went to the broker",
		"topic", topic, "partition", partition, "rule", ru.desc, "error_code", v.code.Message,
		"invalid_records", v.invalid, "unchecked_records", v.unchecked, "reason", v.reason)
	return true
}

// refuseAll answers the whole request with err for every partition.
func (f *Filter) refuseAll(c *filter.Context, req *filter.Request, r *kmsg.ProduceRequest, err error) {
	msg := "strait record-validation: " + err.Error()
	var failed []failure
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			failed = append(failed, failure{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, code: kerr.UnsupportedVersion.Code, msg: msg})
		}
	}
	logOf(c).Warn("record-validation: refused a produce request", "version", r.Version, "err", err)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = r.Version
	addFailures(resp, failed)
	req.Respond(resp)
}

// addFailures adds an entry per refused partition to a Produce response,
// under its topic's entry (made if the broker's answer has none).
func addFailures(r *kmsg.ProduceResponse, fs []failure) {
	for i := range fs {
		fl := &fs[i]
		ti := slices.IndexFunc(r.Topics, func(t kmsg.ProduceResponseTopic) bool { return fl.of(r.Version, t.Topic, t.TopicID) })
		if ti < 0 {
			ti = len(r.Topics)
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = fl.topic, fl.topicID
			r.Topics = append(r.Topics, t)
		}
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = fl.partition
		p.ErrorCode = fl.code
		p.BaseOffset = -1
		msg := fl.msg
		p.ErrorMessage = &msg // v8+; left out of older versions
		p.ErrorRecords = fl.records
		r.Topics[ti].Partitions = append(r.Topics[ti].Partitions, p)
	}
}
