// Package authz is the authorization filter: it checks every request that
// names a resource (a topic, a group, a transactional id, the cluster)
// against ACL-like rules for the connection's principal, and answers what
// the rules refuse as a Kafka broker with ACLs does: per topic, partition
// or group where the API has room for it (the allowed part still goes to
// the broker, and the refusals are merged into its answer), or the whole
// request with the API's error otherwise. Lists the broker returns
// (Metadata of all topics, ListGroups, ListTransactions) are cut to what
// the principal may describe, and authorized_operations fields reflect the
// rules. docs/security.md describes the rules and each API's checks.
//
// It fails closed: what no rule allows is refused, a client that has not
// authenticated is anonymous and gets only what rules grant "anonymous",
// API keys the filter does not know are refused unless the config lists
// them, and versions newer than it was written for are refused.
//
// It imports the filter API, kafka/wire and kafka/topicsel; never the
// proxy, the CLI or the config package.
package authz

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// TypeName is the filter's `type:` in a virtual cluster's filter list.
const TypeName = "authorization"

// Filter is the authorization filter. One value serves every connection
// of a virtual cluster; it is safe for concurrent use.
//
// It is a prometheus.Collector of its metrics, which every authorization
// filter of the process shares (labelled by virtual cluster).
type Filter struct {
	// engine holds the rules; Reload swaps it for a new config's.
	engine       atomic.Pointer[engine]
	allowUnknown [wire.MaxKeys]bool

	// refused holds the partitions taken out of Produce and Fetch
	// requests, to be added to the broker's answers; fixups what to do to
	// the answers of every other key. Kept apart so that a Metadata
	// request in flight does not take Produce and Fetch responses off the
	// byte-copy path.
	refused filter.PerRequest[filter.Refused]
	fixups  filter.PerRequest[fixup]
}

// fixup changes the broker's answer to a request the filter changed: it
// adds the entries the filter refused, or removes what the principal may
// not see.
type fixup func(resp kmsg.Response)

// New returns the filter for cfg.
func New(cfg Config) (*Filter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	size := cfg.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	f := &Filter{}
	f.engine.Store(newEngine(compile(cfg.Rules), size))
	for _, name := range cfg.AllowUnknownKeys {
		k, _ := parseKey(name) // checked by Validate
		f.allowUnknown[k] = true
	}
	return f, nil
}

// Name implements filter.Filter.
func (*Filter) Name() string { return TypeName }

// Interest implements filter.Filter: every version of every key but those
// always allowed and those the config lets through unchecked, and the
// responses of the keys whose answers the filter may change.
func (f *Filter) Interest() filter.Interest {
	var in filter.Interest
	for k := int16(0); k < wire.MaxKeys; k++ {
		if !wire.KnownKey(k) || alwaysAllowed(k) || f.allowUnknown[k] {
			continue
		}
		in.Requests = append(in.Requests, filter.KeyRange{Key: k})
		if handlers[k].check != nil {
			in.Responses = append(in.Responses, filter.KeyRange{Key: k})
		}
	}
	return in
}

// WantsResponse implements filter.ResponseSkimmer: a response needs
// decoding only when the filter changed its request, or must cut its
// answer; while nothing waits, responses go to the client as bytes.
func (f *Filter) WantsResponse(key, _ int16, _ []byte) bool {
	if key == wire.KeyProduce || key == wire.KeyFetch {
		return f.refused.Len() > 0
	}
	return f.fixups.Len() > 0
}

// OnRequest implements filter.RequestHandler.
func (f *Filter) OnRequest(c *filter.Context, req *filter.Request) error {
	key, version := req.Header.Key, req.Header.Version
	h, ok := handlers[key]
	if !ok {
		return f.refuseUnknown(c, req)
	}
	if version > h.maxVersion {
		c.Logger().Warn("authorization: refused a request version newer than the filter checks",
			"api", wire.KeyName(key), "version", version, "newest", h.maxVersion)
		return respondAll(req, h, kerr.UnsupportedVersion.Code)
	}
	if key == wire.KeyProduce || key == wire.KeyFetch {
		return f.onRecords(c, req)
	}
	a := f.newCall(c, req)
	err := h.check(&a)
	countDecisions(c.VirtualCluster, a.allowed, a.denied)
	return err
}

