package fieldencryption

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
)

// onProduce encrypts the fields of every selected topic's records. A
// partition with a record that cannot be encrypted is taken out of the
// request, so nothing of it reaches the broker in clear, and gets an error
// entry in the response (filter.AnswerProduce).
func (f *Filter) onProduce(c *filter.Context, req *filter.Request, r *kmsg.ProduceRequest) {
	if r.Version > maxProduceVersion {
		err := fmt.Errorf("%w: Produce v%d (this filter reads up to v%d)", errVersion, r.Version, maxProduceVersion)
		code := produceCode(err)
		c.Logger().Warn("field-encryption: refused a produce request", "version", r.Version, "error_code", code.Message, "err", err)
		filter.RefuseProduce(req, r, code.Code, describe(err))
		return
	}
	ctx, cancel := context.WithTimeout(c.Context(), f.lookup)
	defer cancel()
	var failed []filter.Refused
	fail := func(t *kmsg.ProduceRequestTopic, name string, p int32, err error) {
		code := produceCode(err)
		failed = append(failed, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p, Code: code.Code, Message: describe(err)})
		c.Logger().Warn("field-encryption: refused a produce to a partition; none of its records went to the broker",
			"topic", name, "partition", p, "error_code", code.Message, "err", err)
	}
	topics := r.Topics[:0]
	touched := false
	for _, t := range r.Topics {
		name := t.Topic
		if r.Version >= 13 {
			n, err := c.TopicName(t.TopicID)
			if err != nil {
				for _, p := range t.Partitions {
					fail(&t, fmt.Sprintf("%x", t.TopicID), p.Partition, err)
				}
				continue
			}
			name = n
		}
		pol := f.policy(name)
		if pol.rule == nil || pol.rule.parts == [2]*rulePart{} {
			topics = append(topics, t)
			continue
		}
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			out, changed, err := f.sealPartition(ctx, name, pol, p.Records)
			if err != nil {
				fail(&t, name, p.Partition, err)
				continue
			}
			if changed {
				p.Records = out
				touched = true
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	r.Topics = topics
	if !touched && len(failed) == 0 {
		// No field to encrypt: the client's bytes go upstream as sent.
		req.Unchanged()
	}
	filter.AnswerProduce(c, req, r, failed, &f.pending)
}

// growthGuess is what encrypting adds to a record, as a first guess.
const growthGuess = 96

// countRecords adds up the record counts the batch headers of b declare,
// as far as b holds whole batches; a guess for sizing, not a check.
func countRecords(b []byte) int {
	n := 0
	for len(b) > 0 {
		batch, rest, err := recordbatch.Next(b)
		if err != nil || len(batch) < recordbatch.HeaderLen {
			break
		}
		n += min(recordbatch.Count(batch), len(batch)/7) // at least 7 bytes a record
		b = rest
	}
	return n
}

// sealPartition encrypts the fields of one partition's records into a new
// slice, and reports whether any record changed.
func (f *Filter) sealPartition(ctx context.Context, topic string, pol *topicPolicy, records []byte) ([]byte, bool, error) {
	if len(records) == 0 {
		return records, false, nil
	}
	s := getScratch()
	defer putScratch(s)
	j := sealer{f: f, ctx: ctx, topic: topic, pol: pol, s: s}
	// Each encrypted record grows by its marker (some 60 bytes with a
	// vault KEK) and its envelopes (a tag and base64's third): a guess
	// that append corrects when short.
	dst := make([]byte, 0, len(records)+len(records)/3+countRecords(records)*growthGuess)
	return rewrite(ctx, f.codecs, s, dst, records, false, j.record)
}
