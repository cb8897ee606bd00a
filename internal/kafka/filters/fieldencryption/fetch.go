package fieldencryption

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/fieldpath"
)

// onFetchRequest sees only the Fetch versions this filter cannot serve:
// before v4 (the broker would drop the marker header), and versions newer
// than it knows. Selected topics get UNSUPPORTED_VERSION; a request with
// nothing else is answered here, otherwise the rest goes on.
func (f *Filter) onFetchRequest(c *filter.Context, req *filter.Request, r *kmsg.FetchRequest) {
	refuse := func(topic string) bool { return f.policy(topic).rule != nil }
	n := filter.RefuseFetchTopics(c, req, r, r.Version > maxFetchVersion, refuse, &f.pending)
	if n == 0 {
		req.Unchanged()
		return
	}
	c.Logger().Warn("field-encryption: refused a fetch of topics with encrypted fields: Fetch before v4 drops record headers, and newer than v18 is unknown to this filter",
		"version", r.Version, "partitions", n)
}

// onFetchResponse restores the fields of every selected topic's records,
// as the connection's principal may see them, and reports whether it
// changed the response.
func (f *Filter) onFetchResponse(c *filter.Context, corr int32, r *kmsg.FetchResponse) (changed bool) {
	if fs := f.pending.Take(c, corr); len(fs) > 0 {
		filter.AddFetchRefused(r, fs)
		changed = true
	}
	if r.ErrorCode != 0 {
		return changed
	}
	ctx := c.Context()
	for ti := range r.Topics {
		t := &r.Topics[ti]
		if !slices.ContainsFunc(t.Partitions, func(p kmsg.FetchResponseTopicPartition) bool { return len(p.RecordBatches) > 0 }) {
			continue
		}
		name := t.Topic
		if r.Version >= 13 {
			n, err := c.TopicName(t.TopicID)
			if err != nil {
				code := fetchCode(err)
				changed = true
				for pi := range t.Partitions {
					if p := &t.Partitions[pi]; p.ErrorCode == 0 && len(p.RecordBatches) > 0 {
						filter.FailFetchPartition(p, code.Code)
					}
				}
				c.Logger().Warn("field-encryption: cannot tell whether a fetched topic has encrypted fields; failing its partitions",
					"topic_id", fmt.Sprintf("%x", t.TopicID), "error_code", code.Message, "err", err)
				continue
			}
			name = n
		}
		rule := f.policy(name).rule
		if rule == nil {
			continue
		}
		out := rule.outcome(c.Principal())
		if out == outCiphertext {
			continue // the records as stored
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				continue
			}
			recs, did, err := f.openPartition(ctx, name, rule, out == outRedact, p.RecordBatches)
			if err != nil {
				changed = true
				code := f.logFetchFailure(c, name, p.Partition, len(recs) > 0, err)
				if len(recs) == 0 {
					filter.FailFetchPartition(p, code.Code)
				} else {
					p.RecordBatches = recs
				}
				continue
			}
			if did {
				p.RecordBatches = recs
				changed = true
			}
		}
	}
	return changed
}

// onShareFetchResponse restores the fields of a share group's records, as
// onFetchResponse does for a consumer's.
func (f *Filter) onShareFetchResponse(c *filter.Context, r *kmsg.ShareFetchResponse) (changed bool) {
	if r.ErrorCode != 0 {
		return false
	}
	ctx := c.Context()
	for ti := range r.Topics {
		t := &r.Topics[ti]
		if !slices.ContainsFunc(t.Partitions, func(p kmsg.ShareFetchResponseTopicPartition) bool { return len(p.Records) > 0 }) {
			continue
		}
		name, err := c.TopicName(t.TopicID)
		var rule *compiledRule
		if err == nil {
			rule = f.policy(name).rule
		}
		if err == nil && (rule == nil || rule.outcome(c.Principal()) == outCiphertext) {
			continue
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 || len(p.Records) == 0 {
				continue
			}
			perr := err
			if perr == nil {
				var recs []byte
				var did bool
				recs, did, perr = f.openPartition(ctx, name, rule, rule.outcome(c.Principal()) == outRedact, p.Records)
				if perr == nil {
					if did {
						p.Records, changed = recs, true
					}
					continue
				}
			}
			// No partial answer: the acquired ranges would name records
			// the consumer never gets; unacknowledged, they come again.
			code := f.logFetchFailure(c, name, p.Partition, false, perr)
			filter.FailShareFetchPartition(p, code.Code, describe(perr))
			changed = true
		}
	}
	return changed
}

