package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/config"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/passthrough"
	"github.com/straitgw/strait/internal/kafka/proxy"
)

// reloader applies a changed config file to a running gateway (SIGHUP, a
// change to the file, POST /-/reload): the new file is loaded and its
// filters built exactly as at start (every error reported, nothing applied
// if there is one), then applied virtual cluster by virtual cluster (see
// reload).
type reloader struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	cfg     *config.Config
	filters map[string][]filter.Filter // the running filters, by virtual cluster
	g       *gateway                   // nil until attach

	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// Outcomes of strait_config_reloads_total.
const (
	reloadApplied   = "applied"
	reloadUnchanged = "unchanged"
	reloadInvalid   = "invalid"
	reloadRefused   = "restart_needed"
	reloadFailed    = "failed" // applied in part: a virtual cluster could not start
)

func newReloader(path string, cfg *config.Config, b *built, log *slog.Logger) *reloader {
	r := &reloader{
		path: path, log: log, cfg: cfg, filters: b.filters,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strait_config_reloads_total",
			Help: "Config reloads by outcome: applied, unchanged, invalid (the new file has errors) or restart_needed (it changes what cannot change while running).",
		}, []string{"outcome"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strait_config_last_reload_success_timestamp_seconds",
			Help: "When the running config was last loaded (at start or by a reload), in Unix seconds.",
		}),
	}
	for _, o := range []string{reloadApplied, reloadUnchanged, reloadInvalid, reloadRefused, reloadFailed} {
		r.reloads.WithLabelValues(o)
	}
	r.lastSuccess.SetToCurrentTime()
	return r
}

// register adds the reload metrics to reg.
func (r *reloader) register(reg prometheus.Registerer) {
	reg.MustRegister(r.reloads, r.lastSuccess)
}

// attach gives the reloader the running gateway, whose virtual clusters
// it may then add, replace and remove.
func (r *reloader) attach(g *gateway) {
	r.mu.Lock()
	r.g = g
	r.mu.Unlock()
}

// vcPlan is what a reload does to one virtual cluster.
type vcPlan struct {
	name     string
	old      *proxy.VirtualCluster // nil: added
	next     *proxy.VirtualCluster // nil: kept or removed
	filters  []filter.Filter       // the filters it runs after the reload
	applies  []func()              // filter settings taken while running
	changed  []string
	why      string // replaced or added: what changed
	removing bool
}

// reload loads the config file again and applies it; the error says why
// nothing was applied.
//
// Virtual clusters whose settings did not change keep their connections;
// their filters take new settings while running where they can
// (filter.Reloader). One whose settings changed (or whose filter cannot
// take its new settings) is replaced: the old one stops accepting and
// drains its connections within shutdown.drain_timeout while the new one
// serves new connections on the same ports. Removed ones drain and close;
// added ones start. Anything else (admin, log, llm, tls_passthrough) takes
// a restart, and the reload is refused whole.
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, b, err := loadConfig(r.path)
	if err != nil {
		return r.refuse(reloadInvalid, fmt.Errorf("the new config is not valid, so the running one stays:\n%w", err))
	}
	if what := needsRestart(r.cfg, cfg); what != "" {
		return r.refuse(reloadRefused, fmt.Errorf("%s changed, which takes a restart; nothing was applied (the running config stays)", what))
	}
	plans, err := r.plan(cfg, b)
	if err != nil {
		return r.refuse(reloadRefused, err)
	}
	changed := 0
	for _, p := range plans {
		if p.next != nil || p.removing || len(p.applies) > 0 {
			changed++
		}
	}
	if !sameYAML(r.cfg.TLSPassthrough, cfg.TLSPassthrough) {
		changed++
	}
	if changed == 0 {
		for _, p := range plans {
			p.closeUnused()
		}
		r.cfg = cfg
		r.reloads.WithLabelValues(reloadUnchanged).Inc()
		r.log.Info("config reloaded: nothing changed", "config", r.path)
		return nil
	}
	errs := r.apply(cfg, plans)
	if err := r.reloadPassthrough(cfg); err != nil {
		errs = errors.Join(errs, err)
	}
	r.cfg = cfg
	if errs != nil {
		r.reloads.WithLabelValues(reloadFailed).Inc()
		r.log.Error("config reload applied in part", "config", r.path, "err", errs)
		return errs
	}
	r.reloads.WithLabelValues(reloadApplied).Inc()
	r.lastSuccess.SetToCurrentTime()
	return nil
}

