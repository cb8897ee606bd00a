package encryption

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
		f.refuseProduce(c, req, r, fmt.Errorf("%w: Produce v%d (this filter reads up to v%d)", errVersion, r.Version, maxProduceVersion))
		return
	}
	ctx := ctxOf(c)
	var failed []failure
	fail := func(t *kmsg.ProduceRequestTopic, name string, p int32, err error) {
		code := produceCode(err)
		failed = append(failed, failure{topic: t.Topic, topicID: t.TopicID, partition: p, code: code.Code, msg: describe(err)})
		logOf(c).Warn("record-encryption: refused a produce to a partition; none of its records went to the broker",
			"topic", name, "partition", p, "error_code", code.Message, "err", err)
	}
	topics := r.Topics[:0]
	touched := false // a selected topic, or a failure, was met
	for _, t := range r.Topics {
		name := t.Topic
		if r.Version >= 13 {
			n, err := resolveTopic(ctx, c, t.TopicID)
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
	switch {
	case len(failed) == 0:
	case len(r.Topics) == 0:
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = r.Version
		addProduceFailures(resp, failed)
		req.Respond(resp)
	case r.Acks != 0:
		f.remember(c, req.Header.CorrelationID, failed)
	}
}

// refuseProduce answers the whole request with err for every partition.
func (f *Filter) refuseProduce(c *filter.Context, req *filter.Request, r *kmsg.ProduceRequest, err error) {
	code := produceCode(err)
	var failed []failure
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			failed = append(failed, failure{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, code: code.Code, msg: describe(err)})
		}
	}
	logOf(c).Warn("record-encryption: refused a produce request", "version", r.Version, "error_code", code.Message, "err", err)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = r.Version
	addProduceFailures(resp, failed)
	req.Respond(resp)
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

// addProduceErrors adds the entries of partitions taken out of the request
// to the broker's response.
func (f *Filter) addProduceErrors(c *filter.Context, corr int32, r *kmsg.ProduceResponse) {
	if fs := f.take(c, corr); len(fs) > 0 {
		addProduceFailures(r, fs)
	}
}

func addProduceFailures(r *kmsg.ProduceResponse, fs []failure) {
	for _, fl := range fs {
		i := slices.IndexFunc(r.Topics, func(t kmsg.ProduceResponseTopic) bool { return fl.of(r.Version, t.Topic, t.TopicID) })
		if i < 0 {
			i = len(r.Topics)
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = fl.topic, fl.topicID
			r.Topics = append(r.Topics, t)
		}
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = fl.partition
		p.ErrorCode = fl.code
		p.BaseOffset = -1
		msg := fl.msg
		p.ErrorMessage = &msg
		r.Topics[i].Partitions = append(r.Topics[i].Partitions, p)
	}
}

// resolveTopic maps a topic ID to its name through the gateway.
func resolveTopic(ctx context.Context, c *filter.Context, id [16]byte) (string, error) {
	if c.Topics == nil {
		return "", fmt.Errorf("%w: %x (no resolver)", errTopicID, id)
	}
	name, err := c.Topics.TopicName(ctx, id)
	if err != nil {
		return "", fmt.Errorf("%w: %x: %w", errTopicID, id, err)
	}
	return name, nil
}
