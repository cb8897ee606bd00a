package gateway

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/sse"
	"github.com/straitgw/strait/internal/llm/translate"
)

// Error kinds: the kind label of strait_llm_errors_total and the error
// attribute of the access log.
const (
	errAuth             = "auth"
	errBadRequest       = "bad_request"
	errBodyTimeout      = "body_timeout"
	errTooLarge         = "too_large"
	errNotFound         = "not_found"
	errMethod           = "method"
	errNoRoute          = "no_route"
	errUnsupported      = "unsupported"
	errTranslate        = "translate"
	errUpstreamConnect  = "upstream_connect"
	errUpstreamTimeout  = "upstream_timeout"
	errUpstreamStatus   = "upstream_status"
	errUpstreamProtocol = "upstream_protocol"
	errStream           = "stream"
	errClientGone       = "client_gone"
	errShutdown         = "shutdown"
	errInternal         = "internal"
	errDeadline         = "deadline"
	errUnavailable      = "unavailable"
	errRateLimited      = "rate_limited"
	errBudget           = "budget"
	errForbidden        = "forbidden"
	errLimitStore       = "limit_store"
)

// Neutral error kinds of translate.Error.
const (
	kindInvalidRequest  = "invalid_request"
	kindAuthentication  = "authentication"
	kindNotFound        = "not_found"
	kindRequestTooLarge = "request_too_large"
	kindAPIError        = "api_error"
	kindOverloaded      = "overloaded"
	kindTimeout         = "timeout"
)

// statusClientClosed is logged and counted when the client went away
// before it could be answered (nginx's convention; never sent).
const statusClientClosed = 499

// afterTerminator is how long a provider may take to end its response
// after the stream's terminator before the gateway stops reading.
const afterTerminator = 2 * time.Second

// The phases of an exchange's timer.
const (
	phaseResponse int32 = iota // waiting for the first byte
	phaseRequest               // the rest of the request
	phaseOver                  // after a stream's terminator
)

// timedOut runs when the exchange's timer fires: it cancels the provider
// request with the cause of the current phase.
//
// A stream's idle limit is kept lazily: each event only records when it
// came (lastEvent), and when the timer fires early because events came
// since it was set, it is set again for the new end of the idle period.
// That costs a stream one atomic store per event rather than a timer reset.
func (x *exchange) timedOut() {
	x.tmu.Lock()
	defer x.tmu.Unlock()
	if x.timerDone {
		return
	}
	ph := x.phase.Load()
	if ph != phaseOver && x.deadlineAt > 0 && x.clock() >= x.deadlineAt {
		x.cancel(errDeadlinePassed)
		return
	}
	switch ph {
	case phaseResponse:
		x.cancel(errResponseTimeout)
	case phaseRequest:
		if last := x.lastEvent.Load(); x.idle > 0 && last != 0 {
			now := x.clock()
			idleEnd := time.Duration(last) + x.idle
			switch {
			case now < idleEnd && now < x.reqEnd:
				x.timer.Reset(min(idleEnd, x.reqEnd) - now)
				return
			case idleEnd < x.reqEnd:
				x.cancel(errIdleTimeout)
				return
			}
		}
		x.cancel(errRequestTimeout)
	default:
		x.cancel(errStreamOver)
	}
}

// gotFirstByte moves the timer from response_timeout to what is left of
// request_timeout, or, for a stream, to stream_idle_timeout if that ends
// first.
func (x *exchange) gotFirstByte() {
	x.firstByte = true
	if x.timer == nil {
		return
	}
	x.tmu.Lock()
	defer x.tmu.Unlock()
	now := x.clock()
	if x.idle > 0 {
		x.lastEvent.Store(int64(max(now, 1)))
	}
	// With response_timeout at or above request_timeout the timer already
	// runs for request_timeout; a stream still needs it shortened to its
	// idle limit.
	if !x.phase.CompareAndSwap(phaseResponse, phaseRequest) && (x.idle == 0 || x.phase.Load() != phaseRequest) {
		return
	}
	if x.timer.Stop() {
		d := x.reqEnd - now
		if x.idle > 0 {
			d = min(d, x.idle)
		}
		x.timer.Reset(max(d, 0))
	}
}

// timerEnd moves the timer to the grace after a stream's terminator.
func (x *exchange) timerEnd() {
	x.tmu.Lock()
	defer x.tmu.Unlock()
	x.phase.Store(phaseOver)
	x.timer.Reset(afterTerminator)
}

// stopTimer stops the timer for good, when the exchange is over.
func (x *exchange) stopTimer() {
	x.tmu.Lock()
	defer x.tmu.Unlock()
	x.timerDone = true
	x.timer.Stop()
}

// Causes of an upstream request's cancellation.
var (
	errResponseTimeout = errors.New("response timeout")
	errRequestTimeout  = errors.New("request timeout")
	errIdleTimeout     = errors.New("stream idle timeout")
	errStreamOver      = errors.New("stream over")
	errDeadlinePassed  = errors.New("route deadline")
)

type operation uint8

const (
	opNone operation = iota
	opChat
	opMessages
	opCountTokens
	opModels
	opModel
)

// exchange is one request's state, from arrival to the access log line.
type exchange struct {
	g *Gateway
	r *http.Request
	w respWriter
	// scrub masks provider keys in a stream on its way to w.
	scrub scrubWriter
	// start is when the request arrived; every other instant is kept as
	// the time since start, which costs one clock read (time.Since) where
	// time.Now costs two.
	start time.Time
	mark  time.Duration // end of the last stage

	client translate.Dialect
	// includeUsage: an OpenAI client asked for its stream's usage chunk.
	includeUsage bool
	// omitUsage: the gateway asked the provider for the usage chunk the
	// client did not ask for, and drops it on the way.
	omitUsage bool
	op        operation
	key       string // the gateway key's name
	kd        *keyData
	model     string // as the client asked
	stream    bool
	rt        *route
	t         *target // the target of the current (or last) attempt
	label     string  // model metric label
	trans     bool    // translated across dialects
	trace     bool

	stages       [numStages]time.Duration
	reached      uint16        // bit per Stage seen
	upstreamWait time.Duration // request written -> response headers
	recvWait     time.Duration // blocked reading the provider's body
	firstEvent   time.Duration // streams: start -> first event sent

	upCtx  context.Context
	cancel context.CancelCauseFunc
	// stopBase ends the attempt's watch on the gateway's own context,
	// when one is set (limits active).
	stopBase func() bool
	// timer enforces the provider's timeouts, one at a time (see
	// phase): response_timeout until the first byte, then
	// request_timeout, then the grace after a stream's terminator.
	timer     *time.Timer
	tmu       sync.Mutex // serialises moving and firing the timer
	timerDone bool       // the exchange is over: the timer stays stopped
	phase     atomic.Int32
	firstByte bool
	// idle is the provider's stream_idle_timeout once it has answered
	// with an event stream, else 0 (set under tmu); lastEvent is the clock
	// reading at the stream's last event (0: not started).
	idle      time.Duration
	lastEvent atomic.Int64
	reqEnd    time.Duration // clock reading at which request_timeout ends
	sendStart time.Duration
	// wrote is when the request was fully written, in nanoseconds since
	// start (0: not yet). The transport reports it from its own goroutine,
	// possibly after RoundTrip has returned.
	wrote atomic.Int64
	ct    httptrace.ClientTrace

	// Attempts: how many were made, the failure held for the client
	// while another may still answer, whether another may follow this
	// one, the provider's retry-after, and the request's deadline (a
	// clock reading; 0: none).
	attempts   int
	pend       pending
	more       bool
	retryAfter time.Duration
	deadlineAt time.Duration

	lim limitState

	usage          translate.Usage
	upstreamStatus int
	dropped        []string
	errKind        string
	errMsg         string
}

