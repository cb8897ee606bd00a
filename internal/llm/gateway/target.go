package gateway

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/straitgw/strait/internal/llm/translate"
)

// Strategy is how a route with several targets picks them.
type Strategy string

// The strategies.
const (
	// StrategyFallback tries the targets in order: the next only when the
	// one before has failed (after its retries).
	StrategyFallback Strategy = "fallback"
	// StrategyWeighted picks a target at random, in proportion to its
	// weight; after a failure, the next is picked the same way among the
	// targets not tried yet.
	StrategyWeighted Strategy = "weighted"
)

// Target is one place a route may send a request: a provider, the model
// name to ask it for and, optionally, credentials of its own.
type Target struct {
	// Name labels the target in metrics, logs and the X-Strait-Target
	// header; empty means Provider, or Provider/Model when Model is set.
	Name string
	// Provider names the provider.
	Provider string
	// Model, if set, replaces the model name sent to the provider.
	Model string
	// APIKey, if set, is sent instead of the provider's key: one provider
	// reached with several keys or accounts.
	APIKey string
	// Weight is the target's share under StrategyWeighted (0 means 1).
	Weight int
}

// Retry says when and how often a failed attempt is tried again.
type Retry struct {
	// Attempts is how many times each target is tried (1, the default,
	// means no retry on the same target; the next target is still tried
	// after a failure that On covers).
	Attempts int
	// Backoff is the wait before the first retry on the same target,
	// doubled for each retry after it up to MaxBackoff, with jitter (a
	// wait is drawn from its second half). A provider's retry-after
	// (or retry-after-ms), if longer, is waited instead, up to
	// MaxBackoff: a longer one moves on to the next target.
	Backoff, MaxBackoff time.Duration
	// OnStatus are the provider statuses that are retried or fall back.
	OnStatus []int
	// OnConnect retries a connection that could not be made (refused,
	// reset, TLS failure) before the request was sent.
	OnConnect bool
	// OnTimeout retries a response_timeout: no first byte in time.
	OnTimeout bool
}

// Defaults of Retry for a route that sets none but has several targets.
const (
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
)

// DefaultRetryStatuses are the statuses retried when Retry.OnStatus is
// empty: rate limits, overload and server errors.
var DefaultRetryStatuses = []int{429, 500, 502, 503, 504, 529}

// Health ejects a target that keeps failing: Failures failures within
// Window take it out of rotation for Cooldown; then one request at a time
// probes it (half-open) until one succeeds, which brings it back, or fails,
// which ejects it for another Cooldown.
type Health struct {
	// Failures is how many failures within Window eject the target; 0
	// turns ejection off.
	Failures int
	Window   time.Duration
	Cooldown time.Duration
}

// target is a Target ready for requests: its provider, its request
// headers, its health and its metric series.
type target struct {
	Target
	p      *provider
	rt     *route
	header http.Header // the provider's, with this target's key
	// sent holds the whole request header for JSON ([0]) and streamed
	// ([1]) requests, built once: shared by every request that carries
	// nothing of the client's (requestHeader), and never modified.
	sent   [2]http.Header
	hdr    []string // the X-Strait-Target value, shared by every response
	weight int

	// notBefore is the monotonic reading (nanotime) before which the
	// target is not tried: a provider's retry-after, or an ejection.
	notBefore atomic.Int64
	ejected   atomic.Bool // notBefore is an ejection (metrics, half-open)

	hmu      sync.Mutex // guards the failure window
	winStart int64
	failures int

	ms targetSeries
}

// targetSeries are a target's metric series, resolved once.
type targetSeries struct {
	attemptOK, attemptRetryable, attemptFailed prometheus.Counter
	retries, fallbacks, ejections              prometheus.Counter
	streamBefore, streamAfter                  prometheus.Counter
	up                                         prometheus.Gauge
}

// epoch is the zero of the gateway's monotonic readings (nanotime).
var epoch = time.Now()

// nanotime is a monotonic clock reading in nanoseconds since epoch.
func nanotime() int64 { return int64(time.Since(epoch)) }

