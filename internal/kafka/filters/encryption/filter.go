// Package encryption is the record-encryption filter: it encrypts the
// records of selected topics on their way to the broker and decrypts them on
// their way back, so the cluster, its disks and anyone reading it directly
// see only ciphertext.
//
// Envelope encryption: each record's value (and, when configured, its
// headers) is sealed with AES-256-GCM under a data-encryption key (DEK) that
// this instance generates and rotates; the DEK, wrapped by a per-topic
// key-encryption key (KEK) through a KMS (internal/kms), travels with every
// record in a marker header, so any instance with access to the KMS can
// decrypt. Keys may be encrypted deterministically so that log compaction
// still works. docs/encryption.md describes the envelope, the policies and
// the error codes.
//
// The filter fails closed: plaintext is never forwarded for a topic that
// policy says to encrypt, and a record that does not decrypt is never handed
// to a client as data.
//
// It imports the filter API, kafka/wire and the KMS interface; never the
// proxy, the CLI or the config package.
package encryption

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/topicsel"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/datakey"
)

// The newest versions this filter was written for. A newer version could
// lay out records or topics differently: it is refused, not passed unseen.
const (
	maxProduceVersion    = 13
	maxFetchVersion      = 18
	maxShareFetchVersion = 2
	// Fetch before v4 makes a broker down-convert to the legacy message
	// format, which drops headers, and with them the encryption marker:
	// such a fetch of an encrypted topic is refused.
	minFetchVersion = 4
)

// Filter is the record-encryption filter. One value serves every connection
// of a virtual cluster; it is safe for concurrent use.
type Filter struct {
	cfg               Config
	kms               kms.KMS
	bind              bool
	rejectUnencrypted bool
	plaintextOnMiss   bool

	pol    *policies
	ring   *datakey.Ring
	opens  *datakey.Openers
	keys   *datakey.Deterministic
	codecs *recordbatch.Codecs

	// pending counts the error entries waiting, on all connections, to be
	// added to Produce responses; while there are none, Produce responses
	// stay on the byte-copy path.
	pending filter.PerRequest[filter.Refused]
	// missLog limits "KEK missing, passing plaintext" lines to one per KEK
	// per minute.
	missMu  sync.Mutex
	missLog map[string]time.Time
	now     func() time.Time
}

// maxMissLog bounds the KEKs and topics missLog remembers: both can be
// built from topic names, which clients choose.
const maxMissLog = 4096

