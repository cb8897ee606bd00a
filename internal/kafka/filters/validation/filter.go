// Package validation is the record-validation filter: it checks the records
// of produce requests against per-topic rules — JSON syntax, a schema from
// a registry or the config (Avro, Protobuf, JSON Schema, in the Confluent
// wire format), nulls, empty payloads and sizes — and refuses a partition
// whose batch holds an invalid record, as a broker refuses one, so that bad
// data never reaches the topic. In warn mode it forwards such batches and
// counts and logs them instead. docs/validation.md describes the rules and
// every outcome.
//
// It never forwards a batch it could not check under a rule in reject
// mode: a registry that cannot answer gets the producer a retriable error.
// Valid batches go upstream exactly as the producer sent them.
//
// It imports the filter API, kafka/wire, kafka/recordbatch and the schema
// layer; never the proxy, the CLI or the config package.
package validation

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/schema"
)

// maxProduceVersion is the newest Produce this filter was written for; a
// newer one could lay out topics or records differently, and is refused
// rather than passed unchecked.
const maxProduceVersion = 13

// Filter is the record-validation filter. One value serves every connection
// of a virtual cluster; it is safe for concurrent use.
//
// It is a prometheus.Collector of its metrics, which every
// record-validation filter of the process shares (labelled by virtual
// cluster): registering a second filter reports that its collector is
// already registered, which the caller may ignore.
type Filter struct {
	rules         *ruleCache
	reg           *schema.Registry // nil when no rule checks schemas
	codecs        *recordbatch.Codecs
	lookupTimeout time.Duration

	// pending counts the error entries waiting, on all connections, to be
	// added to Produce responses; while there are none, Produce responses
	// stay on the byte-copy path.
	pending filter.PerRequest[filter.Refused]
}

// New returns the filter for cfg. It reads schema files and compiles the
// schemas written in the config now, so that a broken one is an error at
// start; it does not contact the registry.
func New(cfg Config) (*Filter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rules, needSchemas := compileRules(cfg.Rules)
	f := &Filter{
		rules:         &ruleCache{rules: rules, m: map[string]*rule{}},
		codecs:        cfg.Limits.Codecs(),
		lookupTimeout: cfg.LookupTimeout,
	}
	if f.lookupTimeout == 0 {
		f.lookupTimeout = DefaultLookupTimeout
	}
	if needSchemas || cfg.Registry != nil || len(cfg.Schemas) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reg, err := schema.Open(ctx, cfg.Config)
		if err != nil {
			return nil, err
		}
		f.reg = reg
	}
	return f, nil
}

// Name implements filter.Filter.
func (*Filter) Name() string { return TypeName }

// Interest implements filter.Filter: every version of Produce requests, and
// their responses, to which it adds the partitions it refused.
func (*Filter) Interest() filter.Interest {
	return filter.Interest{
		Requests:  filter.Keys(wire.KeyProduce),
		Responses: filter.Keys(wire.KeyProduce),
	}
}

// WantsResponse implements filter.ResponseSkimmer: a Produce response needs
// decoding only when a partition was taken out of its request, which is
// rare.
func (f *Filter) WantsResponse(int16, int16, []byte) bool { return f.pending.Len() > 0 }

// OnRequest implements filter.RequestHandler.
func (f *Filter) OnRequest(c *filter.Context, req *filter.Request) error {
	if r, ok := req.Body.(*kmsg.ProduceRequest); ok {
		f.onProduce(c, req, r)
	}
	return nil
}

// OnResponse implements filter.ResponseHandler.
func (f *Filter) OnResponse(c *filter.Context, resp *filter.Response) error {
	if r, ok := resp.Body.(*kmsg.ProduceResponse); ok {
		if fs := f.pending.Take(c, resp.Header.CorrelationID); len(fs) > 0 {
			filter.AddProduceRefused(r, fs)
		} else {
			// Decoded only because another request, perhaps on
			// another connection, had a partition refused: the
			// broker's bytes go on as they came.
			resp.Unchanged()
		}
	}
	return nil
}

// errVersion is a Produce version newer than this filter reads.
var errVersion = errors.New("request version not supported by the record-validation filter")

var (
	_ filter.RequestHandler  = (*Filter)(nil)
	_ filter.ResponseHandler = (*Filter)(nil)
	_ filter.ResponseSkimmer = (*Filter)(nil)
)