// ServeHTTP handles one client request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.inflight.Add(1)
	g.m.InFlight.Inc()
	x := &exchange{g: g, r: r, start: time.Now()}
	x.w.rw, x.w.start = w, x.start
	defer g.finish(x)
	defer x.recoverPanic()
	x.serve()
}

// recoverPanic turns a panic into a 500 in the client's dialect, or, once
// the response has started, into an aborted response, which the client
// sees as an error rather than as a clean end.
func (x *exchange) recoverPanic() {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	x.g.log.Error("llm request panicked", "panic", v, "path", x.r.URL.Path, "stack", string(debug.Stack()))
	if x.w.status != 0 {
		x.errKind, x.errMsg = errInternal, fmt.Sprint("panic: ", v)
		panic(http.ErrAbortHandler)
	}
	x.fail(errInternal, &translate.Error{Status: 500, Kind: kindAPIError, Message: "internal error in the gateway; its log has the details"})
}

func (x *exchange) serve() {
	r := x.r
	switch r.URL.Path {
	case "/v1/chat/completions":
		x.client, x.op = translate.OpenAI, opChat
	case "/v1/messages":
		x.client, x.op = translate.Anthropic, opMessages
	case "/v1/messages/count_tokens":
		x.client, x.op = translate.Anthropic, opCountTokens
	case "/v1/models":
		x.client, x.op = guessDialect(r), opModels
	default:
		x.client = guessDialect(r)
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok && id != "" {
			x.op = opModel
		}
	}
	x.trace = r.Header.Get(TraceHeader) == "1"
	if !x.authenticate() {
		return
	}
	want := http.MethodPost
	switch x.op {
	case opNone:
		x.noEndpoint()
		return
	case opModels, opModel:
		want = http.MethodGet
	}
	if r.Method != want {
		x.wrongMethod(want)
		return
	}
	switch x.op {
	case opModels:
		x.listModels()
	case opModel:
		x.getModel(strings.TrimPrefix(r.URL.Path, "/v1/models/"))
	default:
		x.relay()
	}
}

// The answers to requests the gateway cannot serve are built in
// functions of their own, off the stack of the requests it can (see
// attempt).

func (x *exchange) noEndpoint() {
	r := x.r
	x.fail(errNotFound, &translate.Error{Status: 404, Kind: kindNotFound,
		Message: fmt.Sprintf("no such endpoint: %s %s; this gateway serves POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models", r.Method, clip(r.URL.Path))})
}

func (x *exchange) wrongMethod(want string) {
	r := x.r
	x.w.Header().Set("Allow", want)
	x.fail(errMethod, &translate.Error{Status: 405, Kind: kindInvalidRequest,
		Message: fmt.Sprintf("%s %s is not supported: use %s", r.Method, r.URL.Path, want)})
}

func (x *exchange) noRoute(model string) {
	x.fail(errNoRoute, &translate.Error{Status: 404, Kind: kindNotFound, Param: "model",
		Message: fmt.Sprintf("model %q is not served by this gateway: no route matches it (GET /v1/models lists the models it serves)", clip(model))})
}

func (x *exchange) noTokenCounting(model string) {
	x.fail(errUnsupported, &translate.Error{Status: 400, Kind: kindInvalidRequest, Param: "model",
		Message: fmt.Sprintf("token counting is not available for model %q: its provider speaks the OpenAI dialect, which has no count_tokens endpoint", clip(model))})
}

// guessDialect picks the error dialect for a path that does not say: an
// Anthropic SDK always sends anthropic-version.
func guessDialect(r *http.Request) translate.Dialect {
	if r.Header.Get("Anthropic-Version") != "" {
		return translate.Anthropic
	}
	return translate.OpenAI
}

