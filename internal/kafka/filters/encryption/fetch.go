package encryption

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// onFetchRequest sees only the Fetch versions this filter cannot serve:
// before v4, which make the broker drop record headers, and versions newer
// than it knows. Selected topics are taken out of such a request and get
// UNSUPPORTED_VERSION; other topics are fetched as usual.
func (f *Filter) onFetchRequest(c *filter.Context, req *filter.Request, r *kmsg.FetchRequest) {
	tooNew := r.Version > maxFetchVersion
	var why error
	if tooNew {
		why = fmt.Errorf("%w: Fetch v%d (this filter reads up to v%d)", errVersion, r.Version, maxFetchVersion)
	} else {
		why = fmt.Errorf("%w: Fetch v%d makes the broker drop record headers, and with them the encryption marker; use v%d or newer",
			errVersion, r.Version, minFetchVersion)
	}
	// A version too new is refused whole: its topics cannot be trusted to
	// be read correctly.
	refuse := func(topic string) bool { return f.pol.get(topic).encrypt }
	if n := filter.RefuseFetchTopics(c, req, r, tooNew, refuse, &f.pending); n > 0 {
		c.Logger().Warn("record-encryption: refused a fetch of encrypted topics", "version", r.Version, "partitions", n, "err", why)
	}
}

// onFetchResponse decrypts the records of every selected topic.
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
		if !fetchHasRecords(t.Partitions) {
			continue
		}
		name := t.Topic
		if r.Version >= 13 {
			n, err := c.TopicName(t.TopicID)
			if err != nil {
				code := fetchCode(err)
				changed = true
				for pi := range t.Partitions {
					p := &t.Partitions[pi]
					if p.ErrorCode == 0 && len(p.RecordBatches) > 0 {
						filter.FailFetchPartition(p, code.Code)
					}
				}
				c.Logger().Warn("record-encryption: cannot tell whether a fetched topic is encrypted; failing its partitions",
					"topic_id", fmt.Sprintf("%x", t.TopicID), "error_code", code.Message, "err", err)
				continue
			}
			name = n
		}
		if !f.pol.get(name).encrypt {
			continue
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				continue
			}
			changed = true
			out, err := f.openPartition(ctx, name, p.RecordBatches)
			p.RecordBatches = out
			if err != nil {
				code := f.logFetchFailure(c, name, p.Partition, len(out) > 0, err)
				if len(out) == 0 {
					filter.FailFetchPartition(p, code.Code)
				}
			}
		}
	}
	return changed
}

func fetchHasRecords(ps []kmsg.FetchResponseTopicPartition) bool {
	for i := range ps {
		if len(ps[i].RecordBatches) > 0 {
			return true
		}
	}
	return false
}

// onShareFetchResponse decrypts the records of a share group's fetch, as
// onFetchResponse does for a consumer's.
func (f *Filter) onShareFetchResponse(c *filter.Context, r *kmsg.ShareFetchResponse) {
	if r.ErrorCode != 0 {
		return
	}
	ctx := c.Context()
	for ti := range r.Topics {
		t := &r.Topics[ti]
		has := false
		for pi := range t.Partitions {
			has = has || len(t.Partitions[pi].Records) > 0
		}
		if !has {
			continue
		}
		name, err := c.TopicName(t.TopicID)
		if err != nil {
			code := fetchCode(err)
			msg := describe(err)
			for pi := range t.Partitions {
				p := &t.Partitions[pi]
				if p.ErrorCode == 0 && len(p.Records) > 0 {
					filter.FailShareFetchPartition(p, code.Code, msg)
				}
			}
			c.Logger().Warn("record-encryption: cannot tell whether a share-fetched topic is encrypted; failing its partitions",
				"topic_id", fmt.Sprintf("%x", t.TopicID), "error_code", code.Message, "err", err)
			continue
		}
		if !f.pol.get(name).encrypt {
			continue
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 || len(p.Records) == 0 {
				continue
			}
			out, err := f.openPartition(ctx, name, p.Records)
			p.Records = out
			if err != nil {
				// No partial answer here: the acquired ranges would
				// name records the consumer never gets. Unacknowledged,
				// they are offered again when their lock runs out.
				code := f.logFetchFailure(c, name, p.Partition, false, err)
				filter.FailShareFetchPartition(p, code.Code, describe(err))
			}
		}
	}
}

// logFetchFailure logs a record that could not be decrypted, with its
// topic, partition and offset, and returns the partition's error code.
func (f *Filter) logFetchFailure(c *filter.Context, topic string, partition int32, partial bool, err error) *kerr.Error {
	code := fetchCode(err)
	offset := int64(-1)
	var re *recordError
	if errors.As(err, &re) {
		offset = re.offset
	}
	msg := "record-encryption: cannot decrypt a fetched record; failing the partition"
	if partial {
		msg = "record-encryption: cannot decrypt a fetched record; the partition's records stop before it"
	}
	c.Logger().Warn(msg, "topic", topic, "partition", partition, "offset", offset, "error_code", code.Message, "err", err)
	return code
}

// openPartition decrypts one partition's records.
func (f *Filter) openPartition(ctx context.Context, topic string, in []byte) ([]byte, error) {
	s := getScratch()
	defer putScratch(s)
	j := opener{f: f, ctx: ctx, topic: topic, s: s}
	return j.openRecords(in)
}
