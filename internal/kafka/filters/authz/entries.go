package authz

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Most APIs that name several resources (topics, groups, config resources,
// coordinator keys) are checked one entry at a time: the entries the
// principal may use go on to the broker, and the refused ones are
// answered in the filter's place, in the API's own error entries. The
// helpers here are that walk, for entries of any kmsg type.

// splitRefused keeps at the front of entries, in order, those code allows
// (code 0), and returns them with the error entries of the others, made by
// refusal from the entry and its code. It reuses entries' array: the
// request is the filter's to change.
func splitRefused[E, R any](entries []E, code func(E) int16, refusal func(E, int16) R) ([]E, []R) {
	var refused []R
	n := 0
	for _, e := range entries {
		if c := code(e); c != 0 {
			refused = append(refused, refusal(e, c))
			continue
		}
		entries[n] = e
		n++
	}
	return entries[:n], refused
}

// answerRefused lets the request through as it came when nothing was
// refused; answers it in the broker's place, with the refused entries
// only, when no entry is left for the broker; and otherwise adds the
// refused entries to the broker's answer. newResp makes the API's
// response, and list is where its entries are.
func answerRefused[P kmsg.Response, R any](a *call, left int, refused []R, newResp func() P, list func(P) *[]R) error {
	switch {
	case len(refused) == 0:
		a.req.Unchanged()
	case left == 0:
		resp := newResp()
		*list(resp) = refused
		a.respond(resp)
	default:
		a.later(func(resp kmsg.Response) {
			if r, ok := resp.(P); ok {
				l := list(r)
				*l = append(*l, refused...)
			}
		})
	}
	return nil
}

// refusals is the error entry of every entry, with code: the answer to a
// request refused whole.
func refusals[E, R any](entries []E, code int16, refusal func(E, int16) R) []R {
	var refused []R
	for _, e := range entries {
		refused = append(refused, refusal(e, code))
	}
	return refused
}

// topicCode is TOPIC_AUTHORIZATION_FAILED unless the principal may do op
// on the topic, 0 if it may.
func (a *call) topicCode(name string, op operation) int16 {
	if a.may(resTopic, name, op) {
		return 0
	}
	return kerr.TopicAuthorizationFailed.Code
}

// topicIDCode is topicCode for a topic named, from version idsFrom, by
// ID: one that does not resolve is UNKNOWN_TOPIC_ID (see topicName).
func (a *call) topicIDCode(version, idsFrom int16, name string, id [16]byte, op operation) int16 {
	name, code := a.topicName(version, idsFrom, name, id)
	if code != 0 {
		return code
	}
	return a.topicCode(name, op)
}

// groupCode is GROUP_AUTHORIZATION_FAILED unless the principal may do op
// on the group, 0 if it may.
func (a *call) groupCode(name string, op operation) int16 {
	if a.may(resGroup, name, op) {
		return 0
	}
	return kerr.GroupAuthorizationFailed.Code
}