// plan decides what the reload does to each virtual cluster, building the
// new ones, before anything changes.
func (r *reloader) plan(cfg *config.Config, b *built) ([]*vcPlan, error) {
	oldCfg := map[string]*config.VirtualCluster{}
	for _, vc := range r.cfg.VirtualClusters {
		oldCfg[vc.Name] = vc
	}
	running := map[string]*proxy.VirtualCluster{}
	if r.g != nil {
		for _, vc := range r.g.virtualClusters() {
			running[vc.Name()] = vc
		}
	}
	var plans []*vcPlan
	fail := func(err error) ([]*vcPlan, error) {
		for _, p := range plans {
			p.closeUnused()
		}
		return nil, err
	}
	for i, vc := range cfg.VirtualClusters {
		p := &vcPlan{name: vc.Name, old: running[vc.Name], filters: b.filters[vc.Name]}
		plans = append(plans, p)
		prev, ok := oldCfg[vc.Name]
		if ok {
			p.why = vcChange(r.cfg, prev, cfg, vc)
		} else {
			p.why = "added"
		}
		if p.why == "" {
			// Same settings: the running filters stay, and take their
			// new settings where those changed.
			p.filters = r.filters[vc.Name]
			for j, fc := range vc.Filters {
				if sameYAML(prev.Filters[j], fc) {
					continue
				}
				at := fmt.Sprintf("virtual_clusters[%d].filters[%d] (%s)", i, j, fc.Type)
				rl, ok := p.filters[j].(filter.Reloader)
				var apply func()
				var err error
				if ok {
					apply, err = rl.PrepareReload(b.filters[vc.Name][j])
				}
				if !ok || err != nil {
					// It cannot change while running: replace the
					// virtual cluster, which restarts its filters.
					p.why, p.applies, p.changed = at+" changed", nil, nil
					p.filters = b.filters[vc.Name]
					break
				}
				p.applies = append(p.applies, apply)
				p.changed = append(p.changed, at)
			}
		}
		if p.why != "" {
			if r.g == nil {
				return fail(fmt.Errorf("virtual cluster %s: %s, which takes a restart; nothing was applied", vc.Name, p.why))
			}
			next, err := r.g.newVC(cfg, vc, b)
			if err != nil {
				return fail(fmt.Errorf("virtual cluster %s: %w; nothing was applied", vc.Name, err))
			}
			p.next = next
		}
	}
	kept := map[string]bool{}
	for _, vc := range cfg.VirtualClusters {
		kept[vc.Name] = true
	}
	for name, vc := range running {
		if !kept[name] {
			plans = append(plans, &vcPlan{name: name, old: vc, removing: true, why: "removed"})
		}
	}
	return plans, nil
}

// closeUnused releases what a plan built but did not start.
func (p *vcPlan) closeUnused() {
	if p.next != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.next.Shutdown(ctx)
	}
}

// apply carries the plans out: filter settings first (they cannot fail),
// then replacements, removals and additions. A virtual cluster that
// cannot start (its port taken by something else) is reported; the others
// go ahead.
func (r *reloader) apply(cfg *config.Config, plans []*vcPlan) error {
	var errs []error
	filters := map[string][]filter.Filter{}
	var running []*proxy.VirtualCluster
	drain := cfg.Shutdown.DrainTimeout.Duration
	for _, p := range plans {
		for _, apply := range p.applies {
			apply()
		}
		if len(p.changed) > 0 {
			r.log.Info("config reloaded: filter settings changed", "virtual_cluster", p.name, "changed", p.changed)
		}
		switch {
		case p.removing:
			p.old.StopAccepting()
			go drainOld(p.old, drain)
			r.log.Info("config reloaded: virtual cluster removed; draining its connections", "virtual_cluster", p.name, "drain_timeout", drain)
			continue
		case p.next != nil:
			if p.old != nil {
				p.old.StopAccepting()
			}
			if err := p.next.Start(); err != nil {
				errs = append(errs, fmt.Errorf("virtual cluster %s (%s): %w", p.name, p.why, err))
				if p.old != nil {
					// Its listeners are closed; drain it rather than keep a
					// virtual cluster no client can reach again.
					go drainOld(p.old, drain)
				}
				continue
			}
			if p.old != nil {
				go drainOld(p.old, drain)
				r.log.Info("config reloaded: virtual cluster replaced; new connections get the new settings, the old ones drain", "virtual_cluster", p.name, "changed", p.why, "drain_timeout", drain)
			} else {
				r.log.Info("config reloaded: virtual cluster added", "virtual_cluster", p.name)
			}
			running = append(running, p.next)
		default:
			if p.old != nil {
				running = append(running, p.old)
			}
		}
		filters[p.name] = p.filters
	}
	r.filters = filters
	if r.g != nil {
		registerFilterMetrics(r.g.reg, filters)
		r.g.mu.Lock()
		r.g.vcs = running
		r.g.mu.Unlock()
	}
	return errors.Join(errs...)
}

