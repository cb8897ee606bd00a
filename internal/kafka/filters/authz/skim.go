package authz

import (
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// PassRequest implements filter.RequestSkimmer for the hot path: a Produce
// without a transactional id, or a Fetch, whose every topic the principal
// may use goes to the broker unread, as bytes. A Produce to one topic takes
// a look at its first bytes; one to several topics, the whole frame (when
// it is at hand: up to 64 KiB), its records skipped. Anything else (a
// transactional id, a refusal, a follower's fetch, a topic ID that does not
// resolve, a large multi-topic Produce) is decoded and checked by
// OnRequest, which also logs and answers refusals.
//
// A transactional batch without a transactional id needs no look here:
// the broker refuses it whoever sends it, as this filter's own check does.
func (f *Filter) PassRequest(c *filter.Context, h filter.Header, body []byte, whole bool) bool {
	switch h.Key {
	case wire.KeyProduce:
		if h.Version > handlers[wire.KeyProduce].maxVersion {
			return false
		}
		d := f.connDecisions(c, c.Principal())
		p, ok := wire.SkimProduce(body, h.Version)
		if !ok || p.Transactional {
			return false
		}
		if p.Topics == 1 {
			// The first bytes say it all: no need to have the records.
			if !f.allows(c, d, h.Version >= 13, p.Name, p.ID, opWrite) {
				return false
			}
			countDecisions(c.VirtualCluster, 1, 0)
			return true
		}
		if !whole {
			return false // several topics, some past the bytes at hand
		}
		allowed, refused := 0, false
		if _, ok := wire.SkimProduceTopics(body, h.Version, func(name []byte, id [16]byte) bool {
			if !f.allows(c, d, h.Version >= 13, name, id, opWrite) {
				refused = true
				return false
			}
			allowed++
			return true
		}); !ok || refused || allowed == 0 {
			return false
		}
		countDecisions(c.VirtualCluster, allowed, 0)
		return true
	case wire.KeyFetch:
		if !whole || h.Version > handlers[wire.KeyFetch].maxVersion {
			return false
		}
		d := f.connDecisions(c, c.Principal())
		allowed, refused := 0, false
		follower, ok := wire.SkimFetch(body, h.Version, func(t wire.FetchTopic) bool {
			if !f.allows(c, d, h.Version >= 13, t.Name, t.ID, opRead) {
				refused = true
				return false
			}
			allowed++
			return true
		})
		if !ok || follower || refused {
			return false
		}
		countDecisions(c.VirtualCluster, allowed, 0)
		return true
	}
	return false
}

// allows reports whether the connection's principal may do op on a topic
// named by name, or by id when byID. It answers from the connection's
// decisions, then the engine's; it never logs (a refusal is logged when
// OnRequest takes the request).
func (f *Filter) allows(c *filter.Context, d *connDecisions, byID bool, name []byte, id [16]byte, op operation) bool {
	if byID {
		n, err := c.TopicName(id)
		if err != nil {
			return false
		}
		return d.decide(resTopic, n, op)
	}
	// The lookup with string(name) in the key does not copy name.
	if v, ok := d.m[connKey{name: string(name), res: resTopic, op: op}]; ok {
		return v
	}
	return d.decide(resTopic, string(name), op)
}
