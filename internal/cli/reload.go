package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/config"
	"github.com/straitgw/strait/internal/kafka/filter"
)

// reloader applies a changed config file to a running gateway: the new
// file is loaded and its filters built exactly as at start (every error
// reported, nothing applied if there is one), then each filter whose
// settings changed takes them over while it runs (filter.Reloader), on
// every connection, none closed. A change anything else would need (a
// listener, a cluster, a filter that cannot reload, a filter added or
// removed) is refused whole, with what changed, and the running config
// stays.
type reloader struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	cfg     *config.Config
	filters map[string][]filter.Filter // the running filters, by virtual cluster

	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// Outcomes of strait_config_reloads_total.
const (
	reloadApplied   = "applied"
	reloadUnchanged = "unchanged"
	reloadInvalid   = "invalid"
	reloadRefused   = "restart_needed"
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
	for _, o := range []string{reloadApplied, reloadUnchanged, reloadInvalid, reloadRefused} {
		r.reloads.WithLabelValues(o)
	}
	r.lastSuccess.SetToCurrentTime()
	return r
}

// register adds the reload metrics to reg.
func (r *reloader) register(reg prometheus.Registerer) {
	reg.MustRegister(r.reloads, r.lastSuccess)
}

// reload loads the config file again and applies it; the error says why
// nothing was applied.
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
	var applies []func()
	var changed []string
	for i, vc := range cfg.VirtualClusters {
		for j, fc := range vc.Filters {
			if sameYAML(r.cfg.VirtualClusters[i].Filters[j], fc) {
				continue
			}
			at := fmt.Sprintf("virtual_clusters[%d].filters[%d] (%s)", i, j, fc.Type)
			old := r.filters[vc.Name][j]
			rl, ok := old.(filter.Reloader)
			if !ok {
				return r.refuse(reloadRefused, fmt.Errorf("%s changed, and a %s filter cannot change while it runs: restart Strait to apply it; nothing was applied", at, fc.Type))
			}
			apply, err := rl.PrepareReload(b.filters[vc.Name][j])
			if err != nil {
				return r.refuse(reloadRefused, fmt.Errorf("%s: %w; nothing was applied", at, err))
			}
			applies = append(applies, apply)
			changed = append(changed, at)
		}
	}
	if len(applies) == 0 {
		r.reloads.WithLabelValues(reloadUnchanged).Inc()
		r.log.Info("config reloaded: nothing changed", "config", r.path)
		return nil
	}
	for _, apply := range applies {
		apply()
	}
	// The running filters stay (connections hold them); the config they
	// now follow is the new one.
	r.cfg = cfg
	r.reloads.WithLabelValues(reloadApplied).Inc()
	r.lastSuccess.SetToCurrentTime()
	r.log.Info("config reloaded", "config", r.path, "changed", changed)
	return nil
}

func (r *reloader) refuse(outcome string, err error) error {
	r.reloads.WithLabelValues(outcome).Inc()
	r.log.Error("config reload refused", "config", r.path, "err", err)
	return err
}

// needsRestart names the first part of the config that differs between a
// and b other than filter settings, or returns "".
func needsRestart(a, b *config.Config) string {
	av, bv := reflect.ValueOf(*a), reflect.ValueOf(*b)
	t := av.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Name == "VirtualClusters" {
			if what := vcsNeedRestart(a.VirtualClusters, b.VirtualClusters); what != "" {
				return what
			}
			continue
		}
		if !sameYAML(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return name
		}
	}
	return ""
}

func vcsNeedRestart(a, b []*config.VirtualCluster) string {
	if len(a) != len(b) {
		return "virtual_clusters (one added or removed)"
	}
	for i := range a {
		x, y := *a[i], *b[i]
		at := fmt.Sprintf("virtual_clusters[%d] (%s)", i, x.Name)
		if len(x.Filters) != len(y.Filters) {
			return at + ".filters (one added or removed)"
		}
		for j := range x.Filters {
			if x.Filters[j].Type != y.Filters[j].Type {
				return fmt.Sprintf("%s.filters[%d].type", at, j)
			}
		}
		x.Filters, y.Filters = nil, nil
		if !sameYAML(x, y) {
			return at
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
	tag := f.Tag.Get("yaml")
	if i := bytes.IndexByte([]byte(tag), ','); i >= 0 {
		tag = tag[:i]
	}
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