// onRecords checks Produce and Fetch, the hot path, with direct calls, so
// that the call stays on the stack: checking them allocates nothing.
func (f *Filter) onRecords(c *filter.Context, req *filter.Request) error {
	a := f.newCall(c, req)
	var err error
	if req.Header.Key == wire.KeyProduce {
		err = checkProduce(&a)
	} else {
		err = checkFetch(&a)
	}
	countDecisions(c.VirtualCluster, a.allowed, a.denied)
	return err
}

func (f *Filter) newCall(c *filter.Context, req *filter.Request) call {
	principal := c.Principal()
	d := f.connDecisions(c, principal)
	return call{f: f, c: c, req: req, principal: principal, seen: d, eng: d.eng}
}

// OnResponse implements filter.ResponseHandler.
func (f *Filter) OnResponse(c *filter.Context, resp *filter.Response) error {
	corr := resp.Header.CorrelationID
	switch r := resp.Body.(type) {
	case *kmsg.ProduceResponse:
		if refused := f.refused.Take(c, corr); len(refused) > 0 {
			filter.AddProduceRefused(r, refused)
			return nil
		}
	case *kmsg.FetchResponse:
		if refused := f.refused.Take(c, corr); len(refused) > 0 {
			filter.AddFetchRefused(r, refused)
			return nil
		}
	default:
		if fxs := f.fixups.Take(c, corr); len(fxs) > 0 {
			for _, fx := range fxs {
				fx(resp.Body)
			}
			return nil
		}
	}
	// Decoded only because another request had something to fix: the
	// broker's bytes go on as they came.
	resp.Unchanged()
	return nil
}

// respondAll answers the whole request with code, as h's API writes an
// error for every resource it names.
func respondAll(req *filter.Request, h handler, code int16) error {
	resp, err := h.refuse(req.Body, code)
	if err != nil {
		return err
	}
	req.Respond(resp)
	return nil
}

// call is one request being checked.
type call struct {
	f         *Filter
	c         *filter.Context
	req       *filter.Request
	principal string
	// seen is the connection's own decisions, taken under eng's rules.
	seen *connDecisions
	eng  *engine
	// allowed and denied count the decisions, for the metrics.
	allowed, denied int
}

// decide is the engine's decision, from the connection's own decisions
// when it has taken it before.
func (a *call) decide(res resourceType, name string, op operation) bool {
	return a.seen.decide(res, name, op)
}

// decide is the decision for d's principal under d's rules, remembered.
func (d *connDecisions) decide(res resourceType, name string, op operation) bool {
	k := connKey{name: name, res: res, op: op}
	if v, ok := d.m[k]; ok {
		return v
	}
	v := d.eng.allowed(d.principal, res, name, op)
	d.put(k, v)
	return v
}

// may reports whether the principal may do op on the named resource, and
// logs a refusal.
func (a *call) may(res resourceType, name string, op operation) bool {
	if a.decide(res, name, op) {
		a.allowed++
		return true
	}
	a.denied++
	a.logDenied(res, name, op)
	return false
}

// quietly is may for filtering a list the broker returned: what the
// principal may not see is left out, which is neither logged nor counted.
func (a *call) quietly(res resourceType, name string, op operation) bool {
	return a.decide(res, name, op)
}

// mayCluster reports whether the principal may do op on the cluster.
func (a *call) mayCluster(op operation) bool { return a.may(resCluster, clusterName, op) }

// mayCreateTopic reports whether the principal may create the topic: with
// CREATE on the cluster or on the topic, as in Kafka.
func (a *call) mayCreateTopic(name string) bool {
	return a.quietly(resCluster, clusterName, opCreate) || a.may(resTopic, name, opCreate)
}

// logDenied writes one line per refusal. The connection's logger names
// the client and the gateway's throttle folds repeats from one client, so
// a client retrying a refused request costs a line per interval.
func (a *call) logDenied(res resourceType, name string, op operation) {
	l := a.c.Logger()
	if !l.Enabled(a.c.Context(), slog.LevelWarn) {
		return
	}
	l.Warn("authorization denied",
		"principal", a.principal, "authenticated", a.principal != "",
		"api", wire.KeyName(a.req.Header.Key), "resource", res.String(), "name", name, "operation", op.String())
}