// New returns the filter. k is the KMS, usually behind kms.NewCache.
func New(cfg Config, k kms.KMS) (*Filter, error) {
	if k == nil {
		return nil, errors.New("record-encryption: no KMS")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &Filter{
		cfg:               cfg,
		kms:               k,
		bind:              *cfg.BindTopic,
		rejectUnencrypted: cfg.UnencryptedOnFetch == policyReject,
		plaintextOnMiss:   cfg.OnMissingKEK == policyPlaintext,
		pol:               newPolicies(topicsel.New(cfg.Topics), cfg.KEK),
		codecs:            cfg.limits().Codecs(),
		missLog:           map[string]time.Time{},
		now:               time.Now,
	}
	now := func() time.Time { return f.now() } // tests replace f.now
	f.opens = datakey.NewOpeners(k, cfg.KMSTimeout)
	f.ring = datakey.NewRing(datakey.RingOptions{
		KMS: k, MaxRecords: cfg.DEK.MaxRecords, MaxAge: cfg.DEK.MaxAge, Timeout: cfg.KMSTimeout, Now: now,
		// The instance that made a DEK opens its own records without
		// asking the KMS to unwrap it.
		OnNew: f.opens.Add,
	})
	f.keys = datakey.NewDeterministic(datakey.DeterministicOptions{KMS: k, Timeout: cfg.KMSTimeout, Now: now, Label: keyLabel})
	return f, nil
}

// binding is what the KMS binds a DEK for topic to: the topic, when records
// are bound to it (bind_topic, recorded in each record's marker), so that a
// KMS that can check it (AWS KMS's encryption context) does so too.
func (f *Filter) binding(topic string, bound bool) kms.Binding {
	if !bound {
		return kms.Binding{}
	}
	return kms.Binding{Topic: topic}
}

// Describe implements prometheus.Collector: the calls that reached the KMS
// (strait_kms_calls_total), which belong to the process, not to one filter.
func (*Filter) Describe(ch chan<- *prometheus.Desc) { kms.Calls.Describe(ch) }

// Collect implements prometheus.Collector.
func (*Filter) Collect(ch chan<- prometheus.Metric) { kms.Calls.Collect(ch) }

// Name implements filter.Filter.
func (*Filter) Name() string { return "record-encryption" }

// Interest implements filter.Filter: every version of Produce requests, the
// Fetch requests it must refuse, and every Produce, Fetch and ShareFetch
// response.
func (*Filter) Interest() filter.Interest {
	return filter.Interest{
		Requests: []filter.KeyRange{
			{Key: wire.KeyProduce},
			{Key: wire.KeyFetch, MinVersion: 0, MaxVersion: minFetchVersion - 1},
			{Key: wire.KeyFetch, MinVersion: maxFetchVersion + 1},
			{Key: wire.KeyShareFetch, MinVersion: maxShareFetchVersion + 1},
		},
		Responses: filter.Keys(wire.KeyProduce, wire.KeyFetch, wire.KeyShareFetch),
	}
}

// WantsResponse implements filter.ResponseSkimmer. A Produce response
// needs decoding only to add the errors of partitions this filter took out
// of its request, which is rare; Fetch responses always do.
func (f *Filter) WantsResponse(key, _ int16, _ []byte) bool {
	if key == wire.KeyProduce {
		return f.pending.Len() > 0
	}
	return true
}

// OnRequest implements filter.RequestHandler.
func (f *Filter) OnRequest(c *filter.Context, req *filter.Request) error {
	switch r := req.Body.(type) {
	case *kmsg.ProduceRequest:
		f.onProduce(c, req, r)
	case *kmsg.FetchRequest:
		f.onFetchRequest(c, req, r)
	case *kmsg.ShareFetchRequest:
		// Only versions newer than this filter knows get here.
		resp := kmsg.NewPtrShareFetchResponse()
		resp.ErrorCode = fetchCode(errVersion).Code
		msg := errVersion.Error()
		resp.ErrorMessage = &msg
		req.Respond(resp)
	}
	return nil
}

// OnResponse implements filter.ResponseHandler.
func (f *Filter) OnResponse(c *filter.Context, resp *filter.Response) error {
	switch r := resp.Body.(type) {
	case *kmsg.ProduceResponse:
		if fs := f.pending.Take(c, resp.Header.CorrelationID); len(fs) > 0 {
			filter.AddProduceRefused(r, fs)
		} else {
			// Decoded only because another request, perhaps on
			// another connection, had a partition refused: the
			// broker's bytes go on as they came.
			resp.Unchanged()
		}
	case *kmsg.FetchResponse:
		if !f.onFetchResponse(c, resp.Header.CorrelationID, r) {
			// No selected topic had records: let the proxy forward the
			// broker's bytes rather than re-encode them.
			resp.Unchanged()
		}
	case *kmsg.ShareFetchResponse:
		f.onShareFetchResponse(c, r)
	}
	return nil
}

// maxOverhead estimates what sealing adds to one record, for sizing output
// buffers; append grows them if it is short.
func (f *Filter) maxOverhead(kek string) int {
	const wrappedGuess = 64
	n := datakey.TagLen + bytesFieldLen(len(markerKey)) + 3 + 2 + 1 + len(kek) + 1 + wrappedGuess + 10 + 3
	if f.cfg.EncryptKey {
		n += 5 + datakey.DeterministicOverhead + 2
	}
	return n
}

// logMissing logs, at most once a minute per KEK, that records go out
// unencrypted because their KEK is missing.
func (f *Filter) logMissing(c *filter.Context, topic, kek string, err error) {
	now := f.now()
	f.missMu.Lock()
	last, ok := f.missLog[kek]
	if ok && now.Sub(last) < time.Minute {
		f.missMu.Unlock()
		return
	}
	if len(f.missLog) >= maxMissLog {
		clear(f.missLog)
	}
	f.missLog[kek] = now
	f.missMu.Unlock()
	c.Logger().Warn("record-encryption: KEK missing; on_missing_kek is plaintext, so records go to the broker unencrypted",
		"topic", topic, "kek", kek, "err", err)
}

// defaultMaxMessageBytes is Kafka's default max.message.bytes (1 MiB plus
// the batch overhead), the most a broker accepts in one record batch
// unless the topic says otherwise.
const defaultMaxMessageBytes = 1048588

// logGrowth warns, at most once a minute per topic, that encryption took a
// batch past Kafka's default size limit: a broker that keeps the default
// answers MESSAGE_TOO_LARGE, and only the producer's batch.size can fix
// that (the gateway cannot split a batch without breaking sequence
// numbers).
func (f *Filter) logGrowth(c *filter.Context, topic string, before, after int) {
	now := f.now()
	key := "size\x00" + topic
	f.missMu.Lock()
	last, ok := f.missLog[key]
	if ok && now.Sub(last) < time.Minute {
		f.missMu.Unlock()
		return
	}
	if len(f.missLog) >= maxMissLog {
		clear(f.missLog)
	}
	f.missLog[key] = now
	f.missMu.Unlock()
	c.Logger().Warn("record-encryption: a record batch grew past Kafka's default max.message.bytes when encrypted; "+
		"if the broker answers MESSAGE_TOO_LARGE, lower the producer's batch.size (about 10% below the limit leaves room)",
		"topic", topic, "plaintext_bytes", before, "encrypted_bytes", after, "default_limit", defaultMaxMessageBytes)
}

func describe(err error) string { return fmt.Sprintf("strait record-encryption: %v", err) }

var (
	_ filter.RequestHandler  = (*Filter)(nil)
	_ filter.ResponseHandler = (*Filter)(nil)
	_ filter.ResponseSkimmer = (*Filter)(nil)
)
