package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/llm/h1client"
	"github.com/straitgw/strait/internal/llm/h2client"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/writebatch"
)

// HTTPVersion is how the gateway talks HTTP to a provider.
type HTTPVersion string

// HTTP versions toward a provider.
const (
	// HTTPAuto is HTTP/1.1 for http:// and HTTP/2 or HTTP/1.1 by ALPN for
	// https://.
	HTTPAuto HTTPVersion = ""
	// HTTP1 is HTTP/1.1 only, with or without TLS.
	HTTP1 HTTPVersion = "h1"
	// H2C is HTTP/2 without TLS, with prior knowledge; http:// only.
	H2C HTTPVersion = "h2c"
	// H2 is HTTP/2 over TLS only; https:// only.
	H2 HTTPVersion = "h2"
)

// HTTP2Client names the client that speaks HTTP/2 (h2c or h2) to a
// provider.
type HTTP2Client string

// HTTP/2 clients.
const (
	// HTTP2Strait is the gateway's own HTTP/2 client (internal/llm/h2client):
	// one goroutine per connection, none per request.
	HTTP2Strait HTTP2Client = ""
	// HTTP2NetHTTP is net/http's HTTP/2 client, for a provider the
	// gateway's own does not get along with.
	HTTP2NetHTTP HTTP2Client = "net/http"
)

// HTTP1Client names the client that speaks HTTP/1.1 to a provider: with
// http: h1, and with the default over http://.
type HTTP1Client string

// HTTP/1.1 clients.
const (
	// HTTP1Strait is the gateway's own HTTP/1.1 client
	// (internal/llm/h1client): no goroutine per connection, the request's
	// own reads and writes.
	HTTP1Strait HTTP1Client = ""
	// HTTP1NetHTTP is net/http's HTTP/1.1 client, for a provider the
	// gateway's own does not get along with.
	HTTP1NetHTTP HTTP1Client = "net/http"
)

// idleConnTimeout closes a provider connection unused for that long,
// whichever client holds it.
const idleConnTimeout = 90 * time.Second

// Defaults for Provider settings left at zero.
const (
	DefaultMaxConns        = 256
	DefaultConnectTimeout  = 5 * time.Second
	DefaultResponseTimeout = 60 * time.Second
	DefaultRequestTimeout  = 10 * time.Minute
	// DefaultStreamIdleTimeout is longer than DefaultResponseTimeout:
	// some models send their first chunk at once and then think for a
	// while before the next.
	DefaultStreamIdleTimeout = 2 * time.Minute
)

// AnthropicVersion is the anthropic-version header sent to Anthropic
// providers when the client did not send one (an OpenAI client, say).
const AnthropicVersion = "2023-06-01"

// Provider is an upstream API.
type Provider struct {
	// Name is the provider's unique name, used by routes and as a metric
	// label.
	Name string
	// Dialect is the API the provider speaks.
	Dialect translate.Dialect
	// BaseURL is scheme://host[:port][/prefix]; the API path
	// (/v1/chat/completions, /v1/messages, /v1/messages/count_tokens) is
	// appended to it.
	BaseURL string
	// APIKey is the provider's key, sent as Authorization: Bearer (OpenAI)
	// or x-api-key (Anthropic); empty sends none. Clients never see it.
	APIKey string
	// HTTP selects the protocol; HTTPAuto by default.
	HTTP HTTPVersion
	// HTTP2Client picks the HTTP/2 client for h2c and h2; HTTP2Strait by
	// default.
	HTTP2Client HTTP2Client
	// HTTP1Client picks the HTTP/1.1 client for h1, and for HTTPAuto over
	// http://; HTTP1Strait by default. HTTPAuto over https:// lets ALPN
	// choose, so it uses net/http's client.
	HTTP1Client HTTP1Client
	// TLS configures https:// connections; nil uses the system roots.
	TLS *tls.Config
	// MaxConns bounds the connections open to the provider (for HTTP/2,
	// each carries many requests); 0 means DefaultMaxConns.
	MaxConns int
	// ConnectTimeout bounds opening one connection, TLS handshake
	// included; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait from sending a request to the first
	// byte of the response body (for a stream, its first event); 0 means
	// DefaultResponseTimeout.
	ResponseTimeout time.Duration
	// RequestTimeout bounds a whole request, a stream to its end included;
	// 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// StreamIdleTimeout bounds the wait for the next event of a stream
	// once its first byte has come (any event counts, keep-alives
	// included); 0 means DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
}

