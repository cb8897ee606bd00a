package filter

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Refused is a partition a filter took out of a request, so that none of
// its records reach the broker, with the error its client gets for it
// instead. The filter answers the request itself when nothing is left to
// send, or adds the entry to the broker's answer (AnswerProduce,
// AddProduceRefused).
type Refused struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	Code      int16
	Message   string
	// Records are the KIP-467 record errors of a Produce partition.
	Records []kmsg.ProduceResponseTopicPartitionErrorRecord
}

// About reports whether r belongs under the response topic named name
// (before version 13) or with topic ID id (13 and later: Produce and Fetch
// switched to IDs at the same version).
func (r *Refused) About(version int16, name string, id [16]byte) bool {
	if version >= 13 {
		return id == r.TopicID
	}
	return name == r.Topic
}

// AnswerProduce answers for the partitions a filter took out of r, a
// Produce request: at once, through req.Respond, when r has no topic left
// to send; otherwise they are kept in pending under the request's
// correlation id, for the filter's OnResponse to add to the broker's answer
// with AddProduceRefused. With acks=0 no answer ever comes, and the
// partitions are simply dropped.
func AnswerProduce(c *Context, req *Request, r *kmsg.ProduceRequest, refused []Refused, pending *PerRequest[Refused]) {
	switch {
	case len(refused) == 0:
	case len(r.Topics) == 0:
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = r.Version
		AddProduceRefused(resp, refused)
		req.Respond(resp)
	case r.Acks != 0:
		pending.Add(c, req.Header.CorrelationID, refused...)
	}
}

// RefuseProduce answers the whole of r itself, every partition with code
// and msg.
func RefuseProduce(req *Request, r *kmsg.ProduceRequest, code int16, msg string) {
	var refused []Refused
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			refused = append(refused, Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: code, Message: msg})
		}
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = r.Version
	AddProduceRefused(resp, refused)
	req.Respond(resp)
}

// AddProduceRefused adds an entry per refused partition to a Produce
// response, under its topic's entry (made if the response has none): the
// error code, the message (v8+), the record errors, and a base offset of
// -1 as from a broker.
func AddProduceRefused(resp *kmsg.ProduceResponse, refused []Refused) {
	for i := range refused {
		r := &refused[i]
		ti := slices.IndexFunc(resp.Topics, func(t kmsg.ProduceResponseTopic) bool { return r.About(resp.Version, t.Topic, t.TopicID) })
		if ti < 0 {
			ti = len(resp.Topics)
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = r.Topic, r.TopicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = r.Partition
		p.ErrorCode = r.Code
		p.BaseOffset = -1
		msg := r.Message
		p.ErrorMessage = &msg // v8+; left out of older versions
		p.ErrorRecords = r.Records
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
}

// AddFetchRefused adds an entry per refused partition to a Fetch response,
// under its topic's entry (made if the response has none), as a broker
// writes a partition it cannot serve (FailFetchPartition).
func AddFetchRefused(resp *kmsg.FetchResponse, refused []Refused) {
	for i := range refused {
		r := &refused[i]
		ti := slices.IndexFunc(resp.Topics, func(t kmsg.FetchResponseTopic) bool { return r.About(resp.Version, t.Topic, t.TopicID) })
		if ti < 0 {
			ti = len(resp.Topics)
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = r.Topic, r.TopicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = r.Partition
		FailFetchPartition(&p, r.Code)
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
}

// noRecords and noAborted are the record set and aborted transactions of
// a failed partition: empty, not null. Zero-length with no capacity, so
// sharing them is safe: an append makes a new array.
var (
	noRecords = []byte{}
	noAborted = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
)

// FailFetchPartition turns p into the entry a broker sends for a partition
// it cannot serve: the error code, an empty record set, offsets unknown.
//
// The record set must be empty rather than null. Kafka sends an empty one
// with every error, and librdkafka refuses a null one ("invalid
// MessageSetSize -1"), dropping the whole response and fetching again at
// once, without backoff and without telling the application; sarama
// before flexible versions fails the response too. Offsets go to -1 as a
// broker's do on a failed read; the list of aborted transactions is empty
// (the records it was about are gone), an empty array rather than null so
// that no reader in read_committed mode meets a null; and no other replica
// is suggested, or librdkafka would go and fetch from it.
func FailFetchPartition(p *kmsg.FetchResponseTopicPartition, code int16) {
	p.ErrorCode = code
	p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
	p.AbortedTransactions = noAborted
	p.PreferredReadReplica = -1
	p.RecordBatches = noRecords
}

// FailShareFetchPartition turns p into an error entry, with an empty (not
// null) record set as for Fetch, and no acquired records: the consumer
// gets none of them, and, unacknowledged, they are offered again when
// their lock runs out.
func FailShareFetchPartition(p *kmsg.ShareFetchResponseTopicPartition, code int16, msg string) {
	p.ErrorCode, p.ErrorMessage = code, &msg
	p.Records, p.AcquiredRecords = noRecords, nil
}

// RefuseFetchTopics takes out of r, a Fetch request, the topics a filter
// cannot serve at r's version (every topic when whole, as for a version
// newer than the filter reads; else those refuse selects, by name: before
// v13, the versions this is for, topics have names), and refuses their
// partitions with UNSUPPORTED_VERSION: at once, through req.Respond, when
// whole or when nothing is left to fetch; otherwise they wait in pending
// for the filter's OnResponse to add them with AddFetchRefused. It returns
// how many partitions it refused.
func RefuseFetchTopics(c *Context, req *Request, r *kmsg.FetchRequest, whole bool, refuse func(topic string) bool, pending *PerRequest[Refused]) int {
	var refused []Refused
	topics := r.Topics[:0]
	for _, t := range r.Topics {
		if !whole && !refuse(t.Topic) {
			topics = append(topics, t)
			continue
		}
		for _, p := range t.Partitions {
			refused = append(refused, Refused{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Code: kerr.UnsupportedVersion.Code})
		}
	}
	r.Topics = topics
	switch {
	case len(refused) == 0:
	case whole || len(topics) == 0:
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = r.Version
		if whole {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
		}
		AddFetchRefused(resp, refused)
		req.Respond(resp)
	default:
		pending.Add(c, req.Header.CorrelationID, refused...)
	}
	return len(refused)
}