// openPartition restores the fields of one partition's records into a new
// slice. On error it returns the batches before the failing one.
func (f *Filter) openPartition(ctx context.Context, topic string, rule *compiledRule, redact bool, in []byte) ([]byte, bool, error) {
	s := getScratch()
	defer putScratch(s)
	j := opener{f: f, ctx: ctx, topic: topic, rule: rule, redact: redact, s: s}
	return rewrite(ctx, f.codecs, s, make([]byte, 0, len(in)), in, true, j.record)
}

// logFetchFailure logs a record whose fields could not be restored and
// returns the partition's error code.
func (f *Filter) logFetchFailure(c *filter.Context, topic string, partition int32, partial bool, err error) *kerr.Error {
	code := fetchCode(err)
	offset := int64(-1)
	var re *recordError
	if errors.As(err, &re) {
		offset = re.offset
	}
	msg := "field-encryption: cannot restore the fields of a fetched record; failing the partition"
	if partial {
		msg = "field-encryption: cannot restore the fields of a fetched record; the partition's records stop before it"
	}
	c.Logger().Warn(msg, "topic", topic, "partition", partition, "offset", offset, "error_code", code.Message, "err", err)
	return code
}

// produceCode maps why a partition could not be encrypted to the error
// code its producer gets:
//
//	a record lacks a field, has one of the wrong type, does not
//	parse, names an unknown schema or one the config does not fit
//	                                      INVALID_RECORD (not retried)
//	KMS or registry unavailable, timed out,
//	decompression budget spent            KAFKA_STORAGE_ERROR (retried)
//	KEK missing, no usable KEK name       POLICY_VIOLATION
//	topic ID unknown                      UNKNOWN_TOPIC_ID
//	request version too new               UNSUPPORTED_VERSION
//	a batch that cannot be read           as recordbatch.ProduceCode says
func produceCode(err error) *kerr.Error {
	var fe *fieldpath.Error
	switch {
	case errors.Is(err, kms.ErrUnavailable), errors.Is(err, schema.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.KafkaStorageError
	case errors.Is(err, kms.ErrKeyNotFound), errors.Is(err, errKEKName):
		return kerr.PolicyViolation
	case errors.Is(err, filter.ErrUnknownTopicID):
		return kerr.UnknownTopicID
	case errors.Is(err, errVersion):
		return kerr.UnsupportedVersion
	case errors.As(err, &fe), errors.Is(err, errFormat), errors.Is(err, errSchemaMismatch), errors.Is(err, errForgedMarker), errors.Is(err, errTooManyValues),
		errors.Is(err, schema.ErrInvalidRecord), errors.Is(err, schema.ErrNotFound),
		errors.Is(err, schema.ErrInvalidSchema):
		return kerr.InvalidRecord
	}
	if code := recordbatch.ProduceCode(err); code != nil {
		return code
	}
	return kerr.UnknownServerError
}

// fetchCode maps why a fetched partition's fields could not be restored
// to the error code its consumer gets: KAFKA_STORAGE_ERROR (retriable) when
// the KMS or registry cannot answer or the decompression budget is spent,
// UNKNOWN_TOPIC_ID, UNSUPPORTED_VERSION, and otherwise CORRUPT_MESSAGE, what
// a broker answers for a record it cannot read: a value that does not
// verify, a malformed marker, a KEK that no longer exists.
func fetchCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, kms.ErrUnavailable), errors.Is(err, schema.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, recordbatch.ErrBusy):
		return kerr.KafkaStorageError
	case errors.Is(err, filter.ErrUnknownTopicID):
		return kerr.UnknownTopicID
	case errors.Is(err, errVersion):
		return kerr.UnsupportedVersion
	}
	return kerr.CorruptMessage
}