// authenticate checks the gateway key, answering 401 if it is missing or
// unknown. Every configured key is compared, in constant time, so the
// answer's timing says nothing about which keys exist.
func (x *exchange) authenticate() bool {
	key := ""
	if a := x.r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		key = strings.TrimSpace(a[7:])
	}
	if k := x.r.Header.Get("X-Api-Key"); k != "" && (key == "" || x.client == translate.Anthropic) {
		key = k
	}
	if key == "" {
		x.fail(errAuth, &translate.Error{Status: 401, Kind: kindAuthentication,
			Message: "no API key: send the gateway key as \"Authorization: Bearer KEY\" or \"x-api-key: KEY\""})
		return false
	}
	sum := HashKey(key)
	found := -1
	for i := range x.g.keys {
		if subtle.ConstantTimeCompare(sum[:], x.g.keys[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		x.fail(errAuth, &translate.Error{Status: 401, Kind: kindAuthentication,
			Message: "invalid API key: this is not a key of this gateway"})
		return false
	}
	x.kd = x.g.keys[found]
	x.key = x.kd.Name
	return true
}

// relay serves a chat, messages or count_tokens request.
func (x *exchange) relay() {
	g := x.g
	if !x.jsonContentType() {
		return
	}
	body, ok := x.readBody()
	if !ok {
		return
	}
	x.lap(StageReceive)

	req, err := jsonscan.ScanRequest(body)
	if err != nil {
		x.badBody(err)
		return
	}
	x.model, x.stream = req.Model, req.Stream
	if x.op == opCountTokens {
		x.stream = false
	}
	x.lap(StageParse)

	rt := g.match(req.Model)
	if rt == nil {
		x.noRoute(req.Model)
		return
	}
	x.rt, x.label = rt, rt.modelLabel(nil, req.Model)
	x.lap(StageRoute)

	if x.op == opCountTokens && rt.p.Dialect != translate.Anthropic {
		x.noTokenCounting(req.Model)
		return
	}
	if !x.admit(body) {
		return
	}
	x.attemptAll(body, &req)
}

// attemptAll sends the request to the route's targets, in the order the
// route's strategy gives, retrying each as the route says, until one
// answers, a failure is not one to retry, or the targets, attempts or
// deadline run out. A failure is held (x.pend) rather than answered, so
// that only the last is, if no attempt succeeds.
func (x *exchange) attemptAll(body []byte, req *jsonscan.Request) {
	rt := x.rt
	var pl plan
	rt.planFor(&pl)
	if pl.n == 0 {
		x.unavailable()
		return
	}
	if rt.deadline > 0 {
		x.deadlineAt = x.clock() + rt.deadline
	}
	for i := 0; i < pl.n; i++ {
		t := pl.at(i)
		if i > 0 {
			x.t.ms.fallbacks.Inc()
		}
		for a := 1; a <= rt.Retry.Attempts; a++ {
			if a > 1 {
				wait := max(rt.backoff(a-1), x.retryAfter)
				if x.retryAfter > rt.Retry.MaxBackoff || !x.wait(wait) {
					break
				}
				t.ms.retries.Inc()
			}
			x.more = a < rt.Retry.Attempts || i < pl.n-1
			if x.attempt(t, body, req) || !x.pend.retry || x.expired() {
				x.answerPending()
				return
			}
		}
	}
	x.answerPending()
}

// wait sleeps d before a retry, unless the deadline would pass first (it
// reports false then) or the client leaves (also false).
func (x *exchange) wait(d time.Duration) bool {
	if x.deadlineAt > 0 && x.clock()+d >= x.deadlineAt {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.r.Context().Done():
		return false
	case <-x.g.baseCtx.Done():
		return false
	}
}

// expired reports whether the request's deadline has passed.
func (x *exchange) expired() bool { return x.deadlineAt > 0 && x.clock() >= x.deadlineAt }

// unavailable answers a request whose route has no target to try: every
// one is ejected or cooling down after a retry-after. The client gets 503
// with a retry-after for when the first comes back.
func (x *exchange) unavailable() {
	now := nanotime()
	var wait time.Duration = -1
	for _, t := range x.rt.targets {
		if w := t.waitLeft(now); wait < 0 || w < wait {
			wait = w
		}
	}
	secs := setRetryAfter(x.w.Header(), wait)
	x.fail(errUnavailable, &translate.Error{Status: 503, Kind: kindOverloaded,
		Message: fmt.Sprintf("every target of route %q is unavailable (failing, or rate limited by its provider); retry after %d s", x.rt.Name, secs)})
}

// attempt sends the request to t once. It reports true when the client
// has been answered (or has left); otherwise x.pend holds the failure.
//
// It is kept shallow: the request's goroutine waits for the provider
// inside it, and every frame on the stack at that moment is held for the
// whole wait. Building the upstream request and relaying the answer are
// functions of their own, whose frames are gone (or not yet there) while
// RoundTrip waits, so a fast-path request fits the stack its goroutine
// starts with instead of having it copied into one twice the size.
func (x *exchange) attempt(t *target, body []byte, req *jsonscan.Request) bool {
	ureq, answered := x.upstreamRequest(t, body, req)
	if answered {
		return true
	}
	defer x.endAttempt()
	x.sendStart = x.mark
	resp, err := t.p.rt.RoundTrip(ureq)
	upWait := x.roundTripped()
	if err != nil {
		return x.upstreamFailed(err, false)
	}
	defer resp.Body.Close()
	return x.relayResponse(resp, upWait)
}

// upstreamRequest readies an attempt on t: the body in the provider's
// dialect, the attempt's context and timer, the request. It reports true
// if the client has been answered instead (the body could not be
// translated).
func (x *exchange) upstreamRequest(t *target, body []byte, req *jsonscan.Request) (*http.Request, bool) {
	g := x.g
	p := t.p
	x.resetAttempt(t)
	x.attempts++
	upModel := t.upstreamModel(req.Model)
	out := body
	x.trans, x.dropped, x.includeUsage, x.omitUsage = false, nil, false, false
	if p.Dialect == x.client {
		if upModel != req.Model {
			out = jsonscan.Splice(body, req.ModelStart, req.ModelEnd, upModel)
		}
		if x.lim.active && x.stream && x.client == translate.OpenAI {
			// The key's tokens or spend are counted: an OpenAI provider
			// reports a stream's usage only when asked.
			out, x.omitUsage = askStreamUsage(out)
		}
	} else {
		x.trans = true
		var tr translate.Translated
		var err error
		// On the handler's own goroutine, as it is: decoded by hand, a
		// translation fits the stack a request already has. Handing it to
		// a pooled goroutine with a grown stack cost a thread wake-up per
		// request; growing this one before translating kept it grown while
		// the request waited for its provider, 27 KiB of stack per
		// translated request in flight against 8
		// (TestTranslatedRequestsInFlightHoldSmallStacks).
		tr, err = translate.Request(x.client, p.Dialect, body, upModel, g.topts)
		if err != nil {
			var te *translate.Error
			if !errors.As(err, &te) {
				te = &translate.Error{Status: 400, Kind: kindInvalidRequest, Message: err.Error()}
			}
			x.fail(errTranslate, te)
			return nil, true
		}
		out, x.dropped, x.includeUsage = tr.Body, tr.Dropped, tr.IncludeUsage
	}

	parent := x.r.Context()
	if x.lim.active {
		// The key's tokens or spend are counted: a client that leaves does
		// not cancel the provider's answer, which is read to its end (within
		// request_timeout) for the usage the provider bills.
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	x.upCtx, x.cancel = ctx, cancel
	if x.lim.active {
		x.stopBase = context.AfterFunc(g.baseCtx, func() { cancel(nil) })
	}
	now := x.clock()
	x.reqEnd = now + p.RequestTimeout
	first := min(p.ResponseTimeout, p.RequestTimeout)
	if x.deadlineAt > 0 {
		x.reqEnd = min(x.reqEnd, x.deadlineAt)
		first = min(first, max(x.deadlineAt-now, 0))
	}
	if p.ResponseTimeout >= p.RequestTimeout {
		x.phase.Store(phaseRequest)
	}
	x.timer = time.AfterFunc(first, x.timedOut)
	x.ct.WroteRequest = func(httptrace.WroteRequestInfo) { x.wrote.Store(max(int64(time.Since(x.start)), 1)) }
	ureq := newUpstreamRequest(httptrace.WithClientTrace(ctx, &x.ct), p.endpoint(x.op), t.requestHeader(x.client, x.r.Header, x.stream), out)
	x.lap(StagePrepare)
	return ureq, false
}

// endAttempt stops the attempt's timer and ends its context.
func (x *exchange) endAttempt() {
	x.stopTimer()
	if x.stopBase != nil {
		x.stopBase()
		x.stopBase = nil
	}
	x.cancel(nil)
}

// roundTripped records the send and wait stages once RoundTrip returns,
// and returns the wait for the provider's answer.
func (x *exchange) roundTripped() time.Duration {
	now := x.clock()
	var upWait time.Duration
	if wrote := time.Duration(x.wrote.Load()); wrote != 0 {
		x.add(StageSend, wrote-x.sendStart)
		upWait = now - wrote
		x.upstreamWait += upWait
	} else {
		x.add(StageSend, now-x.sendStart)
	}
	x.mark = now
	return upWait
}

// wrongContentType fails an attempt answered with JSON where a stream
// was asked for, or the other way round.
func (x *exchange) wrongContentType(resp *http.Response) bool {
	want, got := "JSON", "an event stream"
	if x.stream {
		want, got = "an event stream", "Content-Type "+strconv.Quote(resp.Header.Get("Content-Type"))
	}
	return x.failAttempt(errUpstreamProtocol, 0, &translate.Error{Status: 502, Kind: kindAPIError,
		Message: fmt.Sprintf("provider %q answered with %s where %s was asked for", x.t.p.Name, got, want)})
}

// relayResponse relays the provider's answer to an attempt, which it
// waited upWait for.
func (x *exchange) relayResponse(resp *http.Response, upWait time.Duration) bool {
	p := x.t.p
	x.upstreamStatus = resp.StatusCode
	p.upstreamObs.Observe(upWait.Seconds())
	rb := &timedBody{r: resp.Body, x: x}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return x.providerError(resp, rb)
	}
	if isEventStream(resp.Header.Get("Content-Type")) != x.stream {
		return x.wrongContentType(resp)
	}
	if x.stream {
		return x.relayStream(resp, rb)
	}
	return x.relayJSON(resp, rb)
}

// askStreamUsage makes an OpenAI stream request ask for its usage chunk
// (stream_options.include_usage) when it has no stream_options (or null,
// or {}). It reports whether it changed the body: the client did not ask
// for the chunk. stream_options with other members are left alone (the
// request's reservation then stands if no usage comes).
func askStreamUsage(body []byte) ([]byte, bool) {
	var opts []byte
	found := false
	jsonscan.Members(body, func(k, v []byte) bool {
		if string(k) == "stream_options" {
			opts, found = v, true
			return false
		}
		return true
	})
	const want = `{"include_usage":true}`
	if found {
		if string(opts) != "null" && string(bytes.Join(bytes.Fields(opts), nil)) != "{}" {
			return body, false
		}
		start := cap(body) - cap(opts) // opts is a slice of body
		out := make([]byte, 0, len(body)+len(want))
		out = append(append(append(out, body[:start]...), want...), body[start+len(opts):]...)
		return out, true
	}
	i := bytes.IndexByte(body, '{')
	if i < 0 {
		return body, false
	}
	out := make([]byte, 0, len(body)+len(want)+20)
	out = append(append(out, body[:i+1]...), `"stream_options":`+want...)
	if rest := bytes.TrimLeft(body[i+1:], " \t\r\n"); len(rest) == 0 || rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, body[i+1:]...), true
}

