package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/config"
	llmgw "github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/translate"
)

// llmGateway is the LLM gateway and its listeners: bound by bindLLM, served
// from serve on.
type llmGateway struct {
	g      *llmgw.Gateway
	log    *slog.Logger
	lns    []llmListener
	served chan error // one value per listener, when its Serve returns
	n      int        // how many listeners serve
}

type llmListener struct {
	ln    net.Listener
	spec  llmgw.Listener
	proto string
}

// llmOptions turns the llm section into gateway options.
func llmOptions(l *config.LLM, reg prometheus.Registerer, log *slog.Logger) (llmgw.Options, error) {
	keys, err := l.Keys()
	if err != nil {
		return llmgw.Options{}, fmt.Errorf("llm gateway keys: %w", err)
	}
	opts := llmgw.Options{
		MaxBodyBytes:    int64(l.MaxBodyBytes),
		BodyReadTimeout: l.BodyReadTimeout.Duration,
		Translate: translate.Options{
			DefaultMaxTokens: l.Translation.MaxTokensDefault,
			MaxTokensCap:     l.Translation.MaxTokensCap,
			Strict:           l.Translation.Strict,
		},
		Log:     log,
		Metrics: llmgw.NewMetrics(reg),
	}
	for _, k := range keys {
		gk := llmgw.Key{Name: k.Name, SHA256: k.SHA256, Models: k.Models, Routes: k.Routes}
		gk.Limits.RPM, gk.Limits.TPM = k.Limits.RPM, k.Limits.TPM
		if b := k.Limits.Budget; b != nil {
			gk.Limits.Budget = limits.Nanodollars(b.Dollars)
			if gk.Limits.Period, err = limits.ParsePeriod(b.Period); err != nil {
				return llmgw.Options{}, fmt.Errorf("llm key %s: %w", k.Name, err)
			}
		}
		opts.Keys = append(opts.Keys, gk)
	}
	for _, p := range l.Prices {
		opts.Prices = append(opts.Prices, llmgw.Price{Model: p.Model, Input: p.Input, Output: p.Output})
	}
	opts.Limits.RateLimits = llmgw.FailMode(l.Limits.OnStoreError.RateLimits)
	opts.Limits.Budgets = llmgw.FailMode(l.Limits.OnStoreError.Budgets)
	if l.Limits.RedisURL != "" {
		st, err := limits.NewRedis(limits.RedisOptions{URL: string(l.Limits.RedisURL), Timeout: l.Limits.Timeout.Duration})
		if err != nil {
			return llmgw.Options{}, fmt.Errorf("llm.limits.redis_url: %w", err)
		}
		opts.Limits.Store = st
	}
	for name, p := range l.Providers {
		gp := llmgw.Provider{
			Name:              name,
			Dialect:           translate.Dialect(p.Dialect),
			BaseURL:           p.BaseURL,
			APIKey:            string(p.APIKey),
			HTTP:              llmgw.HTTPVersion(p.HTTP),
			MaxConns:          p.MaxConns,
			ConnectTimeout:    p.ConnectTimeout.Duration,
			ResponseTimeout:   p.ResponseTimeout.Duration,
			RequestTimeout:    p.RequestTimeout.Duration,
			StreamIdleTimeout: p.StreamIdleTimeout.Duration,
		}
		if p.HTTP2Client == "net/http" {
			gp.HTTP2Client = llmgw.HTTP2NetHTTP
		}
		if p.HTTP1Client == "net/http" {
			gp.HTTP1Client = llmgw.HTTP1NetHTTP
		}
		if strings.HasPrefix(p.BaseURL, "https://") {
			tc, err := p.TLS.Build()
			if err != nil {
				return llmgw.Options{}, fmt.Errorf("llm.providers.%s.tls: %w", name, err)
			}
			gp.TLS = tc
		}
		opts.Providers = append(opts.Providers, gp)
	}
	for _, r := range l.Routes {
		gr := llmgw.Route{
			Name: r.RouteName(), Match: r.Match, Provider: r.Provider, Model: r.Model, Models: r.Models,
			Strategy: llmgw.Strategy(r.Strategy), Deadline: r.Deadline.Duration,
		}
		for _, t := range r.Targets {
			gr.Targets = append(gr.Targets, llmgw.Target{Name: t.Name, Provider: t.Provider, Model: t.Model, APIKey: string(t.APIKey), Weight: t.Weight})
		}
		if rt := r.Retry; rt != nil {
			gr.Retry = llmgw.Retry{Attempts: rt.Attempts, Backoff: rt.Backoff.Duration, MaxBackoff: rt.MaxBackoff.Duration}
			gr.Retry.OnStatus, gr.Retry.OnConnect, gr.Retry.OnTimeout, err = config.RetryOn(rt.On)
			if err != nil {
				return llmgw.Options{}, fmt.Errorf("llm route %s: retry.on: %w", gr.Name, err)
			}
		}
		if h := r.Health; h != nil {
			gr.Health = llmgw.Health{Failures: h.Failures, Window: h.Window.Duration, Cooldown: h.Cooldown.Duration}
		}
		opts.Routes = append(opts.Routes, gr)
	}
	return opts, nil
}