// connDecisions are the decisions one connection took, for its principal:
// a connection asks about the same few topics in every request, and
// looking them up here takes no lock, and does not hash the principal.
// Only the connection's request goroutine uses them.
type connDecisions struct {
	principal string
	eng       *engine // the rules they were taken under
	m         map[connKey]bool
}

type connKey struct {
	name string
	res  resourceType
	op   operation
}

// maxConnDecisions bounds a connection's decisions; past it they are
// forgotten and taken again from the engine's shared cache. A client
// naming ever new resources thus costs each connection a small map.
const maxConnDecisions = 256

func (d *connDecisions) put(k connKey, allowed bool) {
	if len(d.m) >= maxConnDecisions {
		clear(d.m)
	}
	d.m[k] = allowed
}

// connDecisionsKey is where a filter keeps a connection's decisions in its
// Context: one per filter, so two authorization filters in one chain keep
// theirs apart.
type connDecisionsKey struct{ f *Filter }

// connDecisions returns the connection's decisions for principal under
// the current rules; a new principal (re-authentication as someone else)
// or new rules (a reload) start them afresh.
func (f *Filter) connDecisions(c *filter.Context, principal string) *connDecisions {
	key := connDecisionsKey{f}
	eng := f.engine.Load()
	d, _ := c.Value(key).(*connDecisions)
	if d == nil || d.principal != principal || d.eng != eng {
		d = &connDecisions{principal: principal, eng: eng, m: make(map[connKey]bool)}
		c.SetValue(key, d)
	}
	return d
}

// PrepareReload implements filter.Reloader: the rules of newer (the
// filter a new config builds) decide every request from the reload on, on
// every connection, none closed. Requests in flight finish under the rules
// that let them through. allow_unknown_keys cannot change this way: it
// decides which API keys the filter sees, fixed when the virtual cluster
// starts.
func (f *Filter) PrepareReload(newer filter.Filter) (func(), error) {
	n, ok := newer.(*Filter)
	if !ok {
		return nil, fmt.Errorf("authorization: cannot take the settings of a %s filter", newer.Name())
	}
	if n.allowUnknown != f.allowUnknown {
		return nil, errors.New("allow_unknown_keys changed: it decides which API keys the filter sees, fixed when the virtual cluster starts; restart Strait to apply it")
	}
	return func() { f.engine.Store(n.engine.Load()) }, nil
}

// respond answers the request in the filter's place.
func (a *call) respond(resp kmsg.Response) { a.req.Respond(resp) }

// later keeps fx for the broker's answer to this request.
func (a *call) later(fx fixup) {
	a.f.fixups.Add(a.c, a.req.Header.CorrelationID, fx)
}

// topicName is the name of a request's topic: name itself before version
// idsFrom, the name topic ID id resolves to from it. A topic ID that does
// not resolve gets UNKNOWN_TOPIC_ID: the filter cannot check what it
// cannot name, and never passes it.
func (a *call) topicName(version, idsFrom int16, name string, id [16]byte) (string, int16) {
	if version < idsFrom {
		return name, 0
	}
	n, err := a.c.TopicName(id)
	if err != nil {
		a.c.Logger().Debug("authorization: refused a topic ID that does not resolve", "api", wire.KeyName(a.req.Header.Key), "err", err)
		return "", kerr.UnknownTopicID.Code
	}
	return n, 0
}

// errWrongBody is a request body of another type than its key says: the
// proxy decodes by key, so it is a bug, and the connection ends.
func errWrongBody(key int16, body kmsg.Request) error {
	return fmt.Errorf("authorization: %s request decoded as %T", wire.KeyName(key), body)
}

// deniedMessage is the error message of a refused resource, where the
// API carries one.
func deniedMessage(op operation, res resourceType) string {
	return "not authorized to " + op.String() + " this " + res.String()
}

var (
	_ filter.RequestHandler  = (*Filter)(nil)
	_ filter.ResponseHandler = (*Filter)(nil)
	_ filter.ResponseSkimmer = (*Filter)(nil)
)
var _ filter.Reloader = (*Filter)(nil)