// resetAttempt readies the exchange for an attempt on t.
func (x *exchange) resetAttempt(t *target) {
	x.t = t
	x.label = x.rt.modelLabel(t, x.model)
	x.pend = pending{}
	x.retryAfter = 0
	x.upstreamStatus = 0
	x.firstByte = false
	x.timerDone = false
	x.idle = 0
	x.phase.Store(phaseResponse)
	x.lastEvent.Store(0)
	x.wrote.Store(0)
}

// pending is a failed attempt's answer, held until it is known that no
// other attempt will answer instead.
type pending struct {
	set   bool
	retry bool // the route retries this failure
	kind  string
	te    *translate.Error
	// raw, if set, is a provider error body in the client's dialect,
	// forwarded as it is with status.
	raw    []byte
	status int
	header http.Header // request ids, retry-after
}

// failAttempt holds a failed attempt's answer (status is the provider's,
// 0 if it sent none) and records the attempt's outcome. It returns false:
// the client has not been answered.
func (x *exchange) failAttempt(kind string, status int, te *translate.Error) bool {
	x.pend.set, x.pend.kind, x.pend.te, x.pend.status = true, kind, te, status
	x.pend.retry = x.rt.retryable(status, kind)
	t := x.t
	if x.pend.retry {
		t.ms.attemptRetryable.Inc()
	} else {
		t.ms.attemptFailed.Inc()
	}
	if unhealthy(status, kind) {
		t.failed(nanotime())
	}
	return false
}

// answerPending answers with the last attempt's failure.
func (x *exchange) answerPending() {
	pd := &x.pend
	if !pd.set {
		return
	}
	h := x.w.Header()
	for k, v := range pd.header {
		h[k] = v
	}
	x.setTargetHeaders()
	if pd.raw != nil {
		x.errKind, x.errMsg = pd.kind, pd.te.Message
		x.writeBody(pd.status, "application/json", pd.raw)
		return
	}
	x.fail(pd.kind, pd.te)
}

// setTargetHeaders tells the client which target answered and after how
// many attempts.
func (x *exchange) setTargetHeaders() {
	if x.t == nil {
		return
	}
	h := x.w.Header()
	h[TargetHeader] = x.t.hdr
	h[AttemptsHeader] = attemptsValue(x.attempts)
}