// usable reports whether the target may be tried at now: not cooling
// down, and, once an ejection's cooldown has passed, only by the one
// request that probes it (half-open): that request moves the end of the
// cooldown a whole cooldown on, so that no other follows it until it has
// brought the target back (succeeded) or failed.
func (t *target) usable(now int64) bool {
	nb := t.notBefore.Load()
	if nb == 0 || now >= nb && !t.ejected.Load() {
		return true
	}
	if now < nb {
		return false
	}
	return t.notBefore.CompareAndSwap(nb, now+int64(t.rt.Health.Cooldown))
}

// waitLeft is how long until the target may be tried again.
func (t *target) waitLeft(now int64) time.Duration {
	return time.Duration(max(t.notBefore.Load()-now, 0))
}

// succeeded records a successful attempt: a probe brings an ejected
// target back.
func (t *target) succeeded() {
	if t.ejected.Load() {
		t.hmu.Lock()
		if t.ejected.Load() {
			t.ejected.Store(false)
			t.notBefore.Store(0)
			t.failures = 0
			t.ms.up.Set(1)
		}
		t.hmu.Unlock()
	}
}

// failed records a failed attempt, ejecting the target when its failures
// in the window reach the limit, or at once when it was the probe.
func (t *target) failed(now int64) {
	h := t.rt.Health
	if h.Failures <= 0 {
		return
	}
	t.hmu.Lock()
	defer t.hmu.Unlock()
	if t.ejected.Load() {
		// Only a probe reaches an ejected target: it failed, so another
		// cooldown.
		t.notBefore.Store(now + int64(h.Cooldown))
		t.ms.ejections.Inc()
		return
	}
	if now-t.winStart > int64(h.Window) {
		t.winStart, t.failures = now, 0
	}
	t.failures++
	if t.failures >= h.Failures {
		t.failures = 0
		t.ejected.Store(true)
		t.notBefore.Store(now + int64(h.Cooldown))
		t.ms.ejections.Inc()
		t.ms.up.Set(0)
		t.rt.g.log.Warn("llm target ejected", "route", t.rt.Name, "target", t.Name, "failures", h.Failures, "window", h.Window, "cooldown", h.Cooldown)
	}
}

// coolFor keeps the target out of rotation for d, as the provider's
// retry-after asked, unless it is already out for longer.
func (t *target) coolFor(now int64, d time.Duration) {
	end := now + int64(d)
	for {
		nb := t.notBefore.Load()
		if nb >= end || t.ejected.Load() {
			return
		}
		if t.notBefore.CompareAndSwap(nb, end) {
			return
		}
	}
}

func newTargets(r *route, providers map[string]*provider) ([]*target, error) {
	specs := r.Targets
	if len(specs) == 0 {
		specs = []Target{{Provider: r.Provider, Model: r.Model}}
	}
	var out []*target
	names := map[string]bool{}
	for i, s := range specs {
		p, ok := providers[s.Provider]
		if !ok {
			return nil, fmt.Errorf("route %q: target %d: provider %q is not defined", r.Name, i, s.Provider)
		}
		if s.Weight < 0 {
			return nil, fmt.Errorf("route %q: target %d: weight %d is negative", r.Name, i, s.Weight)
		}
		if s.Name == "" {
			s.Name = s.Provider
			if s.Model != "" && len(specs) > 1 {
				s.Name += "/" + s.Model
			}
		}
		if names[s.Name] {
			return nil, fmt.Errorf("route %q: two targets are named %q: name them (targets[].name)", r.Name, s.Name)
		}
		names[s.Name] = true
		t := &target{Target: s, p: p, rt: r, header: p.header, hdr: []string{s.Name}, weight: max(s.Weight, 1)}
		if s.APIKey != "" {
			t.header = p.header.Clone()
			setCredentials(t.header, p.Dialect, s.APIKey)
		}
		for i := range t.sent {
			t.sent[i] = p.requestHeader(t.header, translate.OpenAI, nil, i == 1)
		}
		out = append(out, t)
	}
	return out, nil
}