// reloadPassthrough replaces the TLS passthrough listeners whose settings
// changed (the old one stops accepting and its relayed connections close
// within the drain timeout while the new one binds the port), closes
// removed ones and starts added ones.
func (r *reloader) reloadPassthrough(cfg *config.Config) error {
	if r.g == nil || sameYAML(r.cfg.TLSPassthrough, cfg.TLSPassthrough) {
		return nil
	}
	prev := map[string]*config.TLSPassthrough{}
	for _, tp := range r.cfg.TLSPassthrough {
		prev[tp.Name] = tp
	}
	running := map[string]*passthrough.Listener{}
	for _, l := range r.g.passListeners() {
		running[l.Name()] = l
	}
	drain := cfg.Shutdown.DrainTimeout.Duration
	stop := func(l *passthrough.Listener) {
		l.StopAccepting()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			l.Shutdown(ctx)
		}()
	}
	var errs []error
	var next []*passthrough.Listener
	kept := map[string]bool{}
	for _, tp := range cfg.TLSPassthrough {
		kept[tp.Name] = true
		old := running[tp.Name]
		if old != nil && sameYAML(prev[tp.Name], tp) {
			next = append(next, old)
			continue
		}
		if old != nil {
			stop(old)
		}
		l, err := passthrough.Listen(r.g.passOptions(tp))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("config reloaded: TLS passthrough listener started", "tls_passthrough", tp.Name, "replaced", old != nil)
		next = append(next, l)
	}
	for name, l := range running {
		if !kept[name] {
			stop(l)
			r.log.Info("config reloaded: TLS passthrough listener removed", "tls_passthrough", name)
		}
	}
	r.g.mu.Lock()
	r.g.pass = next
	r.g.mu.Unlock()
	return errors.Join(errs...)
}

// drainOld drains a virtual cluster a reload replaced or removed.
func drainOld(vc *proxy.VirtualCluster, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	vc.Shutdown(ctx)
}

// vcChange says what changed in virtual cluster vc between two configs
// that takes a new virtual cluster (its settings, its filter types, its
// cluster's settings), or "" when only filter settings did.
func vcChange(oldCfg *config.Config, prev *config.VirtualCluster, cfg *config.Config, vc *config.VirtualCluster) string {
	if len(prev.Filters) != len(vc.Filters) {
		return "filters (one added or removed)"
	}
	for j := range vc.Filters {
		if prev.Filters[j].Type != vc.Filters[j].Type {
			return fmt.Sprintf("filters[%d].type", j)
		}
	}
	x, y := *prev, *vc
	x.Filters, y.Filters = nil, nil
	if !sameYAML(x, y) {
		return "its settings"
	}
	if !sameYAML(oldCfg.Clusters[prev.Cluster], cfg.Clusters[vc.Cluster]) {
		return "clusters." + vc.Cluster
	}
	return ""
}

func (r *reloader) refuse(outcome string, err error) error {
	r.reloads.WithLabelValues(outcome).Inc()
	r.log.Error("config reload refused", "config", r.path, "err", err)
	return err
}

// needsRestart names the first part of the config outside virtual
// clusters, clusters and passthrough listeners that differs between a and
// b, or returns "".
func needsRestart(a, b *config.Config) string {
	av, bv := reflect.ValueOf(*a), reflect.ValueOf(*b)
	t := av.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if !f.IsExported() || name == "-" || f.Name == "VirtualClusters" || f.Name == "Clusters" || f.Name == "TLSPassthrough" {
			continue
		}
		if !sameYAML(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return name
		}
	}
	return ""
}

// sameYAML compares two config values as YAML, so that where a setting
// sits in the file (yaml.Node positions) does not count as a change.
func sameYAML(a, b any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "" {
		return f.Name
	}
	return tag
}

// handler is POST /-/reload: 200 with "reloaded" when the reload applied
// (or found nothing to change), 400 with the reason when it did not.
func (r *reloader) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := r.reload(); err != nil {
			http.Error(w, "config not reloaded: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "reloaded")
	})
}

// watchFile reloads when the config file changes: it watches the file's
// directory (editors replace files by renaming, and a Kubernetes ConfigMap
// swaps a symlink), waits for changes to settle, and reloads if the file's
// content differs from what was last loaded.
func (r *reloader) watchFile(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(r.path)); err != nil {
		w.Close()
		return err
	}
	last, _ := os.ReadFile(r.path)
	go func() {
		defer w.Close()
		var settle <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				r.log.Warn("watching the config file", "config", r.path, "err", err)
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				settle = time.After(300 * time.Millisecond)
			case <-settle:
				settle = nil
				b, err := os.ReadFile(r.path)
				if err != nil || bytes.Equal(b, last) {
					continue
				}
				last = b
				r.log.Info("the config file changed: reloading", "config", r.path)
				_ = r.reload() // logged and counted
			}
		}
	}()
	return nil
}

// reloadOnSIGHUP reloads on every SIGHUP until ctx ends.
func (r *reloader) reloadOnSIGHUP(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ch:
				r.log.Info("SIGHUP: reloading the config", "config", r.path)
				_ = r.reload() // logged and counted
			case <-ctx.Done():
				return
			}
		}
	}()
}