// preallocMax is the largest declared body read into a buffer of its
// size up front; a larger one grows as its bytes arrive, so that a size a
// client declares but never sends costs nothing.
const preallocMax = 1 << 20

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ctype string) bool {
	mt, _, _ := strings.Cut(ctype, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// jsonContentType answers 415, as the providers' APIs do, to a body
// declared as anything but JSON: a form or text/plain (what curl -d sends)
// would otherwise be read as JSON and give a confusing syntax error, or
// worse, be taken. A request without a Content-Type is read as JSON, as the
// providers do.
func (x *exchange) jsonContentType() bool {
	ct := x.r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	sub, ok := cutPrefixFold(mt, "application/")
	if ok && (strings.EqualFold(sub, "json") || (len(sub) > 5 && strings.EqualFold(sub[len(sub)-5:], "+json"))) {
		return true
	}
	x.fail(errBadRequest, &translate.Error{Status: http.StatusUnsupportedMediaType, Kind: kindInvalidRequest,
		Message: fmt.Sprintf("Content-Type %q is not supported: send the request body as JSON with Content-Type: application/json", clip(ct))})
	return false
}

// cutPrefixFold is strings.CutPrefix, ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// readBody reads the client's body, up to the size limit, within
// body_read_timeout.
func (x *exchange) readBody() ([]byte, bool) {
	if x.r.ContentLength > x.g.maxBody {
		x.tooLarge()
		return nil, false
	}
	var dl deadliner
	if x.r.ContentLength != 0 && x.g.bodyWait > 0 {
		// A read deadline on the connection (HTTP/1.1) or the stream
		// (HTTP/2): a client that sends its body slowly, or never, holds
		// the request for at most body_read_timeout. A writer that cannot
		// take deadlines (a test's recorder) reads without one.
		dl = readDeadliner(x.w.rw)
		if dl.SetReadDeadline(time.Now().Add(x.g.bodyWait)) != nil {
			dl = nil
		}
	}
	body, ok := x.readAll()
	// The deadline is lifted once the body is in, as the provider may
	// take much longer to answer, but not when it passed: net/http then
	// reads what is left of the body after the handler, and would wait for
	// it without end.
	if dl != nil && x.errKind != errBodyTimeout {
		dl.SetReadDeadline(time.Time{})
	}
	if ok {
		// HTTP/2's server keeps the stream's last body chunk (1-16 KiB
		// from a pool) until the handler reads end-of-stream or closes
		// the body; a body read to its announced length has not seen the
		// end, and the request now waits seconds for its answer.
		x.r.Body.Close()
	}
	return body, ok
}

// deadliner is a ResponseWriter that can bound the reading of the request
// body, as net/http's own writers (HTTP/1.1 and HTTP/2) can.
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// readDeadliner returns w's SetReadDeadline, directly when w has one
// (which costs no allocation), else through a ResponseController, which
// finds one under wrappers.
func readDeadliner(w http.ResponseWriter) deadliner {
	if d, ok := w.(deadliner); ok {
		return d
	}
	return http.NewResponseController(w)
}

// readAll reads the body, answering the client if that fails.
func (x *exchange) readAll() ([]byte, bool) {
	max := x.g.maxBody
	r := x.r
	var body []byte
	var err error
	if r.ContentLength >= 0 && r.ContentLength <= preallocMax {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, max+1))
		if err == nil && int64(len(body)) > max {
			x.tooLarge()
			return nil, false
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			x.tooLarge()
		case isDeadline(err):
			// Checked before the context: HTTP/1.1 cancels the request's
			// context when a read of its connection fails.
			x.bodyTimedOut()
		case x.r.Context().Err() != nil:
			x.gone()
		default:
			x.fail(errBadRequest, &translate.Error{Status: 400, Kind: kindInvalidRequest,
				Message: "could not read the request body: " + err.Error()})
		}
		return nil, false
	}
	return body, true
}

// isDeadline reports whether err is a read deadline that passed.
func isDeadline(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// bodyTimedOut answers 408 to a client that did not send its body within
// body_read_timeout. Over HTTP/1.1 the connection is closed after the
// answer: the rest of the body may still be on its way.
func (x *exchange) bodyTimedOut() {
	x.g.log.Warn("llm client did not send its request body in time", "peer", x.r.RemoteAddr, "body_read_timeout", x.g.bodyWait, "path", clip(x.r.URL.Path))
	if x.r.ProtoMajor == 1 {
		x.w.Header().Set("Connection", "close")
	}
	x.fail(errBodyTimeout, &translate.Error{Status: http.StatusRequestTimeout, Kind: kindTimeout,
		Message: fmt.Sprintf("the request body did not arrive within %s (the gateway's llm.body_read_timeout); send it promptly, or ask the operator to raise the limit", x.g.bodyWait)})
}

func (x *exchange) tooLarge() {
	x.fail(errTooLarge, &translate.Error{Status: 413, Kind: kindRequestTooLarge,
		Message: fmt.Sprintf("the request body is larger than this gateway accepts (%d bytes)", x.g.maxBody)})
}

func (x *exchange) badBody(err error) {
	e := &translate.Error{Status: 400, Kind: kindInvalidRequest}
	var fe *jsonscan.FieldError
	var se *jsonscan.SyntaxError
	switch {
	case errors.As(err, &fe):
		e.Param, e.Message = fe.Field, err.Error()
	case errors.As(err, &se):
		e.Message = fmt.Sprintf("the request body is not valid JSON at byte %d: %s", se.Offset, se.Msg)
	case errors.Is(err, jsonscan.ErrNotObject):
		e.Message = "the request body must be a JSON object"
	default:
		e.Message = "the request body is not valid JSON: " + err.Error()
	}
	x.fail(errBadRequest, e)
}

// gone records a client that left before it could be answered.
func (x *exchange) gone() {
	x.errKind, x.errMsg = errClientGone, "the client closed the request"
}

// upstreamFailed records a failed provider exchange: the client's own
// departure, a timeout, a shutdown, or a connection problem. inStream is
// true once the stream to the client has begun (then only the caller can
// tell the client). It reports whether the client's request is over
// (false: x.pend holds the failure).
func (x *exchange) upstreamFailed(err error, inStream bool) bool {
	e, kind := x.classify(err)
	if kind == errClientGone {
		x.gone()
		return true
	}
	x.g.log.Warn("llm provider request failed", "provider", x.t.p.Name, "target", x.t.Name, "err", err, "kind", kind)
	if inStream {
		x.t.failed(nanotime())
		return true
	}
	if kind == errShutdown || kind == errDeadline {
		x.failAttempt(kind, 0, e)
		x.pend.retry = false
		return false
	}
	return x.failAttempt(kind, 0, e)
}

// classify names why the provider exchange failed, and what to tell the
// client. Details such as the provider's address go to the log only.
func (x *exchange) classify(err error) (*translate.Error, string) {
	p := x.t.p
	cause := context.Cause(x.upCtx)
	switch {
	case x.g.baseCtx.Err() != nil:
		return &translate.Error{Status: 503, Kind: kindOverloaded, Message: "the gateway is shutting down; retry the request"}, errShutdown
	case x.r.Context().Err() != nil:
		return nil, errClientGone
	case errors.Is(cause, errDeadlinePassed):
		return &translate.Error{Status: 504, Kind: kindTimeout,
			Message: fmt.Sprintf("route %q did not answer within its deadline of %s (%d attempts)", x.rt.Name, x.rt.deadline, x.attempts)}, errDeadline
	case errors.Is(cause, errResponseTimeout):
		return &translate.Error{Status: 504, Kind: kindTimeout,
			Message: fmt.Sprintf("provider %q did not start its response within %s (response_timeout)", p.Name, p.timeoutResp)}, errUpstreamTimeout
	case errors.Is(cause, errRequestTimeout):
		return &translate.Error{Status: 504, Kind: kindTimeout,
			Message: fmt.Sprintf("provider %q did not finish its response within %s (request_timeout)", p.Name, p.timeoutR)}, errUpstreamTimeout
	case errors.Is(cause, errIdleTimeout):
		return &translate.Error{Status: 504, Kind: kindTimeout,
			Message: fmt.Sprintf("provider %q sent nothing for %s in the middle of its stream (stream_idle_timeout)", p.Name, p.timeoutIdle)}, errUpstreamTimeout
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &translate.Error{Status: 502, Kind: kindAPIError,
			Message: fmt.Sprintf("cannot connect to provider %q; the gateway's log has the details", p.Name)}, errUpstreamConnect
	}
	return &translate.Error{Status: 502, Kind: kindAPIError,
		Message: fmt.Sprintf("the connection to provider %q failed; the gateway's log has the details", p.Name)}, errUpstreamProtocol
}

// providerError maps a provider's error response to the client's dialect,
// keeping the provider's message. On the fast path an error body already
// in the client's dialect is forwarded as it is. A provider refusing the
// gateway's own credentials is a gateway fault (502), not the client's.
func (x *exchange) providerError(resp *http.Response, body io.Reader) bool {
	data, err := io.ReadAll(io.LimitReader(body, maxErrorBytes))
	if err != nil && x.upCtx.Err() != nil {
		return x.upstreamFailed(err, false)
	}
	x.lap(StageResponseReceive)
	p := x.t.p
	x.pend.header = http.Header{}
	copyResponseIDs(x.pend.header, resp.Header, x.g.red)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		ra, _ = x.g.red.scrubString(ra)
		x.pend.header.Set("Retry-After", ra)
	}
	if x.rt.resilient {
		switch resp.StatusCode {
		case 429, 503, 529:
			if d := parseRetryAfter(resp.Header); d > 0 {
				x.t.coolFor(nanotime(), d)
				x.retryAfter = d
			}
		}
	}
	// The provider may quote the key the gateway sent it ("Incorrect API
	// key provided: sk-…"): mask it before the body goes anywhere, forwarded
	// (fast path), mapped or logged.
	data = x.g.red.scrubError(data)
	pe := translate.ParseError(p.Dialect, resp.StatusCode, data)
	if resp.StatusCode == 401 || resp.StatusCode == 403 {
		x.g.log.Error("llm provider refused the gateway's credentials: check its api_key", "provider", p.Name, "target", x.t.Name, "status", resp.StatusCode, "message", pe.Message)
		return x.failAttempt(errUpstreamStatus, resp.StatusCode, &translate.Error{Status: 502, Kind: kindAPIError,
			Message: fmt.Sprintf("provider %q refused the gateway's credentials (HTTP %d): %s", p.Name, resp.StatusCode, pe.Message)})
	}
	x.failAttempt(errUpstreamStatus, resp.StatusCode, pe)
	if p.Dialect == x.client && resp.StatusCode >= 400 && isDialectError(p.Dialect, data) {
		x.pend.raw = data
	}
	return false
}

