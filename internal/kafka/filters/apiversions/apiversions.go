// Package apiversions is the built-in filter that makes a client negotiate
// only what both the broker and Strait can read. It clips the broker's
// ApiVersions answer to Strait's own ranges and drops keys Strait does not
// know, so a newer client and a newer broker can never agree on a version
// the gateway cannot parse. An ApiVersions request newer than Strait reads
// is answered here, the KIP-511 way, without reaching the broker.
package apiversions

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// Filter clips ApiVersions.
type Filter struct {
	// Limit, if set, may lower a key's maximum further (a filter that
	// cannot handle newer versions of some key uses it). It returns the
	// highest version to offer, or -1 to drop the key.
	Limit func(key, max int16) int16
	// Offer lists keys the gateway answers itself (SaslHandshake and
	// SaslAuthenticate, when it terminates SASL): each is offered at
	// exactly its range whatever the broker says, since the broker never
	// sees it (a broker without SASL does not list them, and clients
	// that need them would refuse to authenticate).
	Offer []kmsg.ApiVersionsResponseApiKey
}

// New returns the ApiVersions filter.
func New() *Filter { return &Filter{} }

// Name implements filter.Filter.
func (*Filter) Name() string { return "apiversions" }

// Interest implements filter.Filter.
func (*Filter) Interest() filter.Interest {
	return filter.Interest{
		Requests:  filter.Keys(wire.KeyApiVersions),
		Responses: filter.Keys(wire.KeyApiVersions),
	}
}

// OnRequest answers an ApiVersions request newer than Strait reads with
// version 0, UNSUPPORTED_VERSION and Strait's own range for ApiVersions: the
// client retries with a version both understand.
func (*Filter) OnRequest(c *filter.Context, req *filter.Request) error {
	max := wire.MaxVersion(wire.KeyApiVersions)
	if req.Header.Version <= max {
		return nil
	}
	c.Log.Debug("ApiVersions request newer than Strait reads; answering with its range",
		"version", req.Header.Version, "max", max)
	resp := &kmsg.ApiVersionsResponse{Version: 0, ErrorCode: kerr.UnsupportedVersion.Code}
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: wire.KeyApiVersions, MinVersion: 0, MaxVersion: max}}
	req.Respond(resp)
	return nil
}

// OnResponse clips the broker's ranges to Strait's.
func (f *Filter) OnResponse(_ *filter.Context, resp *filter.Response) error {
	r, ok := resp.Body.(*kmsg.ApiVersionsResponse)
	if !ok {
		return nil
	}
	keep := r.ApiKeys[:0]
	for _, k := range r.ApiKeys {
		if f.offered(k.ApiKey) {
			continue // replaced below
		}
		max := wire.MaxVersion(k.ApiKey)
		if max < 0 {
			continue // a key Strait cannot frame
		}
		k.MaxVersion = min(k.MaxVersion, max)
		if f.Limit != nil {
			k.MaxVersion = min(k.MaxVersion, f.Limit(k.ApiKey, k.MaxVersion))
		}
		if k.MaxVersion < k.MinVersion {
			continue
		}
		keep = append(keep, k)
	}
	r.ApiKeys = append(keep, f.Offer...)
	return nil
}

func (f *Filter) offered(key int16) bool {
	for _, o := range f.Offer {
		if o.ApiKey == key {
			return true
		}
	}
	return false
}

var (
	_ filter.RequestHandler  = (*Filter)(nil)
	_ filter.ResponseHandler = (*Filter)(nil)
)
