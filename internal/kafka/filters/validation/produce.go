package validation

import (
	"context"
	"fmt"

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
		err := fmt.Errorf("%w: Produce v%d (this filter reads up to v%d)", errVersion, r.Version, maxProduceVersion)
		c.Logger().Warn("record-validation: refused a produce request", "version", r.Version, "err", err)
		filter.RefuseProduce(req, r, kerr.UnsupportedVersion.Code, "strait record-validation: "+err.Error())
		return
	}
	var (
		failed []filter.Refused
		lookup context.Context
		cancel context.CancelFunc
	)
	// One deadline for every registry lookup of the request, made only
	// once a rule that checks schemas applies: other requests pay for no
	// timer.
	lookupCtx := func() context.Context {
		if lookup == nil {
			lookup, cancel = context.WithTimeout(c.Context(), f.lookupTimeout)
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
			n, err := c.TopicName(t.TopicID)
			if err != nil {
				// Which rule applies cannot be known: refuse rather
				// than pass records unchecked. Retriable.
				msg := "strait record-validation: " + err.Error()
				for _, p := range t.Partitions {
					failed = append(failed, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: kerr.UnknownTopicID.Code, Message: msg})
				}
				c.Logger().Warn("record-validation: refused a produce to a topic ID that does not resolve; none of its records went to the broker",
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
		ctx := c.Context()
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
			failed = append(failed, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: v.code.Code, Message: v.msg, Records: v.records})
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	r.Topics = topics
	if len(failed) == 0 {
		// Every selected batch is valid (or warned about): the client's
		// bytes go upstream as they came.
		req.Unchanged()
		return
	}
	filter.AnswerProduce(c, req, r, failed, &f.pending)
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
		c.Logger().Warn("record-validation: forwarded a batch that does not pass its rule (mode warn)",
			"topic", topic, "partition", partition, "rule", ru.desc, "error_code", v.code.Message,
			"invalid_records", v.invalid, "unchecked_records", v.unchecked, "reason", v.reason)
		return false
	}
	m.refused.Inc()
	c.Logger().Warn("record-validation: refused a produce to a partition; none of its records went to the broker",
		"topic", topic, "partition", partition, "rule", ru.desc, "error_code", v.code.Message,
		"invalid_records", v.invalid, "unchecked_records", v.unchecked, "reason", v.reason)
	return true
}
