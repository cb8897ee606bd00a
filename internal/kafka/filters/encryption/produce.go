package encryption

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kms"
)

// onProduce encrypts the records of every selected topic in place. A
// partition that cannot be encrypted is taken out of the request, so its
// plaintext never reaches the broker, and gets an error entry in the
// response: at once, through Respond, when nothing is left to send, or
// added to the broker's response otherwise. With acks=0 there is no
// response: the partition is simply dropped.
func (f *Filter) onProduce(c *filter.Context, req *filter.Request, r *kmsg.ProduceRequest) {
	if r.Version > maxProduceVersion {
		err := fmt.Errorf("%w: Produce v%d (this filter reads up to v%d)", errVersion, r.Version, maxProduceVersion)
		code := produceCode(err)
		c.Logger().Warn("record-encryption: refused a produce request", "version", r.Version, "error_code", code.Message, "err", err)
		filter.RefuseProduce(req, r, code.Code, describe(err))
		return
	}
	ctx := c.Context()
	var failed []filter.Refused
	fail := func(t *kmsg.ProduceRequestTopic, name string, p int32, err error) {
		code := produceCode(err)
		failed = append(failed, filter.Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p, Code: code.Code, Message: describe(err)})
		c.Logger().Warn("record-encryption: refused a produce to a partition; none of its records went to the broker",
			"topic", name, "partition", p, "error_code", code.Message, "err", err)
	}
	topics := r.Topics[:0]
	touched := false // a selected topic, or a failure, was met
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
		pol := f.pol.get(name)
		if !pol.encrypt {
			topics = append(topics, t)
			continue
		}
		touched = true
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			out, err := f.sealPartition(ctx, name, pol, p.Records)
			switch {
			case err == nil:
				if len(p.Records) <= defaultMaxMessageBytes && len(out) > defaultMaxMessageBytes {
					f.logGrowth(c, name, len(p.Records), len(out))
				}
				p.Records = out
			case f.plaintextOnMiss && errors.Is(err, kms.ErrKeyNotFound):
				f.logMissing(c, name, pol.kek, err)
			default:
				fail(&t, name, p.Partition, err)
				continue
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
		// Nothing to encrypt: the client's bytes can go upstream as sent.
		req.Unchanged()
	}
	filter.AnswerProduce(c, req, r, failed, &f.pending)
}

// sealPartition encrypts one partition's records.
func (f *Filter) sealPartition(ctx context.Context, topic string, pol *topicPolicy, records []byte) ([]byte, error) {
	if pol.kekErr != nil {
		return nil, pol.kekErr
	}
	if len(records) == 0 {
		return records, nil
	}
	s := getScratch()
	defer putScratch(s)
	j := sealer{f: f, ctx: ctx, topic: topic, kek: pol.kek, s: s}
	return j.sealRecords(records)
}
