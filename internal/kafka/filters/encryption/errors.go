package encryption

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms"
)

// errVersion: a request version this filter was not written for.
var errVersion = errors.New("request version not supported by the record-encryption filter")

// produceCode maps why a partition of a Produce could not be encrypted to
// the error code its producer gets. Retriable codes where a retry can help,
// non-retriable ones where it cannot:
//
//	a batch that cannot be read       as recordbatch.ProduceCode says: legacy
//	                                  format UNSUPPORTED_FOR_MESSAGE_FORMAT, over
//	                                  max_batch_bytes MESSAGE_TOO_LARGE, CRC
//	                                  mismatch CORRUPT_MESSAGE, budget spent
//	                                  KAFKA_STORAGE_ERROR, malformed or over
//	                                  max_compression_ratio INVALID_RECORD
//	KMS unavailable, timed out        KAFKA_STORAGE_ERROR (retriable)
//	KEK missing (on_missing_kek: reject), KEK name over 255 bytes
//	                                  POLICY_VIOLATION
//	topic ID does not resolve         UNKNOWN_TOPIC_ID (retriable)
//	request version too new           UNSUPPORTED_VERSION
//	anything else                     UNKNOWN_SERVER_ERROR
func produceCode(err error) *kerr.Error {
	if code := recordbatch.ProduceCode(err); code != nil {
		return code
	}
	switch {
	case errors.Is(err, kms.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.KafkaStorageError
	case errors.Is(err, kms.ErrKeyNotFound), errors.Is(err, errKEKName):
		return kerr.PolicyViolation
	case errors.Is(err, filter.ErrUnknownTopicID):
		return kerr.UnknownTopicID
	case errors.Is(err, errVersion):
		return kerr.UnsupportedVersion
	}
	return kerr.UnknownServerError
}

// fetchCode maps why a partition of a Fetch response could not be
// decrypted to the error code its consumer gets:
//
//	KMS unavailable, timed out   KAFKA_STORAGE_ERROR (retriable: consumers retry)
//	decompression budget spent   KAFKA_STORAGE_ERROR
//	topic ID does not resolve    UNKNOWN_TOPIC_ID
//	request version too new      UNSUPPORTED_VERSION
//	anything else: a tag that does not verify, a KEK or KEK version that
//	no longer exists, a malformed envelope or batch, a batch over
//	max_compression_ratio, an unencrypted record under
//	unencrypted_on_fetch: reject
//	                             CORRUPT_MESSAGE
//
// CORRUPT_MESSAGE is what a broker answers for a record it cannot read;
// the Java consumer raises it to the application, and no client takes the
// records of an errored partition as data.
func fetchCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, kms.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.KafkaStorageError
	case errors.Is(err, filter.ErrUnknownTopicID):
		return kerr.UnknownTopicID
	case errors.Is(err, errVersion):
		return kerr.UnsupportedVersion
	}
	return kerr.CorruptMessage
}
