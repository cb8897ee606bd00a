package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/translate"
)

// Price is what a model costs, in dollars per million tokens.
type Price struct {
	// Model is the model name the provider is asked for, or a glob.
	Model         string
	Input, Output float64
}

// FailMode is what a limit does when its store cannot be reached.
type FailMode string

// The fail modes.
const (
	// FailOpen admits the request, uncounted.
	FailOpen FailMode = "fail_open"
	// FailClosed refuses it (503).
	FailClosed FailMode = "fail_closed"
)

// LimitOptions say where keys' counters are kept and what happens when
// that store fails.
type LimitOptions struct {
	// Store keeps the counters; nil means a limits.Memory.
	Store limits.Store
	// RateLimits (rpm, tpm) and Budgets on a store error; by default
	// rate limits fail open and budgets closed.
	RateLimits, Budgets FailMode
}

// keyData is a gateway key with its runtime state.
type keyData struct {
	Key
	restricted bool // Models or Routes limit what the key may use
	refused    [4]prometheus.Counter
	spend      prometheus.Counter

	// This instance's totals since start, for GET /llm/keys.
	requests, tokensIn, tokensOut, spent atomic.Int64
}

const (
	refusedRPM = iota
	refusedTPM
	refusedBudget
	refusedModel
)

func (g *Gateway) initKeys(keys []Key) error {
	names := map[string]bool{}
	for _, k := range keys {
		if names[k.Name] {
			return fmt.Errorf("two gateway keys are named %q", k.Name)
		}
		names[k.Name] = true
		if k.Limits.Budget > 0 {
			if _, err := limits.ParsePeriod(string(k.Limits.Period)); err != nil {
				return fmt.Errorf("key %q: %w", k.Name, err)
			}
			if k.Limits.Period == "" {
				k.Limits.Period = limits.Day
			}
			if len(g.prices) == 0 {
				return fmt.Errorf("key %q has a budget but no prices are configured: a budget counts spend from the price table", k.Name)
			}
		}
		kd := &keyData{Key: k, restricted: len(k.Models) > 0 || len(k.Routes) > 0}
		for i, l := range []string{limits.LimitRPM, limits.LimitTPM, limits.LimitBudget, "model"} {
			kd.refused[i] = g.m.LimitRefusals.WithLabelValues(k.Name, l)
		}
		kd.spend = g.m.Spend.WithLabelValues(k.Name)
		g.keys = append(g.keys, kd)
	}
	return nil
}

// allows reports whether the key may use model (by its Models globs) or
// route (by name).
func (k *keyData) allows(model, route string) bool {
	if slices.Contains(k.Routes, route) {
		return true
	}
	for _, m := range k.Models {
		if Glob(m, model) {
			return true
		}
	}
	return false
}

// priceOf returns the price of a model in nanodollars per token.
func (g *Gateway) priceOf(model string) (in, out int64, ok bool) {
	for _, p := range g.prices {
		if Glob(p.Model, model) {
			return limits.Nanodollars(p.Input) / 1e6, limits.Nanodollars(p.Output) / 1e6, true
		}
	}
	return 0, 0, false
}

// limitState is one request's admission: what it reserved and where.
type limitState struct {
	active       bool // tokens or spend were reserved and must be settled
	adm          limits.Admission
	tokens, cost int64
}

