package encryption

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/topicsel"
	"github.com/straitgw/strait/internal/kms/datakey"
)

// Config is the filter's config block (the `config:` of a `record-encryption`
// filter entry). The KMS is not part of it: the caller builds the KMS and
// hands it to New.
type Config struct {
	// Topics selects the topics to encrypt: exact names, prefixes
	// ("secure-*") or globs ("*-pii", "team-?-secrets", "[ab]-*"). Records
	// of other topics pass untouched.
	Topics []string `yaml:"topics"`
	// KEK names the key-encryption key of a topic: a fixed name, or a
	// template in which {topic} stands for the topic's name.
	KEK string `yaml:"kek"`
	// OnMissingKEK is what happens to a produce to a selected topic whose
	// KEK does not exist: "reject" (the default) fails it with
	// POLICY_VIOLATION; "plaintext" lets it through unencrypted.
	OnMissingKEK string `yaml:"on_missing_kek"`
	// UnencryptedOnFetch is what happens to a fetched record of a
	// selected topic that carries no envelope (written before encryption
	// was turned on, or straight to the broker): "pass" (the default)
	// hands it over as it is; "reject" fails the partition with
	// CORRUPT_MESSAGE.
	UnencryptedOnFetch string `yaml:"unencrypted_on_fetch"`
	// EncryptHeaders moves record headers into the ciphertext; only the
	// encryption marker stays in clear.
	EncryptHeaders bool `yaml:"encrypt_headers"`
	// EncryptKey encrypts record keys deterministically, so equal keys
	// give equal ciphertexts and log compaction keeps working.
	EncryptKey bool `yaml:"encrypt_key"`
	// BindTopic makes the topic name part of each ciphertext's
	// authenticated data, so a record copied into another topic does not
	// decrypt. Default true.
	BindTopic *bool `yaml:"bind_topic"`
	// DEK bounds the use of each data-encryption key.
	DEK DEKConfig `yaml:"dek"`
	// MaxBatchBytes bounds what one compressed record batch may
	// decompress to, against decompression bombs. Default 64 MiB.
	MaxBatchBytes int `yaml:"max_batch_bytes"`
	// MaxCompressionRatio bounds how many times its compressed size a
	// batch may decompress to; any batch may reach 1 MiB. Default 100.
	MaxCompressionRatio int `yaml:"max_compression_ratio"`
	// DecompressionBudget bounds the bytes that the batches being
	// processed hold decompressed at once, across every connection and
	// every record-encryption filter of the gateway: one budget per
	// process, the largest any filter sets. A batch that cannot get its
	// share waits, then is refused with a retriable error. Default
	// 256 MiB.
	DecompressionBudget int `yaml:"decompression_budget"`
	// KMSTimeout bounds each call to the KMS; while one runs, the
	// connection that needs it waits. Default 5 s. Set by the caller from
	// the KMS settings, not read from the filter's YAML.
	KMSTimeout time.Duration `yaml:"-"`
}

// DEKConfig bounds the use of a data-encryption key: a new one is made
// after MaxRecords records or MaxAge, whichever comes first.
type DEKConfig struct {
	MaxRecords uint64        `yaml:"max_records"`
	MaxAge     time.Duration `yaml:"max_age"`
}

// Defaults and limits.
const (
	DefaultMaxRecords = 1_000_000
	DefaultMaxAge     = time.Hour
	// The decompression limits are those every filter that reads
	// compressed batches shares (recordbatch.Limits).
	DefaultMaxBatchBytes       = recordbatch.DefaultMaxBatchBytes
	DefaultMaxCompressionRatio = recordbatch.DefaultMaxCompressionRatio
	DefaultDecompressionBudget = recordbatch.DefaultDecompressionBudget
	DefaultKMSTimeout          = 5 * time.Second
	// MaxRecordsLimit caps dek.max_records at 2^32 encryptions under one
	// key, the usual bound for AES-GCM.
	MaxRecordsLimit = 1 << 32

	policyReject    = "reject"
	policyPlaintext = "plaintext"
	policyPass      = "pass"

	topicPlaceholder = "{topic}"
)

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.OnMissingKEK == "" {
		c.OnMissingKEK = policyReject
	}
	if c.UnencryptedOnFetch == "" {
		c.UnencryptedOnFetch = policyPass
	}
	if c.BindTopic == nil {
		t := true
		c.BindTopic = &t
	}
	if c.DEK.MaxRecords == 0 {
		c.DEK.MaxRecords = DefaultMaxRecords
	}
	if c.DEK.MaxAge == 0 {
		c.DEK.MaxAge = DefaultMaxAge
	}
	l := c.limits().WithDefaults()
	c.MaxBatchBytes, c.MaxCompressionRatio, c.DecompressionBudget = l.MaxBatchBytes, l.MaxCompressionRatio, l.DecompressionBudget
	if c.KMSTimeout == 0 {
		c.KMSTimeout = DefaultKMSTimeout
	}
	return c
}