// bindLLM builds the LLM gateway and opens every listener of the llm
// section; serve starts serving them.
func bindLLM(l *config.LLM, reg prometheus.Registerer, log *slog.Logger) (*llmGateway, error) {
	opts, err := llmOptions(l, reg, log)
	if err != nil {
		return nil, err
	}
	g, err := llmgw.New(opts)
	if err != nil {
		if opts.Limits.Store != nil {
			opts.Limits.Store.Close()
		}
		return nil, err
	}
	lg := &llmGateway{g: g, log: log}
	for i, lc := range l.Listeners {
		var spec llmgw.Listener
		proto := "TLS: HTTP/1.1 and HTTP/2 by ALPN"
		if lc.TLS != nil {
			tc, err := lc.TLS.Build()
			if err != nil {
				lg.closeListeners()
				return nil, fmt.Errorf("llm.listeners[%d].tls: %w", i, err)
			}
			spec.TLS = tc
		} else {
			spec.HTTP1, spec.H2C = lc.Cleartext()
			spec.StraitH2C = lc.StraitH2C()
			spec.StraitHTTP1 = lc.StraitHTTP1()
			proto = strings.Join(lc.Protocols, ", ")
			switch {
			case spec.StraitH2C && spec.StraitHTTP1:
				proto += " (by Strait's HTTP/1.1 and HTTP/2 servers)"
			case spec.StraitH2C:
				proto += " (h2c by Strait's HTTP/2 server)"
			case spec.StraitHTTP1:
				proto += " (HTTP/1.1 by Strait's HTTP/1.1 server)"
			}
		}
		ln, err := net.Listen("tcp", lc.Listen)
		if err != nil {
			lg.closeListeners()
			return nil, listenError("llm listener", fmt.Sprintf("llm.listeners[%d].listen", i), lc.Listen, err)
		}
		lg.lns = append(lg.lns, llmListener{ln, spec, proto})
	}
	return lg, nil
}

// serve serves every listener bindLLM opened.
func (lg *llmGateway) serve() {
	lg.served = make(chan error, len(lg.lns))
	lg.n = len(lg.lns)
	for _, b := range lg.lns {
		go func() {
			err := lg.g.Serve(b.ln, b.spec)
			if err != nil {
				lg.log.Error("llm listener stopped", "addr", b.ln.Addr().String(), "err", err)
			}
			lg.served <- err
		}()
		lg.log.Info("llm gateway listening", "addr", b.ln.Addr().String(), "protocols", b.proto)
	}
	lg.lns = nil
}

// closeListeners closes the listeners that are bound but not served.
func (lg *llmGateway) closeListeners() {
	for _, b := range lg.lns {
		b.ln.Close()
	}
	lg.lns = nil
}

func (lg *llmGateway) ready() error { return lg.g.Ready() }

// stop drains the LLM gateway: requests in flight, streams included, may
// finish until ctx is done. Listeners never served are just closed.
func (lg *llmGateway) stop(ctx context.Context) error {
	lg.closeListeners()
	err := lg.g.Shutdown(ctx)
	var errs []error
	for range lg.n {
		if e := <-lg.served; e != nil {
			errs = append(errs, e)
		}
	}
	return errors.Join(append(errs, err)...)
}