// admit checks the key's model rights and limits before any provider is
// called, reserving the request's estimated tokens and cost. It answers
// the client and reports false when the request may not go on.
func (x *exchange) admit(body []byte) bool {
	kd := x.kd
	if kd.restricted && !kd.allows(x.model, x.rt.Name) {
		kd.refused[refusedModel].Inc()
		x.fail(errForbidden, &translate.Error{Status: 403, Kind: translate.KindPermission, Param: "model",
			Message: fmt.Sprintf("the gateway key %q may not use model %q", kd.Name, clip(x.model))})
		return false
	}
	l := kd.Limits
	if !l.Any() {
		return true
	}
	g := x.g
	var tokens, cost int64
	if l.Counted() {
		in := int64(len(body) / 4)
		out := requestMaxTokens(body)
		if out <= 0 {
			out = int64(max(g.topts.DefaultMaxTokens, 1))
		}
		tokens = in + out
		if l.Budget > 0 {
			// The most the request can cost: at the dearest target's
			// price.
			for _, t := range x.rt.targets {
				m := t.upstreamModel(x.model)
				pin, pout, ok := g.priceOf(m)
				if !ok {
					x.fail(errBudget, &translate.Error{Status: 403, Kind: translate.KindPermission, Param: "model",
						Message: fmt.Sprintf("model %q has no price in the gateway's price table, so the budget of key %q cannot be kept: the operator must add it to llm.prices", clip(m), kd.Name)})
					return false
				}
				cost = max(cost, in*pin+out*pout)
			}
		}
	}
	a, err := g.store.Admit(x.r.Context(), kd.Name, l, tokens, cost, time.Now())
	if err != nil {
		mode := g.rateFail
		if l.Budget > 0 {
			mode = g.budgetFail
		}
		if mode == FailOpen {
			g.m.StoreErrors.WithLabelValues("admit", "allowed").Inc()
			g.log.Warn("llm limit store failed; request allowed uncounted (fail_open)", "key", kd.Name, "err", err)
			return true
		}
		g.m.StoreErrors.WithLabelValues("admit", "refused").Inc()
		g.log.Error("llm limit store failed; request refused (fail_closed)", "key", kd.Name, "err", err)
		setRetryAfter(x.w.Header(), time.Second)
		x.fail(errLimitStore, &translate.Error{Status: 503, Kind: kindOverloaded,
			Message: "the gateway cannot check this key's limits now (its limit store is unavailable); retry later"})
		return false
	}
	if !a.OK {
		secs := setRetryAfter(x.w.Header(), a.RetryAfter)
		var msg string
		switch a.Limit {
		case limits.LimitRPM:
			kd.refused[refusedRPM].Inc()
			msg = fmt.Sprintf("gateway key %q is over its limit of %d requests per minute; retry after %d s", kd.Name, l.RPM, secs)
		case limits.LimitTPM:
			kd.refused[refusedTPM].Inc()
			msg = fmt.Sprintf("gateway key %q is over its limit of %d tokens per minute (this request may use %d: its input and max_tokens); retry after %d s", kd.Name, l.TPM, tokens, secs)
		default:
			kd.refused[refusedBudget].Inc()
			msg = fmt.Sprintf("gateway key %q has spent its budget of $%.2f per %s, or this request could exceed it; the budget renews in %d s", kd.Name, limits.Dollars(l.Budget), l.Period, secs)
		}
		kind := errRateLimited
		if a.Limit == limits.LimitBudget {
			kind = errBudget
		}
		x.fail(kind, &translate.Error{Status: 429, Kind: translate.KindRateLimit, Message: msg})
		return false
	}
	x.lim = limitState{active: l.Counted(), adm: a, tokens: tokens, cost: cost}
	return true
}

// requestMaxTokens reads max_tokens or max_completion_tokens from a
// request body; 0 if neither is a whole number.
func requestMaxTokens(body []byte) int64 {
	var n int
	jsonscan.Members(body, func(k, v []byte) bool {
		switch string(k) {
		case "max_tokens", "max_completion_tokens":
			if m, ok := jsonscan.WholeNumber(v); ok && m > n {
				n = m
			}
		}
		return true
	})
	return int64(n)
}

// settle records the request's usage in its key's totals and settles
// its reservation with what the provider reported. A request that no
// provider answered gives its reservation back; one whose answer began
// but whose usage never came (a stream cut before its usage) keeps it:
// what the provider billed is unknown, and a budget errs on the safe
// side.
func (x *exchange) settle() {
	kd := x.kd
	if kd == nil {
		return
	}
	g := x.g
	kd.requests.Add(1)
	u := x.usage
	var cost int64
	if u != (translate.Usage{}) {
		kd.tokensIn.Add(int64(u.Input))
		kd.tokensOut.Add(int64(u.Output))
		if len(g.prices) > 0 && x.t != nil {
			if pin, pout, ok := g.priceOf(x.t.upstreamModel(x.model)); ok {
				cost = int64(u.Input)*pin + int64(u.Output)*pout
				kd.spent.Add(cost)
				kd.spend.Add(limits.Dollars(cost))
			}
		}
	}
	if !x.lim.active {
		return
	}
	var dTok, dCost int64
	switch {
	case u != (translate.Usage{}):
		dTok, dCost = int64(u.Input+u.Output)-x.lim.tokens, cost-x.lim.cost
	case x.answered():
		return
	default:
		dTok, dCost = -x.lim.tokens, -x.lim.cost
	}
	job := limits.SettleJob{Key: kd.Name, Limits: kd.Limits, Admission: x.lim.adm, Tokens: dTok, Cost: dCost}
	if g.queueSettle(job) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := g.store.Settle(ctx, kd.Name, kd.Limits, x.lim.adm, dTok, dCost); err != nil {
		g.m.StoreErrors.WithLabelValues("settle", "lost").Inc()
		g.log.Error("llm limit store failed to settle a request's usage", "key", kd.Name, "tokens", dTok, "err", err)
	}
}

// batchSettler is a store that settles many requests in one round trip
// (limits.Redis).
type batchSettler interface {
	SettleBatch(ctx context.Context, jobs []limits.SettleJob) error
}

// settler settles requests for a remote store off the request path: an
// HTTP/2 response ends only when its handler returns, so a round trip to
// Redis there would be the client's wait. One goroutine per gateway takes
// what the requests queue and sends it in batches.
type settler struct {
	mu     sync.RWMutex
	closed bool
	ch     chan limits.SettleJob
	done   chan struct{}
}

// queueSettle hands job to the settler; false means the caller settles
// it itself (no settler, or its queue is full).
func (g *Gateway) queueSettle(job limits.SettleJob) bool {
	s := g.settler
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false
	}
	select {
	case s.ch <- job:
		return true
	default:
		return false
	}
}