// attemptsHeader holds the X-Strait-Attempts values, so that setting the
// header allocates nothing.
var attemptsHeader = func() (v [16][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

func attemptsValue(n int) []string {
	if n < len(attemptsHeader) {
		return attemptsHeader[n]
	}
	return []string{strconv.Itoa(n)}
}

// plan is the order in which one request tries a route's targets.
type plan struct {
	order [8]*target // most routes have few targets: no allocation
	n     int
	more  []*target
}

func (pl *plan) add(t *target) {
	if pl.n < len(pl.order) {
		pl.order[pl.n] = t
	} else {
		pl.more = append(pl.more, t)
	}
	pl.n++
}

func (pl *plan) at(i int) *target {
	if i < len(pl.order) {
		return pl.order[i]
	}
	return pl.more[i-len(pl.order)]
}

// planFor orders the route's usable targets for one request: in
// configuration order (fallback) or by weighted draws without replacement
// (weighted). An empty plan means every target is ejected or cooling
// down.
func (r *route) planFor(pl *plan) {
	now := nanotime()
	if len(r.targets) == 1 {
		if t := r.targets[0]; t.usable(now) {
			pl.add(t)
		}
		return
	}
	if r.Strategy != StrategyWeighted {
		for _, t := range r.targets {
			if t.usable(now) {
				pl.add(t)
			}
		}
		return
	}
	var avail [8]*target
	cand := avail[:0]
	total := 0
	for _, t := range r.targets {
		if t.usable(now) {
			cand = append(cand, t)
			total += t.weight
		}
	}
	for len(cand) > 0 {
		n := rand.IntN(total)
		i := 0
		for ; i < len(cand)-1; i++ {
			n -= cand[i].weight
			if n < 0 {
				break
			}
		}
		pl.add(cand[i])
		total -= cand[i].weight
		cand = slices.Delete(cand, i, i+1)
	}
}

// retryable reports whether the route retries a failure: a provider
// status, a connection failure or a response timeout.
func (r *route) retryable(status int, kind string) bool {
	switch kind {
	case errUpstreamConnect, errUpstreamProtocol:
		// A connection that could not be made, or broke before the
		// answer began.
		return r.Retry.OnConnect
	case errUpstreamTimeout:
		return r.Retry.OnTimeout
	case errUpstreamStatus:
		return slices.Contains(r.Retry.OnStatus, status)
	}
	return false
}

// unhealthy reports whether a failure counts against the target's
// health: the provider failed (5xx), could not be reached, broke off or
// timed out. A 429 does not: its retry-after cools the target instead.
func unhealthy(status int, kind string) bool {
	switch kind {
	case errUpstreamConnect, errUpstreamProtocol, errUpstreamTimeout:
		return true
	}
	return status >= 500
}

// backoff is the wait before retry n (1 for the first) on the same
// target: exponential, capped, drawn from the upper half for jitter.
func (r *route) backoff(n int) time.Duration {
	b := r.Retry.Backoff
	for i := 1; i < n && b < r.Retry.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, r.Retry.MaxBackoff)
	if b <= 0 {
		return 0
	}
	return b/2 + rand.N(b/2+1)
}

// maxRetryAfter bounds a provider's retry-after: a date decades away (or
// a typo) must not keep a target out of rotation for good.
const maxRetryAfter = time.Hour

// parseRetryAfter reads a provider's retry-after-ms (milliseconds) or
// retry-after (seconds, or an HTTP date); 0 if neither says. The wait is
// at most maxRetryAfter.
func parseRetryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return min(time.Duration(min(ms, float64(maxRetryAfter/time.Millisecond))*float64(time.Millisecond)), maxRetryAfter)
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return min(time.Duration(min(s, float64(maxRetryAfter/time.Second))*float64(time.Second)), maxRetryAfter)
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), maxRetryAfter)
	}
	return 0
}

// requestHeader returns the headers of one request to t from a client of
// dialect client that sent in. Only an Anthropic client's
// anthropic-version and anthropic-beta, to an Anthropic provider, make it
// build a header of its own; otherwise every request shares t's, which
// saves cloning a map per request (transports only read it).
func (t *target) requestHeader(client translate.Dialect, in http.Header, stream bool) http.Header {
	if t.p.Dialect == translate.Anthropic && client == translate.Anthropic &&
		(in.Get("Anthropic-Version") != "" || len(in.Values("Anthropic-Beta")) > 0) {
		return t.p.requestHeader(t.header, client, in, stream)
	}
	if stream {
		return t.sent[1]
	}
	return t.sent[0]
}
