package mockllm

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by New to zero-valued Options fields.
const (
	// DefaultDeltas is how many deltas a stream carries.
	DefaultDeltas = 10
	// DefaultResponseBytes is the approximate size of a non-streaming
	// OpenAI text answer: the default of the mock provider most published
	// LLM gateway benchmarks use.
	DefaultResponseBytes = 360
	// DefaultHang is how long the timeout error holds a request.
	DefaultHang = 10 * time.Minute
	// DefaultMaxBodyBytes bounds a request body, as Anthropic's Messages
	// API does.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultMaxConcurrentStreams is the HTTP/2 stream limit per
	// connection. It is high because load generators multiplex thousands
	// of slow requests over a few connections.
	DefaultMaxConcurrentStreams = 10000
)

// DefaultModels are the model IDs GET /v1/models lists when Options.Models
// is empty. Any model name is accepted in requests.
var DefaultModels = []string{"gpt-4o-mini", "claude-sonnet-4-5"}

// Options configures a Server. The zero value of each field is its default,
// so Options{} is an instant, error-free provider.
type Options struct {
	// Latency is how long an answer takes, counted from the arrival of the
	// request's headers: a JSON answer is written after it, and a stream
	// ends at it, its deltas spread evenly over it, the first at once.
	Latency time.Duration

	// Jitter varies each request's latency by a uniform random amount in
	// [-Jitter, +Jitter], never below zero.
	Jitter time.Duration

	// SpikeRate is the fraction of requests, from 0 to 1, whose latency
	// gets Spike added: tail latency on demand.
	SpikeRate float64
	Spike     time.Duration

	// Deltas is how many deltas a stream splits its text (or its tool
	// call's arguments) into: fewer if the text is shorter than that many
	// bytes. Zero means DefaultDeltas.
	Deltas int

	// ResponseBytes is the approximate size of a non-streaming OpenAI text
	// answer's body; the reply text is that minus the JSON around it, and
	// both dialects send the same text. Zero means DefaultResponseBytes.
	ResponseBytes int

	// ErrorRate is the fraction of chat completion and message requests,
	// from 0 to 1, answered with an error drawn uniformly from ErrorKinds.
	ErrorRate float64

	// ErrorKinds are the errors ErrorRate draws from. Empty means
	// {"500"}. See ErrorKind for the kinds.
	ErrorKinds []ErrorKind

	// ModelErrors inject errors into the requests for some models only,
	// each at its own rate: the first whose Model glob matches the
	// requested model applies, instead of ErrorRate.
	ModelErrors []ModelError

	// CutAfter is how many deltas the "midstream" and "cut" kinds send
	// before they fail; 0 means half of them.
	CutAfter int

	// RateLimitEvery and RateLimitFor open windows of rate limiting: from
	// each multiple of RateLimitEvery after the server is created, for
	// RateLimitFor, every chat completion and message request is answered
	// 429 with a retry-after header saying when the window closes. Both
	// must be set to have windows.
	RateLimitEvery time.Duration
	RateLimitFor   time.Duration

	// Hang is how long the "timeout" error kind holds a request before
	// dropping it without an answer, unless the client gives up first.
	// Zero means DefaultHang.
	Hang time.Duration

	// APIKey, if set, is the only key accepted: in "Authorization: Bearer"
	// for OpenAI requests, in "x-api-key" (or, as Anthropic's current SDKs
	// send it, "Authorization: Bearer") for Anthropic ones. Any other gets
	// a 401 in the dialect's shape. Empty accepts any key, or none.
	APIKey string

	// Models are the IDs GET /v1/models lists. Empty means DefaultModels.
	Models []string

	// MaxBodyBytes bounds a request body; a bigger one gets a 413. Zero
	// means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MaxConcurrentStreams is the HTTP/2 stream limit per connection for
	// Serve and ServeTLS. Zero means DefaultMaxConcurrentStreams.
	MaxConcurrentStreams int

	// Logger receives a line per injected fault (debug) and per serving
	// error. Nil discards.
	Logger *slog.Logger
}

// ModelError is an error rate for the models Model matches (a glob: '*'
// any run of characters, '?' one).
type ModelError struct {
	Model string
	Rate  float64
	// Kinds are drawn from uniformly; empty means {"500"}.
	Kinds []ErrorKind
}

// ParseModelErrors parses "MODEL=RATE[:KIND,KIND…];…", such as
// "gpt-4o=0.2:500,503;claude-*=0.05:cut".
func ParseModelErrors(s string) ([]ModelError, error) {
	var out []ModelError
	for e := range strings.SplitSeq(s, ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		model, rest, ok := strings.Cut(e, "=")
		if !ok || model == "" {
			return nil, fmt.Errorf("model error %q: want MODEL=RATE[:KIND,KIND…]", e)
		}
		rate, kinds, _ := strings.Cut(rest, ":")
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("model error %q: the rate %q is not a fraction from 0 to 1", e, rate)
		}
		me := ModelError{Model: model, Rate: r}
		if kinds != "" {
			if me.Kinds, err = ParseErrorKinds(kinds); err != nil {
				return nil, err
			}
		}
		out = append(out, me)
	}
	return out, nil
}