func (g *Gateway) startSettler(bs batchSettler) {
	s := &settler{ch: make(chan limits.SettleJob, 4096), done: make(chan struct{})}
	g.settler = s
	go func() {
		defer close(s.done)
		batch := make([]limits.SettleJob, 0, 256)
		for job := range s.ch {
			batch = append(batch[:0], job)
		more:
			for len(batch) < cap(batch) {
				select {
				case j, ok := <-s.ch:
					if !ok {
						break more
					}
					batch = append(batch, j)
				default:
					break more
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := bs.SettleBatch(ctx, batch); err != nil {
				g.m.StoreErrors.WithLabelValues("settle", "lost").Add(float64(len(batch)))
				g.log.Error("llm limit store failed to settle requests' usage", "requests", len(batch), "err", err)
			}
			cancel()
		}
	}()
}

// stopSettler settles what is queued, waiting at most until ctx is done.
func (g *Gateway) stopSettler(ctx context.Context) {
	s := g.settler
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
	}
}

// answered reports whether a provider's answer began (a 2xx).
func (x *exchange) answered() bool {
	return x.upstreamStatus >= 200 && x.upstreamStatus <= 299
}

// keyView is one key in GET /llm/keys.
type keyView struct {
	Name   string   `json:"name"`
	Models []string `json:"models,omitempty"`
	Routes []string `json:"routes,omitempty"`
	Limits struct {
		RPM           int64    `json:"rpm,omitempty"`
		TPM           int64    `json:"tpm,omitempty"`
		BudgetDollars *float64 `json:"budget_dollars,omitempty"`
		Period        string   `json:"period,omitempty"`
	} `json:"limits"`
	// Window is the key's counts in the store (shared by every instance
	// that uses it), for the limits it has.
	Window *struct {
		Requests         int64    `json:"requests_this_minute"`
		Tokens           int64    `json:"tokens_this_minute"`
		SpentDollars     float64  `json:"spent_dollars_this_period"`
		RemainingDollars *float64 `json:"remaining_budget_dollars,omitempty"`
		PeriodEnds       string   `json:"period_ends,omitempty"`
	} `json:"window,omitempty"`
	WindowError string `json:"window_error,omitempty"`
	// Totals are this instance's since it started.
	Totals struct {
		Requests     int64   `json:"requests"`
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		SpentDollars float64 `json:"spent_dollars"`
	} `json:"totals"`
}

// KeysHandler serves GET /llm/keys: every gateway key's limits, its
// counts in the current windows and remaining budget, and this
// instance's totals. It shows names, never keys or hashes; it belongs on
// the admin listener.
func (g *Gateway) KeysHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		out := struct {
			Store string    `json:"store"`
			Keys  []keyView `json:"keys"`
		}{Store: g.storeName, Keys: []keyView{}}
		for _, kd := range g.keys {
			var v keyView
			v.Name, v.Models, v.Routes = kd.Name, kd.Models, kd.Routes
			l := kd.Limits
			v.Limits.RPM, v.Limits.TPM = l.RPM, l.TPM
			if l.Budget > 0 {
				b := limits.Dollars(l.Budget)
				v.Limits.BudgetDollars, v.Limits.Period = &b, string(l.Period)
			}
			if l.Any() {
				u, err := g.store.Usage(r.Context(), kd.Name, l, now)
				if err != nil {
					v.WindowError = err.Error()
				} else {
					v.Window = &struct {
						Requests         int64    `json:"requests_this_minute"`
						Tokens           int64    `json:"tokens_this_minute"`
						SpentDollars     float64  `json:"spent_dollars_this_period"`
						RemainingDollars *float64 `json:"remaining_budget_dollars,omitempty"`
						PeriodEnds       string   `json:"period_ends,omitempty"`
					}{Requests: u.Requests, Tokens: u.Tokens, SpentDollars: limits.Dollars(u.Spent)}
					if l.Budget > 0 {
						rem := limits.Dollars(max(l.Budget-u.Spent, 0))
						v.Window.RemainingDollars = &rem
						v.Window.PeriodEnds = u.PeriodEnd.Format(time.RFC3339)
					}
				}
			}
			v.Totals.Requests = kd.requests.Load()
			v.Totals.InputTokens = kd.tokensIn.Load()
			v.Totals.OutputTokens = kd.tokensOut.Load()
			v.Totals.SpentDollars = limits.Dollars(kd.spent.Load())
			out.Keys = append(out.Keys, v)
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(out)
	})
}

// setRetryAfter tells the client when to retry: Retry-After in whole
// seconds (rounded up, at least 1), and retry-after-ms exactly, which the
// OpenAI and Anthropic SDKs read first. It returns the seconds.
func setRetryAfter(h http.Header, d time.Duration) int64 {
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
	h["Retry-After-Ms"] = []string{strconv.FormatInt(max(d.Milliseconds(), 1), 10)}
	return secs
}
