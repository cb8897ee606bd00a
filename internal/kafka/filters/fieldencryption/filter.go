// Package fieldencryption is the field-encryption filter: it encrypts chosen
// fields of the JSON, Avro and Protobuf records of selected topics on their
// way to the broker, in place, and restores them on their way back, so the
// broker holds records whose other fields stay readable (for routing,
// indexing, analytics) while the sensitive ones are ciphertext.
//
// A field is encrypted in place and the record stays valid for its schema:
// a string field holds its envelope as base64url text, a bytes field the
// raw envelope. JSON is edited by splicing bytes, never re-serialized, so
// a consumer reading through the gateway gets each record back byte for
// byte. Keys come from a KMS, as for record encryption (envelope
// encryption with per-instance DEKs, internal/kms/datakey); the KEK and
// DEK travel once per record, in a marker header. docs/field-encryption.md
// describes the config, the envelope and every outcome.
//
// The filter fails closed: a record in which a configured field cannot be
// found or encrypted is refused, never forwarded in clear; a fetched value
// that does not decrypt fails its partition.
//
// It imports the filter API, kafka/wire, kafka/recordbatch, the schema
// layer and the KMS; never the proxy, the CLI or the config package.
package fieldencryption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/topicsel"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/datakey"
	"github.com/straitgw/strait/internal/schema"
)

// TypeName is the filter's `type:` in a virtual cluster's filter list.
const TypeName = "field-encryption"

// The newest versions this filter was written for; newer ones are refused
// for selected topics rather than passed unread.
const (
	maxProduceVersion    = 13
	maxFetchVersion      = 18
	maxShareFetchVersion = 2
	// Fetch before v4 makes a broker down-convert to the legacy format,
	// which drops headers, and with them the marker.
	minFetchVersion = 4
)

// Filter is the field-encryption filter. One value serves every connection
// of a virtual cluster; it is safe for concurrent use.
type Filter struct {
	rules       []*compiledRule
	reg         *schema.Registry // nil when no rule reads schemas
	codecs      *recordbatch.Codecs
	bind        bool
	markerFlags byte
	lookup      time.Duration

	ring *datakey.Ring
	// maxValues is dek.max_records: the most values one record may hold
	// under one KEK, all sealed under one DEK.
	maxValues uint64
	opens     *datakey.Openers
	det       *datakey.Deterministic

	topicsMu sync.RWMutex
	topics   map[string]*topicPolicy

	pending filter.PerRequest[filter.Refused]
}

// compiledRule is a rule ready to apply.
type compiledRule struct {
	sel *topicsel.Selector
	// parts are the key and value parts to encrypt (nil: not encrypted);
	// open are those to decrypt from markers, never nil.
	parts      [2]*rulePart
	open       [2]*rulePart
	templates  []string // every KEK template the rule uses
	decryptAll bool
	decryptFor map[string]bool
	redact     bool
}

// detLabel is what deterministic-mode keys are derived under: a label of
// their own, so they never equal the keys record encryption derives from
// the same KEK. It must never change: values sealed under it would no
// longer open.
const detLabel = "strait/field-encryption/deterministic/v1"