// Validate reports every problem of the config at once, each naming the
// field and how to fix it.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Topics) == 0 {
		bad(`topics: is empty: list the topics to encrypt, e.g. topics: ["orders", "secure-*"]`)
	}
	for i, t := range c.Topics {
		if err := topicsel.Check(t, "secure-*"); err != nil {
			bad("topics[%d]: %v", i, err)
		}
	}
	if err := checkKEKTemplate(c.KEK); err != nil {
		bad("kek: %v", err)
	}
	switch c.OnMissingKEK {
	case "", policyReject, policyPlaintext:
	default:
		bad("on_missing_kek: %q is not a policy: use reject (fail the produce, the default) or plaintext (let it through unencrypted)", c.OnMissingKEK)
	}
	switch c.UnencryptedOnFetch {
	case "", policyPass, policyReject:
	default:
		bad("unencrypted_on_fetch: %q is not a policy: use pass (hand unencrypted records over as they are, the default) or reject (fail the fetch)", c.UnencryptedOnFetch)
	}
	if c.DEK.MaxRecords > MaxRecordsLimit {
		bad("dek.max_records: %d is over the limit of %d encryptions under one AES-GCM key: lower it", c.DEK.MaxRecords, uint64(MaxRecordsLimit))
	}
	switch {
	case c.DEK.MaxAge < 0:
		bad("dek.max_age: %s is negative: use a duration such as 1h", c.DEK.MaxAge)
	case c.DEK.MaxAge > 0 && c.DEK.MaxAge < time.Second:
		bad("dek.max_age: %s is under a second: every produce would ask the KMS for a new key; use at least 1s (1h is the default)", c.DEK.MaxAge)
	}
	if err := c.limits().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.KMSTimeout < 0 {
		bad("kms.timeout: %s is negative: use a duration such as 5s", c.KMSTimeout)
	}
	return errors.Join(errs...)
}

// limits are the decompression settings, which every filter that reads
// compressed batches shares.
func (c Config) limits() recordbatch.Limits {
	return recordbatch.Limits{MaxBatchBytes: c.MaxBatchBytes, MaxCompressionRatio: c.MaxCompressionRatio, DecompressionBudget: c.DecompressionBudget}
}

// checkKEKTemplate checks the kek field: a fixed name, or a template whose
// only placeholder is {topic}.
func checkKEKTemplate(t string) error {
	if t == "" {
		return errors.New(`is empty: name the key-encryption key, e.g. kek: "orders-kek", or build it from the topic, e.g. kek: "{topic}-kek"`)
	}
	rest := strings.ReplaceAll(t, topicPlaceholder, "")
	if strings.ContainsAny(rest, "{}") {
		return fmt.Errorf(`%q has a placeholder other than {topic}: {topic} is the only one (the config loader expands ${...} itself)`, t)
	}
	if !strings.Contains(t, topicPlaceholder) && len(t) > datakey.MaxNameLen {
		return fmt.Errorf("%q is %d bytes long: a KEK name is at most %d bytes", t, len(t), datakey.MaxNameLen)
	}
	return nil
}

// topicPolicy is what the filter does with one topic.
type topicPolicy struct {
	encrypt bool
	kek     string
	kekErr  error // the template gives no usable name for this topic
}

// policies caches topicPolicy by topic name. Names come from clients, so
// the cache is bounded: when full it starts over.
type policies struct {
	sel  *topicsel.Selector
	kek  string
	mu   sync.RWMutex
	m    map[string]*topicPolicy
	max  int
	none *topicPolicy
}

const maxCachedTopics = 10000

var errKEKName = errors.New("no usable KEK name")

func newPolicies(sel *topicsel.Selector, kek string) *policies {
	return &policies{sel: sel, kek: kek, m: map[string]*topicPolicy{}, max: maxCachedTopics, none: &topicPolicy{}}
}

func (p *policies) get(topic string) *topicPolicy {
	p.mu.RLock()
	tp, ok := p.m[topic]
	p.mu.RUnlock()
	if ok {
		return tp
	}
	tp = p.none
	if p.sel.Match(topic) {
		tp = &topicPolicy{encrypt: true, kek: strings.ReplaceAll(p.kek, topicPlaceholder, topic)}
		if len(tp.kek) > datakey.MaxNameLen {
			tp.kekErr = fmt.Errorf("%w: the KEK name for topic %q is %d bytes long, over the limit of %d: shorten the kek template", errKEKName, topic, len(tp.kek), datakey.MaxNameLen)
		}
	}
	p.mu.Lock()
	if len(p.m) >= p.max {
		clear(p.m)
	}
	p.m[topic] = tp
	p.mu.Unlock()
	return tp
}