// ErrorKind is an error the server injects (Options.ErrorKinds). It is
// either an HTTP status from 400 to 599, sent as a complete error in the
// dialect's shape (for example "429", with retry-after, "500", or "529"),
// or one of the named kinds:
//
//   - "overloaded": the dialect's own overload error: Anthropic's 529
//     overloaded_error, OpenAI's 503 server_error.
//   - "timeout": no answer at all; the request is held (Options.Hang)
//     and then dropped, the connection closed (HTTP/1) or the stream reset
//     (HTTP/2).
//   - "midstream": a stream that sends half of its deltas and then an
//     error event in the dialect's shape (Anthropic "event: error", OpenAI
//     a data line holding an error object) and ends, with no message_stop
//     or [DONE]. A JSON request gets half of its body and a dropped
//     connection.
//   - "cut": a stream (or JSON body) that stops after half of its deltas
//     (or bytes) with the connection dropped and no error event.
//     Options.CutAfter sets how many deltas "midstream" and "cut" send.
//   - "reset": a 200 answer whose connection is dropped before the first
//     byte of its body: a provider that fails after accepting the
//     request.
//
// Status errors and "overloaded" are answered at once, without waiting for
// the latency: that is how real providers reject requests.
type ErrorKind string

// The named error kinds.
const (
	KindOverloaded ErrorKind = "overloaded"
	KindTimeout    ErrorKind = "timeout"
	KindMidstream  ErrorKind = "midstream"
	KindCut        ErrorKind = "cut"
	KindReset      ErrorKind = "reset"
)

// ParseErrorKinds parses a comma-separated list of error kinds, such as
// "429,500,529,overloaded,timeout,midstream".
func ParseErrorKinds(s string) ([]ErrorKind, error) {
	var kinds []ErrorKind
	var errs []error
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k := ErrorKind(strings.ToLower(f))
		if _, err := k.compile(); err != nil {
			errs = append(errs, err)
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds, errors.Join(errs...)
}

// fault is a compiled ErrorKind: status is the HTTP status to send (0 for
// the kinds that send none of their own).
type fault struct {
	kind   ErrorKind
	status int
}

func (k ErrorKind) compile() (fault, error) {
	switch k {
	case KindOverloaded, KindTimeout, KindMidstream, KindCut, KindReset:
		return fault{kind: k}, nil
	}
	n, err := strconv.Atoi(string(k))
	if err != nil || n < 400 || n > 599 {
		return fault{}, fmt.Errorf("error kind %q: want an HTTP status from 400 to 599, overloaded, timeout, midstream, cut or reset", string(k))
	}
	return fault{kind: k, status: n}, nil
}

// Validate reports every problem with o at once.
func (o *Options) Validate() error {
	var errs []error
	neg := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s is %v: want zero or more", name, d))
		}
	}
	neg("Latency", o.Latency)
	neg("Jitter", o.Jitter)
	neg("Spike", o.Spike)
	neg("RateLimitEvery", o.RateLimitEvery)
	neg("RateLimitFor", o.RateLimitFor)
	neg("Hang", o.Hang)
	rate := func(name string, r float64) {
		if !(r >= 0 && r <= 1) {
			errs = append(errs, fmt.Errorf("%s is %v: want a fraction from 0 to 1", name, r))
		}
	}
	rate("SpikeRate", o.SpikeRate)
	rate("ErrorRate", o.ErrorRate)
	if o.Deltas < 0 {
		errs = append(errs, fmt.Errorf("Deltas is %d: want zero (the default, %d) or more", o.Deltas, DefaultDeltas))
	}
	if o.ResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("ResponseBytes is %d: want zero (the default, %d) or more", o.ResponseBytes, DefaultResponseBytes))
	}
	if o.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes is %d: want zero (the default) or more", o.MaxBodyBytes))
	}
	if o.MaxConcurrentStreams < 0 {
		errs = append(errs, fmt.Errorf("MaxConcurrentStreams is %d: want zero (the default) or more", o.MaxConcurrentStreams))
	}
	if o.RateLimitEvery > 0 && o.RateLimitFor >= o.RateLimitEvery {
		errs = append(errs, fmt.Errorf("RateLimitFor (%v) must be shorter than RateLimitEvery (%v), or every request is limited", o.RateLimitFor, o.RateLimitEvery))
	}
	if (o.RateLimitEvery > 0) != (o.RateLimitFor > 0) {
		errs = append(errs, errors.New("RateLimitEvery and RateLimitFor go together: set both or neither"))
	}
	for _, k := range o.ErrorKinds {
		if _, err := k.compile(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, me := range o.ModelErrors {
		rate("ModelErrors["+me.Model+"].Rate", me.Rate)
		for _, k := range me.Kinds {
			if _, err := k.compile(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if o.CutAfter < 0 {
		errs = append(errs, fmt.Errorf("CutAfter is %d: want zero (half of the deltas) or more", o.CutAfter))
	}
	return errors.Join(errs...)
}

// withDefaults returns o with its zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.Deltas == 0 {
		o.Deltas = DefaultDeltas
	}
	if o.ResponseBytes == 0 {
		o.ResponseBytes = DefaultResponseBytes
	}
	if len(o.ErrorKinds) == 0 {
		o.ErrorKinds = []ErrorKind{"500"}
	}
	if o.Hang == 0 {
		o.Hang = DefaultHang
	}
	if len(o.Models) == 0 {
		o.Models = DefaultModels
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