// New returns the filter. k is the KMS, usually behind kms.NewCache. It
// compiles the plans of plain JSON parts and of the schemas the config
// lists, so a field that does not fit them is an error now; it does not
// contact the registry.
func New(cfg Config, k kms.KMS) (*Filter, error) {
	if k == nil {
		return nil, errors.New("field-encryption: no KMS")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &Filter{
		codecs: cfg.Limits.Codecs(),
		bind:   *cfg.BindTopic,
		lookup: cfg.LookupTimeout,
		topics: map[string]*topicPolicy{},
	}
	if f.bind {
		f.markerFlags |= flagTopic
	}
	f.maxValues = cfg.DEK.MaxRecords
	f.opens = datakey.NewOpeners(k, cfg.KMSTimeout)
	f.ring = datakey.NewRing(datakey.RingOptions{
		KMS: k, MaxRecords: cfg.DEK.MaxRecords, MaxAge: cfg.DEK.MaxAge, Timeout: cfg.KMSTimeout,
		// The instance that made a DEK opens its own values without
		// asking the KMS to unwrap it.
		OnNew: f.opens.Add,
	})
	f.det = datakey.NewDeterministic(datakey.DeterministicOptions{
		KMS: k, Timeout: cfg.KMSTimeout, Label: detLabel,
	})
	needSchemas := cfg.Registry != nil || len(cfg.Schemas) > 0
	if needSchemas {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reg, err := schema.Open(ctx, cfg.Config)
		if err != nil {
			return nil, err
		}
		f.reg = reg
		// Open compiled the config's schemas in a registry of their
		// own: look them up in this one, from the config (never the
		// registry), so that compileRule finds them cached.
		for _, sc := range cfg.Schemas {
			if sc.ID == 0 {
				continue
			}
			if _, err := reg.SchemaByID(ctx, sc.ID); err != nil {
				return nil, fmt.Errorf("schemas: id %d: %w", sc.ID, err)
			}
		}
	}
	var errs []error
	for i := range cfg.Rules {
		r, err := f.compileRule(&cfg, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.rules = append(f.rules, r)
	}
	if len(errs) == 0 {
		errs = f.checkSchemas(&cfg)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

// checkSchemas compiles, at start, the rules against the schemas written in
// the config, so that a field a schema lacks, or that cannot hold
// ciphertext, is a config error rather than a refused record. A schema
// placed under a subject (<topic>-value, <topic>-key) is checked against
// the part of every rule that selects that topic; a schema under no
// subject, or another one, must fit at least one rule part of its format:
// one a config lists for no rule at all would be a mistake. Protobuf
// schemas are checked for their first message.
func (f *Filter) checkSchemas(cfg *Config) []error {
	var errs []error
	for _, sc := range cfg.Schemas {
		s, ok := f.reg.Cached(sc.ID)
		if !ok || sc.ID == 0 || s.Format == schema.JSON {
			continue
		}
		topic, bySubject := strings.CutSuffix(sc.Subject, "-value")
		isKey := false
		if !bySubject {
			topic, isKey = strings.CutSuffix(sc.Subject, "-key")
			bySubject = isKey
		}
		var fails []error
		fits := false
		for i, r := range f.rules {
			for pi, rp := range r.parts {
				if rp == nil || rp.allows(s.Format) != nil {
					continue
				}
				if bySubject && (isKey != (pi == partKey) || !r.sel.Match(topic)) {
					continue
				}
				err := buildPlan(rp.cfg, rp.ruleKEK, s, []int{0}).err
				if err == nil {
					fits = true
					continue
				}
				fails = append(fails, fmt.Errorf("rules[%d].%s: schema id %d: %w", i, [2]string{"key", "value"}[pi], sc.ID, err))
			}
		}
		if bySubject || !fits {
			errs = append(errs, fails...)
		}
	}
	return errs
}

func (f *Filter) compileRule(cfg *Config, i int) (*compiledRule, error) {
	r := &cfg.Rules[i]
	cr := &compiledRule{sel: topicsel.New(r.Topics), decryptFor: map[string]bool{}, redact: r.Fetch.Others == othersRedact}
	if len(r.Fetch.DecryptFor) == 0 || slices.Contains(r.Fetch.DecryptFor, anyPrincipal) {
		cr.decryptAll = true
	}
	for _, p := range r.Fetch.DecryptFor {
		cr.decryptFor[p] = true
	}
	if r.KEK != "" {
		cr.templates = append(cr.templates, r.KEK)
	}
	var errs []error
	for pi, part := range []*Part{r.Key, r.Value} {
		name := [2]string{"key", "value"}[pi]
		if part == nil {
			cr.open[pi] = &rulePart{cfg: &Part{}}
			continue
		}
		rp := &rulePart{cfg: part, ruleKEK: r.KEK, format: part.Format}
		for _, fl := range part.Fields {
			if fl.KEK != "" && !slices.Contains(cr.templates, fl.KEK) {
				cr.templates = append(cr.templates, fl.KEK)
			}
		}
		if part.Format == formatJSON {
			rp.json = buildPlan(part, r.KEK, nil, nil)
			if rp.json.err != nil {
				errs = append(errs, fmt.Errorf("rules[%d].%s: %w", i, name, rp.json.err))
			}
		}
		cr.parts[pi], cr.open[pi] = rp, rp
	}
	return cr, errors.Join(errs...)
}

// Name implements filter.Filter.
func (*Filter) Name() string { return TypeName }

// Interest implements filter.Filter: every Produce request, the Fetch and
// ShareFetch requests it must refuse, and every Produce, Fetch and
// ShareFetch response.
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

// WantsResponse implements filter.ResponseSkimmer: a Produce response needs
// decoding only to add the partitions this filter refused.
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
		resp := kmsg.NewPtrShareFetchResponse()
		resp.ErrorCode = fetchCode(errVersion).Code
		msg := describe(fmt.Errorf("%w: ShareFetch v%d (this filter reads up to v%d)", errVersion, r.Version, maxShareFetchVersion))
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
			resp.Unchanged()
		}
	case *kmsg.FetchResponse:
		if !f.onFetchResponse(c, resp.Header.CorrelationID, r) {
			resp.Unchanged()
		}
	case *kmsg.ShareFetchResponse:
		if !f.onShareFetchResponse(c, r) {
			resp.Unchanged()
		}
	}
	return nil
}

// topicPolicy is what the filter does with one topic: its rule, and the
// KEK names the rule's templates give for it.
type topicPolicy struct {
	rule *compiledRule // nil: the topic is not touched
	keks map[string]*kekName
}

type kekName struct {
	name  string
	bytes []byte
	err   error
}

// kek returns the KEK name a template gives for the topic.
func (p *topicPolicy) kek(template string) (*kekName, error) {
	k, ok := p.keks[template]
	if !ok {
		return nil, fmt.Errorf("%w: KEK template %q", errKEKName, template)
	}
	if k.err != nil {
		return nil, k.err
	}
	return k, nil
}

// maxTopics bounds the policy cache: topic names come from clients.
const maxTopics = 8192

// policy returns the topic's policy.
func (f *Filter) policy(topic string) *topicPolicy {
	f.topicsMu.RLock()
	p, ok := f.topics[topic]
	f.topicsMu.RUnlock()
	if ok {
		return p
	}
	p = &topicPolicy{}
	for _, r := range f.rules {
		if r.sel.Match(topic) {
			p.rule = r
			break
		}
	}
	if p.rule != nil {
		p.keks = map[string]*kekName{}
		for _, t := range p.rule.templates {
			name, err := kekFor(t, topic)
			p.keks[t] = &kekName{name: name, bytes: []byte(name), err: err}
		}
	}
	f.topicsMu.Lock()
	if len(f.topics) >= maxTopics {
		clear(f.topics)
	}
	f.topics[topic] = p
	f.topicsMu.Unlock()
	return p
}

// outcome is what a principal gets of a rule's encrypted fields.
type outcome uint8

const (
	outDecrypt outcome = iota
	outCiphertext
	outRedact
)

func (r *compiledRule) outcome(principal string) outcome {
	switch {
	case r.decryptAll || r.decryptFor[principal]:
		return outDecrypt
	case r.redact:
		return outRedact
	}
	return outCiphertext
}

// reserve takes n IV counters in a row from a DEK of kek.
func (f *Filter) reserve(ctx context.Context, kek string, n uint64) (*datakey.DEK, uint64, error) {
	for range 4 {
		d, first, got, err := f.ring.Reserve(ctx, kek, int(n))
		if err != nil {
			return nil, 0, err
		}
		if uint64(got) == n {
			return d, first, nil
		}
		// The DEK ran out part way: the counters it gave are left
		// unused, and the next call makes a new DEK.
	}
	return nil, 0, fmt.Errorf("%w: could not reserve %d IVs in a row for KEK %q (dek.max_records too low?)", kms.ErrUnavailable, n, kek)
}

// errVersion is a request version newer than the filter reads.
var errVersion = errors.New("request version not supported by the field-encryption filter")

func describe(err error) string { return "strait field-encryption: " + err.Error() }

var (
	_ filter.RequestHandler  = (*Filter)(nil)
	_ filter.ResponseHandler = (*Filter)(nil)
	_ filter.ResponseSkimmer = (*Filter)(nil)
)