// isDialectError reports whether body is dialect d's error JSON.
func isDialectError(d translate.Dialect, body []byte) bool {
	var errObj, typeErr bool
	err := jsonscan.Members(body, func(k, v []byte) bool {
		switch string(k) {
		case "error":
			errObj = len(v) > 0 && v[0] == '{'
		case "type":
			typeErr = string(v) == `"error"`
		}
		return true
	})
	if err != nil {
		return false
	}
	if d == translate.Anthropic {
		return errObj && typeErr
	}
	return errObj
}

// responseUsage reads the usage of a JSON response. Only the top-level
// "usage" member is decoded: a long completion is scanned, not decoded.
func responseUsage(d translate.Dialect, body []byte) translate.Usage {
	var usage []byte
	jsonscan.Members(body, func(k, v []byte) bool {
		if string(k) == "usage" {
			usage = v
			return false
		}
		return true
	})
	if usage == nil {
		return translate.Usage{}
	}
	if u, ok := translate.UsageOf(d, usage); ok {
		return u
	}
	b := make([]byte, 0, len(usage)+len(`{"usage":}`))
	b = append(append(append(b, `{"usage":`...), usage...), '}')
	return translate.ResponseUsage(d, b)
}

// copyResponseIDs passes the provider's request id on, for support cases,
// under both dialects' header names: Anthropic's SDKs read request-id,
// OpenAI's x-request-id, and the provider may speak the other dialect. The
// id is masked by red like everything else the provider sends.
func copyResponseIDs(dst, src http.Header, red *redactor) {
	id := src.Get("Request-Id")
	if id == "" {
		id = src.Get("X-Request-Id")
	}
	if id != "" {
		id, _ = red.scrubString(id)
		setAll(dst, "Request-Id", id, "X-Request-Id", id)
	}
}

// setAll sets each key of kv (key, value, key, value...; keys in their
// canonical form) to its one value, as Header.Set would, with one
// allocation for all the values instead of one for each.
func setAll(h http.Header, kv ...string) {
	vals := make([]string, len(kv)/2)
	for i := range vals {
		vals[i] = kv[2*i+1]
		h[kv[2*i]] = vals[i : i+1 : i+1]
	}
}

// relayJSON relays a non-streaming success response.
func (x *exchange) relayJSON(resp *http.Response, body io.Reader) bool {
	p := x.t.p
	data, err := readUpTo(body, resp.ContentLength, maxResponseBytes+1)
	if err != nil {
		return x.upstreamFailed(err, false)
	}
	if len(data) > maxResponseBytes {
		return x.responseTooLarge()
	}
	x.lap(StageResponseReceive)
	if x.op != opCountTokens {
		x.usage = responseUsage(p.Dialect, data)
	}
	x.lap(StageResponseParse)
	ctype := resp.Header.Get("Content-Type")
	if x.trans {
		if data, err = translate.Response(p.Dialect, x.client, data, x.model); err != nil {
			return x.untranslatable(err)
		}
		ctype = "application/json"
	}
	// An answer carries no key unless a provider echoes one where it should
	// not; the search costs a few byte scans (scrubContent).
	data = x.g.red.scrubContent(data)
	x.lap(StageTranslate)
	copyResponseIDs(x.w.Header(), resp.Header, x.g.red)
	if ctype == "" {
		ctype = "application/json"
	} else {
		ctype, _ = x.g.red.scrubString(ctype)
	}
	x.succeeded()
	x.writeBody(resp.StatusCode, ctype, data)
	return true
}

func (x *exchange) responseTooLarge() bool {
	return x.failAttempt(errUpstreamProtocol, 0, &translate.Error{Status: 502, Kind: kindAPIError,
		Message: fmt.Sprintf("provider %q sent a response larger than %d bytes", x.t.p.Name, maxResponseBytes)})
}

func (x *exchange) untranslatable(err error) bool {
	p := x.t.p
	x.g.log.Warn("llm provider response could not be translated", "provider", p.Name, "err", err)
	return x.failAttempt(errUpstreamProtocol, 0, &translate.Error{Status: 502, Kind: kindAPIError,
		Message: fmt.Sprintf("provider %q sent a response the gateway cannot translate: %v", p.Name, err)})
}

