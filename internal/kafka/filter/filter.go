// Package filter is the API between Strait's Kafka proxy and the policies
// that act on traffic: a Filter subscribes to API keys, sees their requests
// and responses decoded, may change them, may answer a request itself, and
// may send requests of its own upstream through its Context.
//
// Filters never see connections, sockets or bytes in flight: the proxy
// decodes for them and encodes what they leave. Keys no filter subscribes to
// are never decoded. This package imports only kafka/wire and franz-go kmsg;
// it must never import the proxy.
package filter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Filter is one policy in a virtual cluster's chain. A filter value is
// shared by every connection of its virtual cluster and must be safe for
// concurrent use; per-connection state belongs in the Context.
//
// A filter implements RequestHandler, ResponseHandler or both.
type Filter interface {
	// Name identifies the filter in logs and metrics.
	Name() string
	// Interest says which requests and responses the filter sees. It is
	// read once, when the chain is built.
	Interest() Interest
}

// RequestHandler sees decoded requests of the keys it subscribed to.
type RequestHandler interface {
	// OnRequest may change req.Body in place, or answer it with
	// req.Respond. An error ends the connection: use it for faults that
	// leave the connection unusable, and answer protocol-level refusals with
	// an error-coded response instead.
	OnRequest(c *Context, req *Request) error
}

// ResponseHandler sees decoded responses of the keys it subscribed to.
type ResponseHandler interface {
	// OnResponse may change resp.Body in place. An error ends the
	// connection.
	OnResponse(c *Context, resp *Response) error
}

// ResponseSkimmer is optional for a ResponseHandler. Before decoding a
// response the filter subscribed to, the proxy offers it the raw body; if
// every subscribed filter declines, the response is forwarded as bytes.
// This lets a filter that needs one rare field (a tagged field, say) keep
// its key on the fast path.
type ResponseSkimmer interface {
	WantsResponse(key, version int16, body []byte) bool
}

// RequestSkimmer is optional for a RequestHandler. Before reading a
// request the filter subscribed to, the proxy offers it the start of the
// raw body: the bytes already at hand, up to 64 KiB, and the whole body
// when whole is set. A filter that can tell from them that it would leave
// the request as it is returns true; when every subscribed filter does,
// the request is relayed as bytes, unread and undecoded, as a key no
// filter subscribes to is. Returning false is always safe: the request is
// then decoded and OnRequest sees it. h carries no client id. body is only
// valid during the call.
//
// This keeps a filter that mostly only looks (authorization, when the
// principal may use every resource named) off the decoding path.
type RequestSkimmer interface {
	PassRequest(c *Context, h Header, body []byte, whole bool) bool
}

// Reloader is optional for a filter whose settings can change while it
// runs. When the config is reloaded, the running filter is handed the one
// the new config builds (same type, same place in the chain).
// PrepareReload checks that it can take the new settings and returns what
// makes it do so; it changes nothing itself, so that a reload applies
// either every change or none. The settings then apply to the requests
// that follow, on every connection, none closed. An error names the
// setting that cannot change while the filter runs.
type Reloader interface {
	PrepareReload(newer Filter) (apply func(), err error)
}

// KeyRange selects versions MinVersion..MaxVersion of one API key. A
// MaxVersion of zero means every version from MinVersion up.
type KeyRange struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
}

// Contains reports whether the range covers key at version.
func (r KeyRange) Contains(key, version int16) bool {
	return key == r.Key && version >= r.MinVersion && (r.MaxVersion == 0 || version <= r.MaxVersion)
}

// Keys selects every version of each key.
func Keys(keys ...int16) []KeyRange {
	rs := make([]KeyRange, len(keys))
	for i, k := range keys {
		rs[i] = KeyRange{Key: k}
	}
	return rs
}

// Interest is a filter's subscription.
type Interest struct {
	Requests  []KeyRange
	Responses []KeyRange
}

// Header is the part of a request header filters may read.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// Request is a decoded request on its way upstream.
type Request struct {
	Header Header
	// Body is the decoded request. A filter may change it in place or
	// replace it with another request of the same key and version; what
	// Body holds after the chain is what goes upstream. For an ApiVersions
	// request newer than Strait can read, Body is an empty
	// ApiVersionsRequest carrying only the version (KIP-511: the body of a
	// newer version cannot be parsed).
	Body kmsg.Request

	response kmsg.Response
	// Set by the chain and by Unchanged; see Untouched.
	handled, changed, unchanged bool
}

