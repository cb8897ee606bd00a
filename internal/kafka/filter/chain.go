package filter

import (
	"fmt"
	"runtime/debug"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// MaxFilters is how many filters one chain can hold (masks are 64 bits).
const MaxFilters = 64

// Mask is a set of chain positions.
type Mask uint64

// Chain is an ordered list of filters folded, once, into per-key, per-version
// subscription masks, so the proxy decides whether to decode a frame with
// one table lookup.
type Chain struct {
	filters []Filter
	req     [wire.MaxKeys][]Mask
	resp    [wire.MaxKeys][]Mask
	// skimmers marks the filters that are RequestSkimmers.
	skimmers Mask
}

// NewChain folds filters into a chain. Request handlers run in the order
// given, response handlers in reverse.
func NewChain(filters ...Filter) (*Chain, error) {
	if len(filters) > MaxFilters {
		return nil, fmt.Errorf("a chain holds at most %d filters, got %d", MaxFilters, len(filters))
	}
	c := &Chain{filters: filters}
	for k := int16(0); k < wire.MaxKeys; k++ {
		if !wire.KnownKey(k) {
			continue
		}
		// One slot past Strait's newest version: it stands for every
		// newer version (see RequestMask).
		n := int(wire.MaxVersion(k)) + 2
		c.req[k] = make([]Mask, n)
		c.resp[k] = make([]Mask, n)
	}
	for i, f := range filters {
		in := f.Interest()
		_, isReq := f.(RequestHandler)
		_, isResp := f.(ResponseHandler)
		if len(in.Requests) > 0 && !isReq {
			return nil, fmt.Errorf("filter %s subscribes to requests but has no OnRequest", f.Name())
		}
		if len(in.Responses) > 0 && !isResp {
			return nil, fmt.Errorf("filter %s subscribes to responses but has no OnResponse", f.Name())
		}
		mark(&c.req, in.Requests, i)
		mark(&c.resp, in.Responses, i)
		if _, ok := f.(RequestSkimmer); ok {
			c.skimmers |= 1 << i
		}
	}
	return c, nil
}

func mark(t *[wire.MaxKeys][]Mask, ranges []KeyRange, i int) {
	for _, r := range ranges {
		if r.Key < 0 || r.Key >= wire.MaxKeys {
			continue
		}
		for v := range t[r.Key] {
			if r.Contains(r.Key, int16(v)) {
				t[r.Key][v] |= 1 << i
			}
		}
	}
}

func lookup(t *[wire.MaxKeys][]Mask, key, version int16) Mask {
	if key < 0 || key >= wire.MaxKeys || version < 0 {
		return 0
	}
	vs := t[key]
	if len(vs) == 0 {
		return 0
	}
	if int(version) >= len(vs) {
		version = int16(len(vs) - 1)
	}
	return vs[version]
}

// RequestMask returns the filters that want requests of key at version.
// Versions newer than Strait knows share one slot, so a filter can claim
// them (the ApiVersions filter does, to answer KIP-511 style).
func (c *Chain) RequestMask(key, version int16) Mask { return lookup(&c.req, key, version) }

// ResponseMask returns the filters that want responses of key at version.
func (c *Chain) ResponseMask(key, version int16) Mask { return lookup(&c.resp, key, version) }

// Len returns the number of filters.
func (c *Chain) Len() int { return len(c.filters) }

// OnRequest runs the request handlers in mask, in order. It returns the
// chain position of the filter that answered the request, or Len() if none
// did. A filter that panics is reported as an error: it ends its
// connection, not the gateway.
func (c *Chain) OnRequest(ctx *Context, m Mask, req *Request) (int, error) {
	for i, f := range c.filters {
		if m&(1<<i) == 0 {
			continue
		}
		req.unchanged = false
		if err := safeRequest(f, ctx, req); err != nil {
			return i, fmt.Errorf("filter %s: %w", f.Name(), err)
		}
		req.handled = true
		req.changed = req.changed || !req.unchanged
		if req.response != nil {
			return i, nil
		}
	}
	return len(c.filters), nil
}

// OnResponse runs the response handlers in mask at positions below upTo, in
// reverse order.
func (c *Chain) OnResponse(ctx *Context, m Mask, upTo int, resp *Response) error {
	for i := min(upTo, len(c.filters)) - 1; i >= 0; i-- {
		if m&(1<<i) == 0 {
			continue
		}
		f := c.filters[i]
		resp.unchanged = false
		if err := safeResponse(f, ctx, resp); err != nil {
			return fmt.Errorf("filter %s: %w", f.Name(), err)
		}
		resp.handled = true
		resp.changed = resp.changed || !resp.unchanged
	}
	return nil
}

// Skims reports whether every filter in mask is a RequestSkimmer, so that
// PassRequest may be asked.
func (c *Chain) Skims(m Mask) bool { return m != 0 && m&^c.skimmers == 0 }

// PassRequest asks the filters in mask whether they let the request go on
// unread; false as soon as one wants it decoded. A panicking skimmer
// counts as wanting it: the request is then decoded, and the filter's
// OnRequest has its say.
func (c *Chain) PassRequest(ctx *Context, m Mask, h Header, body []byte, whole bool) bool {
	if !c.Skims(m) {
		return false
	}
	for i := range c.filters {
		if m&(1<<i) != 0 && !safePass(c.filters[i].(RequestSkimmer), ctx, h, body, whole) {
			return false
		}
	}
	return true
}

func safePass(s RequestSkimmer, ctx *Context, h Header, body []byte, whole bool) (pass bool) {
	defer func() {
		if recover() != nil {
			pass = false
		}
	}()
	return s.PassRequest(ctx, h, body, whole)
}

// WantsResponse asks the skimming filters in mask whether they need the
// response decoded; filters without a skimmer always do.
func (c *Chain) WantsResponse(m Mask, upTo int, key, version int16, body []byte) bool {
	for i := 0; i < min(upTo, len(c.filters)); i++ {
		if m&(1<<i) == 0 {
			continue
		}
		s, ok := c.filters[i].(ResponseSkimmer)
		if !ok || s.WantsResponse(key, version, body) {
			return true
		}
	}
	return false
}

// Below returns the positions of m that are below upTo.
func (m Mask) Below(upTo int) Mask {
	if upTo >= 64 {
		return m
	}
	return m & (1<<upTo - 1)
}

// PanicError is a filter's panic, turned into an error.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

func safeRequest(f Filter, ctx *Context, req *Request) (err error) {
	defer recoverTo(&err)
	return f.(RequestHandler).OnRequest(ctx, req)
}

func safeResponse(f Filter, ctx *Context, resp *Response) (err error) {
	defer recoverTo(&err)
	return f.(ResponseHandler).OnResponse(ctx, resp)
}

func recoverTo(err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Value: r, Stack: debug.Stack()}
	}
}