// readUpTo reads r to its end, or to max bytes. size is how long r says it
// is (-1: unknown): the buffer is made that big at once, with a byte to
// spare to see the end, instead of grown from 512 bytes by doubling.
func readUpTo(r io.Reader, size int64, max int) ([]byte, error) {
	if size < 0 || size >= int64(max) {
		return io.ReadAll(io.LimitReader(r, int64(max)))
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		case len(b) == cap(b):
			// Longer than it said: read the rest the ordinary way.
			rest, err := io.ReadAll(io.LimitReader(r, int64(max-len(b))))
			return append(b, rest...), err
		}
	}
}

// succeeded records that the attempt's answer has begun: the target is
// healthy.
func (x *exchange) succeeded() {
	x.t.ms.attemptOK.Inc()
	x.t.succeeded()
	x.setTargetHeaders()
}

// relayStream relays an event stream, one event at a time, flushing each.
// However the provider's stream ends, the client's stream ends with the
// dialect's terminator or its error event (translate.Stream.End).
func (x *exchange) relayStream(resp *http.Response, body io.Reader) bool {
	p := x.t.p
	// The idle limit applies from the stream's first byte; an error body
	// that answers a streamed request is not a stream.
	x.tmu.Lock()
	x.idle = p.StreamIdleTimeout
	x.tmu.Unlock()
	rd := sse.NewReader(body)
	defer rd.Release()
	// When another attempt could still answer, the client's response
	// waits for the provider's first event: until then a failure is
	// retried or falls back; after it, it can only end the stream.
	var first sse.Event
	haveFirst := false
	if x.more {
		t0, recv0 := x.clock(), x.recvWait
		ev, err := rd.Next()
		t1 := x.clock()
		read := x.recvWait - recv0
		x.add(StageResponseReceive, read)
		x.add(StageResponseParse, t1-t0-read)
		if err == nil && isErrorEvent(ev) {
			err = errErrorEvent
		}
		if err != nil {
			x.t.ms.streamBefore.Inc()
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if err == errErrorEvent {
				pe := translate.ParseError(p.Dialect, 500, x.g.red.scrubError(ev.Data))
				return x.failAttempt(errUpstreamStatus, 500, pe)
			}
			if x.upCtx.Err() == nil {
				x.g.log.Warn("llm provider stream broke off before its first event", "provider", p.Name, "target", x.t.Name, "err", err)
				return x.failAttempt(errUpstreamProtocol, 0, &translate.Error{Status: 502, Kind: kindAPIError, Message: streamBroke(p.Name, err).Error()})
			}
			return x.upstreamFailed(err, false)
		}
		if x.idle > 0 {
			x.lastEvent.Store(int64(t1))
		}
		first, haveFirst = ev, true
	}
	x.succeeded()
	st := translate.NewStreamWith(p.Dialect, x.client, x.model, translate.StreamOptions{IncludeUsage: x.includeUsage, OmitUsageChunk: x.omitUsage})
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	copyResponseIDs(h, resp.Header, x.g.red)
	if x.trace {
		h.Set("Trailer", OverheadTrailer+", "+TraceHeader)
	} else {
		h.Set("Trailer", OverheadTrailer)
	}
	h.Set(OverheadHeader, micros(x.overhead(x.clock())))
	x.w.WriteHeader(http.StatusOK)
	x.w.FlushError()
	x.lap(StageResponseSend)

	var sw *sse.Writer
	if x.g.red != nil {
		x.scrub = scrubWriter{w: &x.w, red: x.g.red}
		sw = sse.NewWriter(&x.scrub)
	} else {
		sw = sse.NewWriter(&x.w)
	}
	var cause, evErr error
	draining := false
	for {
		var ev sse.Event
		var err error
		t1 := x.clock()
		if haveFirst {
			ev, haveFirst = first, false
		} else {
			t0, recv0 := t1, x.recvWait
			ev, err = rd.Next()
			t1 = x.clock()
			read := x.recvWait - recv0
			x.add(StageResponseReceive, read)
			x.add(StageResponseParse, t1-t0-read)
		}
		if err != nil {
			if err != io.EOF {
				cause = err
			}
			break
		}
		if x.idle > 0 {
			x.lastEvent.Store(int64(t1))
		}
		sent0 := x.w.sendDur
		evErr = st.Event(ev, sw)
		t2 := x.clock()
		sent := x.w.sendDur - sent0
		x.add(StageResponseSend, sent)
		x.add(StageTranslate, t2-t1-sent)
		if x.firstEvent == 0 && x.w.written > 0 {
			x.firstEvent = t2
		}
		if evErr != nil && x.lim.active && x.w.err != nil && !draining {
			// The client left; read on for the usage, writing nowhere.
			draining, evErr = true, nil
			sw = sse.NewWriter(io.Discard)
		}
		if evErr != nil {
			break
		}
		if x.phase.Load() != phaseOver && st.Done() {
			// The terminator is in; the end of the body should follow at
			// once. Reading on lets the connection be reused, but a
			// provider that holds the response open is not waited for.
			x.timerEnd()
		}
	}
	x.mark = x.clock()
	switch {
	case draining:
		x.gone()
	case evErr != nil:
		// The client could not be written to, or the provider sent an
		// event that cannot be translated (the client has its error
		// event already).
		if x.w.err != nil || x.r.Context().Err() != nil {
			x.gone()
		} else {
			x.errKind, x.errMsg = errStream, evErr.Error()
		}
	case cause != nil && x.upCtx.Err() != nil && errors.Is(context.Cause(x.upCtx), errStreamOver):
		x.endStream(st, sw, nil)
	case cause != nil && x.upCtx.Err() != nil:
		e, kind := x.classify(cause)
		if kind == errClientGone {
			x.gone()
			break
		}
		x.upstreamFailed(cause, true)
		x.t.ms.streamAfter.Inc()
		if kind == errUpstreamTimeout || kind == errDeadline {
			// The client's error event says timeout, as a JSON answer would.
			x.endStream(st, sw, timeoutError(e.Message))
		} else {
			x.endStream(st, sw, errors.New(e.Message))
		}
		x.errKind = kind
	case cause != nil:
		x.g.log.Warn("llm provider stream broke off", "provider", p.Name, "target", x.t.Name, "err", cause)
		x.t.ms.streamAfter.Inc()
		x.t.failed(nanotime())
		x.endStream(st, sw, streamBroke(p.Name, cause))
	default:
		x.endStream(st, sw, nil)
	}
	x.usage = st.Usage()
	x.lap(StageResponseSend)
	now := x.mark
	h.Set(OverheadTrailer, micros(x.overhead(now)))
	if x.trace {
		h.Set(TraceHeader, x.traceValue(now))
	}
	return true
}

// errErrorEvent is a stream whose first event is an error.
var errErrorEvent = errors.New("the stream's first event is an error")