// Unchanged tells the proxy that the calling filter left the request
// exactly as it was decoded; when every filter that handled it says so,
// the proxy forwards the client's bytes instead of re-encoding the
// request. As for Response.Unchanged, not calling it is always safe.
func (r *Request) Unchanged() { r.unchanged = true }

// Untouched reports whether at least one filter handled the request and
// every one of them called Unchanged.
func (r *Request) Untouched() bool { return r.handled && !r.changed }

// Respond answers the request without sending it upstream. Filters after
// this one do not see the request; filters before it see the response, in
// reverse order, as they would an upstream one. The proxy encodes the
// response at the request's version, the only one the client can read,
// whatever version the filter set; the exception is an ApiVersions request
// newer than Strait reads, whose answer keeps the filter's version (v0, as
// KIP-511 asks). A Produce with acks=0 gets no response, answered or not.
func (r *Request) Respond(resp kmsg.Response) { r.response = resp }

// Response returns the answer set by Respond, if any.
func (r *Request) Response() kmsg.Response { return r.response }

// Response is a decoded response on its way to the client.
type Response struct {
	Header Header
	// Request is the decoded request this answers, when some filter
	// subscribed to the request; nil otherwise.
	Request kmsg.Request
	Body    kmsg.Response

	// Set by the chain and by Unchanged; see Untouched.
	handled, changed, unchanged bool
}

// Unchanged tells the proxy that the calling filter left the response
// exactly as it was decoded. When every filter that handled a response
// says so, the proxy forwards the broker's bytes instead of re-encoding
// the response: a filter that only had to look (the record-encryption
// filter on a fetch of unencrypted topics) costs a decode, not a copy. A
// filter that changed the response, or might have, must not call it; not
// calling it is always safe.
func (r *Response) Unchanged() { r.unchanged = true }

// Untouched reports whether at least one filter handled the response and
// every one of them called Unchanged.
func (r *Response) Untouched() bool { return r.handled && !r.changed }

// Sender sends a request of the filter's own to the target cluster and
// waits for its response. It is not the client's connection: the client's
// correlation ids and ordering are untouched.
type Sender interface {
	Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// TopicResolver maps topic IDs (Produce v13+, Fetch v13+) to names.
type TopicResolver interface {
	TopicName(ctx context.Context, id [16]byte) (string, error)
}

// Context is what a filter knows of the connection a message travels on.
// One Context lives as long as its client connection. Requests are handled
// in order on one goroutine and responses in order on another, so the
// mutable parts (the principal and per-connection values) are guarded.
type Context struct {
	Ctx            context.Context
	VirtualCluster string
	ClientAddr     net.Addr
	Log            *slog.Logger
	Upstream       Sender
	Topics         TopicResolver

	mu        sync.Mutex
	principal string
	state     map[any]any
}

// Context returns c.Ctx, or context.Background() when it is unset (as a
// test may leave it).
func (c *Context) Context() context.Context {
	if c.Ctx != nil {
		return c.Ctx
	}
	return context.Background()
}

// Logger returns c.Log, or slog.Default() when it is unset.
func (c *Context) Logger() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// ErrUnknownTopicID is a topic ID (Produce, Fetch v13+) that does not
// resolve to a name.
var ErrUnknownTopicID = errors.New("topic ID does not resolve to a name")

// TopicName maps a topic ID to its name through c.Topics, while c's
// connection lasts. Its errors wrap ErrUnknownTopicID.
func (c *Context) TopicName(id [16]byte) (string, error) {
	if c.Topics == nil {
		return "", fmt.Errorf("%w: %x (no resolver)", ErrUnknownTopicID, id)
	}
	name, err := c.Topics.TopicName(c.Context(), id)
	if err != nil {
		return "", fmt.Errorf("%w: %x: %w", ErrUnknownTopicID, id, err)
	}
	return name, nil
}

// Principal is the authenticated identity of the client, set by an
// authentication filter; empty when none has run.
func (c *Context) Principal() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal
}

// SetPrincipal records the client's authenticated identity.
func (c *Context) SetPrincipal(p string) {
	c.mu.Lock()
	c.principal = p
	c.mu.Unlock()
}

// Value returns the per-connection state a filter stored under key.
func (c *Context) Value(key any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state[key]
}

// SetValue stores per-connection state under key. A value shared between
// OnRequest and OnResponse must itself be safe for concurrent use.
func (c *Context) SetValue(key, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		c.state = make(map[any]any)
	}
	c.state[key] = v
}
