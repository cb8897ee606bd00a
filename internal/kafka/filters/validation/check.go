package validation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/schema"
	"github.com/straitgw/strait/internal/schema/jsonschema"
)

// verdict is what checking one partition's records found.
type verdict struct {
	// Records by what became of their check.
	valid, invalid, unchecked int
	// code is the error the partition is refused with; nil when every
	// record is valid. Under warn it is what reject would have answered.
	code *kerr.Error
	// msg is the partition's error_message.
	msg string
	// reason is the first fault, for the log line.
	reason string
	// records are the KIP-467 record errors (INVALID_RECORD only).
	records []kmsg.ProduceResponseTopicPartitionErrorRecord
}

// checker checks the records of one partition against a rule.
type checker struct {
	f     *Filter
	ctx   context.Context
	topic string
	rule  *rule
	buf   *[]byte // decompressed records, pooled

	// down is the registry's error once it failed to answer for this
	// partition: later schema checks are not tried again, each would
	// only wait for the same answer.
	down error
	// idx is the index of the next record in its batch.
	idx int
	// batchErr is why a batch could not be read.
	batchErr error
	// firstUnchecked says why the first record that could not be checked
	// was not.
	firstUnchecked string
	v              verdict
}

// fault is why one part of a record failed or could not be checked.
type fault struct {
	reason string
	retry  bool // the record could not be checked now; later it may pass
}

var bufs = sync.Pool{New: func() any { return new([]byte) }}

// keepBuf is the largest decompression buffer that goes back to the pool;
// a rare huge batch does not pin its memory.
const keepBuf = 4 << 20

// checkPartition checks the records of one partition of a Produce request.
func (f *Filter) checkPartition(ctx context.Context, topic string, r *rule, records []byte) verdict {
	c := checker{f: f, ctx: ctx, topic: topic, rule: r}
	c.run(records)
	if c.buf != nil {
		if cap(*c.buf) > keepBuf {
			*c.buf = nil
		}
		*c.buf = (*c.buf)[:0]
		bufs.Put(c.buf)
	}
	return c.finish()
}

// run checks every batch of records, stopping at one that cannot be read
// and, in reject mode, once the partition is refused for good.
func (c *checker) run(records []byte) {
	for rest := records; len(rest) > 0; {
		batch, next, err := recordbatch.Next(rest)
		if err != nil {
			c.batchErr = err
			return
		}
		rest = next
		// The CRC is checked only when a batch fails: a batch that passes
		// goes to the broker as sent, and the broker checks its CRC, so the
		// good path does not pay for it twice (about a tenth of the
		// filter's CPU); a failing batch whose CRC is wrong was damaged on
		// the way, which the producer retries (CORRUPT_MESSAGE), rather
		// than a bad record, which it must not (INVALID_RECORD).
		if err := recordbatch.CheckHeader(batch); err != nil {
			c.batchErr = err
			return
		}
		if recordbatch.IsControl(batch) {
			continue // a transaction marker: no data to check
		}
		invalid := c.v.invalid
		ok := c.batch(batch)
		if (!ok || c.v.invalid > invalid) && recordbatch.CheckCRC(batch) != nil {
			c.batchErr = recordbatch.ErrBadCRC
			return
		}
		if !ok {
			return
		}
	}
}

// batch checks the records of one batch, and reports whether to go on.
func (c *checker) batch(batch []byte) bool {
	recs := batch[recordbatch.HeaderLen:]
	if k := recordbatch.CodecOf(batch); k != recordbatch.Uncompressed {
		if c.buf == nil {
			c.buf = bufs.Get().(*[]byte)
		}
		out, held, err := c.f.codecs.Decompress(c.ctx, (*c.buf)[:0], k, recs)
		*c.buf = out[:0]
		if err != nil {
			c.batchErr = err
			return false
		}
		defer c.f.codecs.Release(held)
		recs = out
	}
	c.idx = 0
	for range recordbatch.Count(batch) {
		rec, rest, err := recordbatch.ParseRecord(recs)
		if err != nil {
			c.batchErr = fmt.Errorf("record %d of the batch: %w", c.idx, err)
			return false
		}
		recs = rest
		c.record(&rec)
		c.idx++
		if !c.rule.warn && c.v.invalid >= maxRecordErrors {
			return false // refused whatever the rest holds
		}
	}
	if len(recs) != 0 {
		c.batchErr = recordbatch.ErrTrailingBytes
		return false
	}
	return true
}