// provider is a Provider ready for requests.
type provider struct {
	Provider
	// closeIdle closes the idle connections of the client in use.
	closeIdle func()
	// rt is the client, except in tests and benchmarks that stand in
	// for the network.
	rt http.RoundTripper
	// The endpoints, parsed once (newUpstreamRequest).
	chatU, messagesU, countU *url.URL
	header                   http.Header // sent on every request; cloned per request
	upstreamObs              prometheus.Observer
	// The timeouts, for error messages.
	timeoutResp, timeoutR, timeoutIdle string
}

func newProvider(p Provider) (*provider, error) {
	if p.Name == "" {
		return nil, errors.New("a provider has no name")
	}
	fail := func(format string, args ...any) (*provider, error) {
		return nil, fmt.Errorf("provider %q: "+format, append([]any{p.Name}, args...)...)
	}
	if p.Dialect != translate.OpenAI && p.Dialect != translate.Anthropic {
		return fail("dialect %q is not openai or anthropic", p.Dialect)
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
		return fail("base URL %q is not http(s)://host[:port][/prefix]", p.BaseURL)
	}
	tlsOn := u.Scheme == "https"
	protos := new(http.Protocols)
	switch p.HTTP {
	case HTTPAuto:
		protos.SetHTTP1(true)
		protos.SetHTTP2(tlsOn)
	case HTTP1:
		protos.SetHTTP1(true)
	case H2C:
		if tlsOn {
			return fail("h2c is HTTP/2 without TLS, but the base URL is https://: use h2, or an http:// URL")
		}
		protos.SetUnencryptedHTTP2(true)
	case H2:
		if !tlsOn {
			return fail("h2 is HTTP/2 over TLS, but the base URL is http://: use h2c, or an https:// URL")
		}
		protos.SetHTTP2(true)
	default:
		return fail("HTTP version %q is not h1, h2c or h2", p.HTTP)
	}
	switch p.HTTP2Client {
	case HTTP2Strait, HTTP2NetHTTP:
	default:
		return fail("HTTP/2 client %q is not net/http (or empty, for Strait's own)", p.HTTP2Client)
	}
	switch p.HTTP1Client {
	case HTTP1Strait, HTTP1NetHTTP:
	default:
		return fail("HTTP/1.1 client %q is not net/http (or empty, for Strait's own)", p.HTTP1Client)
	}
	if p.MaxConns <= 0 {
		p.MaxConns = DefaultMaxConns
	}
	if p.ConnectTimeout <= 0 {
		p.ConnectTimeout = DefaultConnectTimeout
	}
	if p.ResponseTimeout <= 0 {
		p.ResponseTimeout = DefaultResponseTimeout
	}
	if p.RequestTimeout <= 0 {
		p.RequestTimeout = DefaultRequestTimeout
	}
	if p.StreamIdleTimeout <= 0 {
		p.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	dial := (&net.Dialer{Timeout: p.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	if p.HTTP == H2C || p.HTTP == H2 {
		// Many requests share an HTTP/2 connection; their frames leave
		// in batches (writebatch) rather than a write(2) per flush.
		plain := dial
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := plain(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writebatch.New(c), nil
		}
	}
	rt := &http.Transport{
		// Provider traffic goes where the config says, never through
		// a proxy picked up from the environment.
		Proxy:                 nil,
		DialContext:           dial,
		TLSHandshakeTimeout:   p.ConnectTimeout,
		MaxIdleConns:          p.MaxConns,
		MaxIdleConnsPerHost:   p.MaxConns,
		MaxConnsPerHost:       p.MaxConns,
		IdleConnTimeout:       idleConnTimeout,
		ExpectContinueTimeout: 0,
		// Compression would make the provider buffer event streams, and
		// the fast path forwards bytes as they come.
		DisableCompression: true,
		Protocols:          protos,
	}
	if p.TLS != nil {
		rt.TLSClientConfig = p.TLS.Clone()
	}
	var client http.RoundTripper = rt
	closeIdle := rt.CloseIdleConnections
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if tlsOn {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	var clientTLS *tls.Config
	if tlsOn {
		clientTLS = &tls.Config{}
		if p.TLS != nil {
			clientTLS = p.TLS
		}
	}
	switch {
	case (p.HTTP == H2C || p.HTTP == H2) && p.HTTP2Client == HTTP2Strait:
		h2 := h2client.New(h2client.Options{
			Addr:            addr,
			TLS:             clientTLS,
			Dial:            dial,
			MaxConns:        p.MaxConns,
			ConnectTimeout:  p.ConnectTimeout,
			IdleConnTimeout: idleConnTimeout,
		})
		client, closeIdle = h2, h2.CloseIdleConnections
	case (p.HTTP == HTTP1 || (p.HTTP == HTTPAuto && !tlsOn)) && p.HTTP1Client == HTTP1Strait:
		h1 := h1client.New(h1client.Options{
			Addr:            addr,
			TLS:             clientTLS,
			Dial:            dial,
			MaxConns:        p.MaxConns,
			ConnectTimeout:  p.ConnectTimeout,
			IdleConnTimeout: idleConnTimeout,
		})
		client, closeIdle = h1, h1.CloseIdleConnections
	}
	base := strings.TrimSuffix(u.String(), "/")
	h := http.Header{
		"Content-Type":    {"application/json"},
		"User-Agent":      {"strait"},
		"Accept-Encoding": {"identity"},
	}
	if p.APIKey != "" {
		setCredentials(h, p.Dialect, p.APIKey)
	}
	pr := &provider{
		Provider:    p,
		closeIdle:   closeIdle,
		rt:          client,
		header:      h,
		timeoutResp: p.ResponseTimeout.String(),
		timeoutR:    p.RequestTimeout.String(),
		timeoutIdle: p.StreamIdleTimeout.String(),
	}
	for _, e := range []struct {
		s string
		u **url.URL
	}{{"/v1/chat/completions", &pr.chatU}, {"/v1/messages", &pr.messagesU}, {"/v1/messages/count_tokens", &pr.countU}} {
		if *e.u, err = url.Parse(base + e.s); err != nil {
			return nil, fmt.Errorf("provider %q: base_url: %v", p.Name, err)
		}
	}
	return pr, nil
}

// endpoint is the provider's URL for op.
func (p *provider) endpoint(op operation) *url.URL {
	switch {
	case op == opCountTokens:
		return p.countU
	case p.Dialect == translate.Anthropic:
		return p.messagesU
	default:
		return p.chatU
	}
}

// newUpstreamRequest is http.NewRequestWithContext(ctx, "POST", u, body)
// with its Header set to header, for a URL parsed once, when the provider
// was set up, rather than per request.
func newUpstreamRequest(ctx context.Context, u *url.URL, header http.Header, body []byte) *http.Request {
	ub := &upstreamBody{url: *u, body: body}
	ub.url.Host = strings.TrimSuffix(ub.url.Host, ":") // an empty port, as NewRequest drops it
	r := http.Request{
		Method:        http.MethodPost,
		URL:           &ub.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Host:          ub.url.Host,
		ContentLength: int64(len(body)),
	}
	if len(body) == 0 {
		r.Body = http.NoBody
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	} else {
		ub.Reset(body)
		r.Body = ub
		r.GetBody = ub.again
	}
	return r.WithContext(ctx)
}

// upstreamBody is a provider request's body, over bytes the gateway
// holds, with the request's URL alongside: one allocation where a URL, a
// bytes.Reader and io.NopCloser's wrapper took three per request.
type upstreamBody struct {
	bytes.Reader
	url  url.URL
	body []byte
}

// Close does nothing: the bytes are the gateway's.
func (*upstreamBody) Close() error { return nil }

// again is the request's GetBody: the body from its start, for a client
// that sends the request once more.
func (b *upstreamBody) again() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.body)), nil
}

// setCredentials puts key in h as dialect d's API expects it.
func setCredentials(h http.Header, d translate.Dialect, key string) {
	delete(h, "X-Api-Key")
	delete(h, "Authorization")
	if d == translate.Anthropic {
		h["X-Api-Key"] = []string{key}
	} else {
		h["Authorization"] = []string{"Bearer " + key}
	}
}

// requestHeader returns the headers for one request: base (the
// provider's, or a target's, credentials), never the client's. An
// Anthropic client's anthropic-version and anthropic-beta go through to
// an Anthropic provider; anything else the client sent stays behind.
func (p *provider) requestHeader(base http.Header, client translate.Dialect, in http.Header, stream bool) http.Header {
	h := base.Clone()
	if stream {
		h["Accept"] = []string{"text/event-stream"}
	} else {
		h["Accept"] = []string{"application/json"}
	}
	if p.Dialect == translate.Anthropic {
		version := AnthropicVersion
		if client == translate.Anthropic {
			if v := in.Get("Anthropic-Version"); v != "" {
				version = v
			}
			if v := in.Values("Anthropic-Beta"); len(v) > 0 {
				h["Anthropic-Beta"] = v
			}
		}
		h["Anthropic-Version"] = []string{version}
	}
	return h
}