// isErrorEvent reports whether a stream event is the dialect's error: an
// Anthropic "error" event, or an OpenAI chunk holding an error object.
func isErrorEvent(ev sse.Event) bool {
	return string(ev.Name) == "error" || bytes.HasPrefix(bytes.TrimLeft(ev.Data, " "), []byte(`{"error"`))
}

// streamBroke describes a provider stream that failed mid-way without
// naming addresses, which the log has.
func streamBroke(provider string, err error) error {
	why := "the connection failed"
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		why = "it ended in the middle of an event"
	case errors.Is(err, sse.ErrEventTooLarge):
		why = "an event was larger than the gateway accepts"
	}
	return fmt.Errorf("the stream from provider %q broke off: %s", provider, why)
}

// timeoutError is a provider timeout met mid-stream; it reports Timeout,
// so the stream's error event is the dialect's timeout error.
type timeoutError string

func (e timeoutError) Error() string { return string(e) }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// endStream ends the client's stream: cleanly after the provider's
// terminator, else with the dialect's error event.
func (x *exchange) endStream(st translate.Stream, sw *sse.Writer, cause error) {
	if err := st.End(sw, cause); err != nil {
		x.errKind, x.errMsg = errStream, err.Error()
		if x.w.err != nil {
			x.gone()
		}
	}
}

// fail answers with e in the client's dialect. The body is scrubbed of the
// providers' keys: a provider's message is often part of e.
func (x *exchange) fail(kind string, e *translate.Error) {
	x.errKind, x.errMsg = kind, e.Message
	status, body := translate.ErrorBody(x.client, e)
	x.writeBody(status, "application/json", x.g.red.scrubError(body))
}

// scrubWriter masks the providers' keys in a stream on its way to the
// client. sse.Writer hands it one whole event per Write, whether relayed as
// received (the fast path) or made by translation, so a key is never split
// between two writes; the sse.Reader has already joined events that came
// split across reads. Each event goes through scrubEvent: one that may
// hold a key is scrubbed at an error's strength if it mentions an error,
// else as content; any other event, the common case, costs only mayHold's
// searches (a key's head and tail, each key, and the escapes).
type scrubWriter struct {
	w   *respWriter
	red *redactor
}

func (s *scrubWriter) Write(b []byte) (int, error) {
	if _, err := s.w.Write(s.red.scrubEvent(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// FlushError flushes the client's writer; sse.Writer calls it after each
// event.
func (s *scrubWriter) FlushError() error { return s.w.FlushError() }

// writeBody sends a whole response, with the overhead header (and the
// trace, if asked for) computed just before the headers go out.
func (x *exchange) writeBody(status int, ctype string, body []byte) {
	h := x.w.Header()
	now := x.clock()
	setAll(h, "Content-Type", ctype, "Content-Length", strconv.Itoa(len(body)), OverheadHeader, micros(x.overhead(now)))
	if x.trace {
		h.Set(TraceHeader, x.traceValue(now))
	}
	x.w.WriteHeader(status)
	x.w.Write(body)
	x.lap(StageResponseSend)
}

// finish records the request's metrics and access log line.
func (g *Gateway) finish(x *exchange) {
	g.inflight.Add(-1)
	g.m.InFlight.Dec()
	total := time.Since(x.start)
	status := x.w.status
	if x.errKind == errClientGone || status == 0 {
		status = statusClientClosed
	}
	var route, prov string
	if x.rt != nil {
		route = x.rt.Name
	}
	if x.t != nil {
		prov = x.t.p.Name
	}
	x.settle()
	path := "passthrough"
	if x.trans {
		path = "translate"
	}
	overhead := max(total-x.blocked(), 0)
	sr := g.seriesFor(seriesKey{client: x.client, route: x.rt, target: x.t, label: x.label, code: status, stream: x.stream})
	sr.requests.Inc()
	if x.errKind != "" {
		g.m.Errors.WithLabelValues(x.errKind, route, prov, x.label).Inc()
	}
	sr.duration.Observe(total.Seconds())
	if x.firstEvent > 0 {
		sr.firstEvent.Observe(x.firstEvent.Seconds())
	}
	if x.usage.Input > 0 {
		sr.tokensIn.Add(float64(x.usage.Input))
	}
	if x.usage.Output > 0 {
		sr.tokensOut.Add(float64(x.usage.Output))
	}
	ps := &g.paths[0]
	if x.trans {
		ps = &g.paths[1]
	}
	ps.overhead.Observe(overhead.Seconds())
	for s := range numStages {
		if x.reached&(1<<s) != 0 {
			ps.stages[s].Observe(x.stages[s].Seconds())
		}
	}

	level := slog.LevelInfo
	if x.errKind == errInternal {
		level = slog.LevelError
	}
	if g.log.Enabled(context.Background(), level) {
		g.logRequest(x, level, status, total, overhead, route, prov, path)
	}
}

// logRequest writes a request's access log line. It is apart from finish
// so that, with the log off, finish's frame does not hold the line's
// attributes (a kilobyte of stack).
func (g *Gateway) logRequest(x *exchange, level slog.Level, status int, total, overhead time.Duration, route, prov, path string) {
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs,
		slog.String("method", x.r.Method),
		slog.String("path", clip(x.r.URL.Path)),
		slog.String("client", string(x.client)),
		slog.String("key", x.key),
		slog.String("model", clip(x.model)),
		slog.String("route", route),
		slog.String("provider", prov),
		slog.Bool("stream", x.stream),
		slog.String("path_kind", path),
		slog.Int("status", status),
		slog.Duration("duration", total),
		slog.Duration("overhead", overhead),
	)
	if x.upstreamStatus != 0 {
		attrs = append(attrs, slog.Int("upstream_status", x.upstreamStatus))
	}
	if x.t != nil && (x.attempts > 1 || len(x.rt.targets) > 1) {
		attrs = append(attrs, slog.String("target", x.t.Name), slog.Int("attempts", x.attempts))
	}
	if x.firstEvent > 0 {
		attrs = append(attrs, slog.Duration("first_event", x.firstEvent))
	}
	if x.usage != (translate.Usage{}) {
		attrs = append(attrs, slog.Int("tokens_in", x.usage.Input), slog.Int("tokens_out", x.usage.Output))
	}
	if len(x.dropped) > 0 {
		attrs = append(attrs, slog.String("dropped", strings.Join(x.dropped, ",")))
	}
	if x.errKind != "" {
		attrs = append(attrs, slog.String("error", x.errKind), slog.String("error_message", x.errMsg))
	}
	g.log.LogAttrs(context.Background(), level, "llm request", attrs...)
}

// codeLabels holds the status code labels, so that counting a request
// does not format a number.
var codeLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func codeLabel(status int) string {
	if status >= 0 && status < len(codeLabels) {
		return codeLabels[status]
	}
	return strconv.Itoa(status)
}

// clip bounds client-supplied text quoted in messages and logs.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