// record checks one record's key and value.
func (c *checker) record(rec *recordbatch.Record) {
	var ft *fault
	if p := c.rule.key; p != nil {
		ft = c.part(p, rec.Key, rec.KeyNull)
	}
	if p := c.rule.value; p != nil && (ft == nil || ft.retry) {
		if vf := c.part(p, rec.Value, rec.ValueNull); vf != nil && (ft == nil || !vf.retry) {
			ft = vf
		}
	}
	switch {
	case ft == nil:
		c.v.valid++
	case ft.retry:
		c.v.unchecked++
		if c.firstUnchecked == "" {
			c.firstUnchecked = c.describe(ft.reason)
		}
	default:
		c.v.invalid++
		if len(c.v.records) < maxRecordErrors {
			msg := c.describe(ft.reason)
			c.v.records = append(c.v.records, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: int32(c.idx), ErrorMessage: &msg})
		}
	}
}

// describe places a reason: the topic, the record and the rule.
func (c *checker) describe(reason string) string {
	return reason + " (topic " + c.topic + ", record " + strconv.Itoa(c.idx) + " of the batch, " + c.rule.desc + ")"
}

// part checks one part of a record; nil means it passes.
func (c *checker) part(p *part, b []byte, null bool) *fault {
	switch {
	case null:
		if p.allowNull {
			return nil
		}
		return c.fail(p, "is null, and the rule has allow_null: false")
	case p.maxBytes > 0 && len(b) > p.maxBytes:
		return c.fail(p, fmt.Sprintf("is %d bytes, over the rule's max_bytes of %d", len(b), p.maxBytes))
	case len(b) == 0:
		if p.allowEmpty {
			return nil
		}
		return c.fail(p, "is empty (0 bytes, not null), and the rule has allow_empty: false")
	}
	if p.json {
		if err := jsonschema.CheckSyntax(b, p.jsonOpts); err != nil {
			return c.fail(p, err.Error())
		}
	}
	if p.schema == nil {
		return nil
	}
	if c.down != nil {
		return &fault{reason: p.name + ": " + c.down.Error(), retry: true}
	}
	_, err := c.f.reg.Validate(c.ctx, c.topic, p.isKey, b, p.schema)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, schema.ErrInvalidRecord), errors.Is(err, schema.ErrNotAllowed),
		errors.Is(err, schema.ErrNotFound), errors.Is(err, schema.ErrInvalidSchema):
		return c.fail(p, err.Error())
	}
	// The registry could not answer (ErrUnavailable), or answered
	// something that says nothing about the record (a 400 to a lookup):
	// the record may pass later.
	c.down = err
	return &fault{reason: p.name + ": " + err.Error(), retry: true}
}

func (c *checker) fail(p *part, reason string) *fault {
	return &fault{reason: p.name + ": " + reason}
}

// finish decides the partition's answer. A batch that cannot be read is
// refused for that; then an invalid record is final (INVALID_RECORD, with
// every invalid record listed); then a record that could not be checked
// asks for a retry.
func (c *checker) finish() verdict {
	v := c.v
	switch {
	case c.batchErr != nil:
		v.code = batchCode(c.batchErr)
		v.reason = c.batchErr.Error()
		v.msg = "strait record-validation: " + v.reason + " (topic " + c.topic + ", " + c.rule.desc + ")"
		v.records = nil
	case v.invalid > 0:
		v.code = kerr.InvalidRecord
		v.reason = *v.records[0].ErrorMessage
		v.msg = "strait record-validation: " + v.reason
		if v.invalid > 1 {
			v.msg += fmt.Sprintf("; %d invalid records in all", v.invalid)
		}
	case v.unchecked > 0:
		v.code = kerr.KafkaStorageError
		v.reason = c.firstUnchecked
		v.msg = "strait record-validation: cannot check the records now, retry: " + v.reason
	}
	return v
}

// batchCode maps why a batch could not be read to the error code its
// producer gets: as for any filter that reads batches
// (recordbatch.ProduceCode), and for anything else (a cancelled or timed
// out read, a decoder that could not be made) KAFKA_STORAGE_ERROR when a
// retry may pass, INVALID_RECORD otherwise.
func batchCode(err error) *kerr.Error {
	if code := recordbatch.ProduceCode(err); code != nil {
		return code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return kerr.KafkaStorageError
	}
	return kerr.InvalidRecord
}
