package deploy_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitgw/strait/internal/cli"
	"github.com/straitgw/strait/internal/kafka/filters/authz"
	"github.com/straitgw/strait/internal/kafka/filters/encryption"
	"github.com/straitgw/strait/internal/kafka/filters/validation"
	"github.com/straitgw/strait/internal/kafka/passthrough"
	"github.com/straitgw/strait/internal/kms"
	llmgw "github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

// runStraitEnv makes the test binary run strait instead of the tests, so
// that a test can start `strait run` without building it.
const runStraitEnv = "STRAIT_DEPLOY_TEST_RUN_STRAIT"

func TestMain(m *testing.M) {
	if os.Getenv(runStraitEnv) == "1" {
		os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const dashboardFile = "grafana/strait.json"

// metricType is what a name is registered as; "" when the collector does
// not say (a filter that collects for a vector of its own).
type metricType string

const (
	counter   metricType = "counter"
	gauge     metricType = "gauge"
	histogram metricType = "histogram"
	summary   metricType = "summary"
	untyped   metricType = ""
)

// family is a registered metric: its type and label names.
type family struct {
	typ    metricType
	labels []string
	from   string // where it was found, for messages
}

// recorder is a Registerer that keeps what is registered with it, as the
// gateway registers its metrics.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.reg.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
)

// typeOf is a collector's metric type, from its Go type.
func typeOf(c prometheus.Collector) metricType {
	switch c.(type) {
	case *prometheus.CounterVec, prometheus.Counter, prometheus.CounterFunc:
		return counter
	case *prometheus.GaugeVec, prometheus.Gauge, prometheus.GaugeFunc:
		return gauge
	case *prometheus.HistogramVec, prometheus.Histogram:
		return histogram
	case *prometheus.SummaryVec, prometheus.Summary:
		return summary
	}
	return untyped
}

// describe adds the metrics c describes to fams.
func describe(fams map[string]*family, c prometheus.Collector, from string) {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		f := &family{typ: typeOf(c), from: from}
		for _, part := range []*regexp.Regexp{descLabels, descConst} {
			if l := part.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, name := range strings.Split(l[1], ",") {
					name, _, _ = strings.Cut(name, "=")
					name = strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")")
					f.labels = append(f.labels, name)
				}
			}
		}
		fams[m[1]] = f
	}
}

// registeredMetrics builds the registry as the gateway does and returns
// every metric in it: the process registry (Go and process collectors,
// suppressed log lines), the Kafka proxy's metrics, the LLM gateway's, the
// collectors of the filters that keep metrics (their types' own Describe),
// the KMS call counter, the TLS passthrough listeners'; and what a running
// `strait run` exposes on /metrics (the reload metrics live in the command
// itself).
func registeredMetrics(t *testing.T) map[string]*family {
	t.Helper()
	fams := map[string]*family{}
	reg := telemetry.NewRegistry()
	rec := &recorder{reg: reg}
	telemetry.NewKafkaMetrics(rec)
	passthrough.NewMetrics(rec)
	llmgw.NewMetrics(rec)
	for _, c := range []prometheus.Collector{(*authz.Filter)(nil), (*validation.Filter)(nil), (*encryption.Filter)(nil), kms.Calls} {
		var dup prometheus.AlreadyRegisteredError
		if err := rec.Register(c); err != nil && !errors.As(err, &dup) {
			t.Fatal(err)
		}
	}
	for _, c := range rec.collectors {
		describe(fams, c, fmt.Sprintf("%T", c))
	}
	// What NewRegistry registered itself: the families it gathers now,
	// with their types. The count of log lines the throttle held back is
	// a vector with no series until a line is held back: hold one back.
	log, err := telemetry.NewLogger(io.Discard, "warn", "text")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		log.Warn("a line repeated for one client", "client", "192.0.2.1:1234")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, ok := fams[mf.GetName()]; ok {
			continue
		}
		f := &family{typ: metricType(strings.ToLower(mf.GetType().String())), from: "telemetry.NewRegistry"}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(f.labels, l.GetName()) {
					f.labels = append(f.labels, l.GetName())
				}
			}
		}
		fams[mf.GetName()] = f
	}
	for name, f := range scrapeRunningStrait(t) {
		if _, ok := fams[name]; !ok {
			fams[name] = f
		}
	}
	return fams
}

// scrapeRunningStrait starts `strait run` (this test binary, see TestMain)
// with a virtual cluster and the LLM gateway, and reads the metric families
// its /metrics lists, with their types and labels.
func scrapeRunningStrait(t *testing.T) map[string]*family {
	t.Helper()
	base := testkit.PortBlock(t, 4)
	admin, kafka, llm := testkit.Addr(base), testkit.Addr(base+1), testkit.Addr(base+3)
	cfg := fmt.Sprintf(`admin: {listen: %q}
shutdown: {drain_timeout: 1s}
clusters:
  local: {bootstrap_servers: ["127.0.0.1:1"], connect_timeout: 200ms}
virtual_clusters:
  - name: vc
    cluster: local
    listen: %q
    node_ports: {start: %d, end: %d}
llm:
  listeners: [{listen: %q}]
  api_keys: [{name: k, sha256: 82d9b73d98267c13fa11c4f3a2fdf95b71a04e20d6596760f3bfbf0092ece1e8}]
  providers:
    p: {dialect: openai, base_url: "http://127.0.0.1:1"}
  routes: [{match: "*", provider: p}]
`, admin, kafka, base+2, base+2, llm)
	path := filepath.Join(t.TempDir(), "strait.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "run", "-c", path)
	cmd.Env = append(os.Environ(), runStraitEnv+"=1")
	var stderr testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("strait run:\n%s", stderr.String())
		}
	})
	var body []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("strait run exited:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strait run's /metrics did not answer: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	fams := map[string]*family{}
	sampleLine := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? `)
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			fams[f[2]] = &family{typ: metricType(f[3]), from: "strait run /metrics"}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		name := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if f := fams[strings.TrimSuffix(name, suffix)]; f != nil && (f.typ == histogram || f.typ == summary) {
				name = strings.TrimSuffix(name, suffix)
			}
		}
		if f := fams[name]; f != nil {
			for _, l := range labelName.FindAllStringSubmatch(m[3], -1) {
				if l[1] != "le" && l[1] != "quantile" && !slices.Contains(f.labels, l[1]) {
					f.labels = append(f.labels, l[1])
				}
			}
		}
	}
	// The reload metrics are the command's own: if the scrape lost them,
	// it did not read what it should.
	for _, want := range []string{"strait_config_reloads_total", "strait_config_last_reload_success_timestamp_seconds"} {
		if fams[want] == nil {
			t.Fatalf("strait run's /metrics has no %s:\n%s", want, body)
		}
	}
	return fams
}

// targetLabels are the labels Prometheus adds to every series it scrapes
// (the chart's ServiceMonitor and the usual scrape configs).
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// prometheusSeries are series Prometheus makes itself for each target.
var prometheusSeries = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"}

// resolve names the registered family a name in a query refers to: the
// name itself, or a histogram or summary's _bucket, _sum or _count series.
// Counters are registered with their _total, so that suffix is never
// stripped.
func resolveMetric(fams map[string]*family, name string) (*family, []string, error) {
	if f := fams[name]; f != nil {
		switch f.typ {
		case histogram:
			return nil, nil, fmt.Errorf("%s is a histogram: query its _bucket, _sum or _count series", name)
		case summary:
			return f, []string{"quantile"}, nil
		}
		return f, nil, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f := fams[base]
		switch {
		case f == nil:
		case f.typ == histogram || f.typ == summary && suffix != "_bucket":
			if suffix == "_bucket" {
				return f, []string{"le"}, nil
			}
			return f, nil, nil
		case f.typ == untyped:
			return nil, nil, fmt.Errorf("%s: %s is registered by a collector (%s) that does not say its type, so %s cannot be checked", name, base, f.from, suffix)
		default:
			return nil, nil, fmt.Errorf("%s: %s is a %s, which has no %s series", name, base, f.typ, suffix)
		}
	}
	return nil, nil, fmt.Errorf("no metric %s is registered", name)
}

// dashboardQueries returns every PromQL expression of the dashboard, by
// where it is: panel targets (rows' nested panels too) and the metrics of
// template variables' label_values(...).
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string]string{}
	type panel struct {
		Title   string
		Panels  []json.RawMessage
		Targets []struct {
			RefID string
			Expr  string
		}
	}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: a panel: %v", dashboardFile, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out[fmt.Sprintf("panel %q query %s", p.Title, tg.RefID)] = tg.Expr
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		var qo struct{ Query string }
		if json.Unmarshal(v.Query, &q) != nil {
			if err := json.Unmarshal(v.Query, &qo); err != nil {
				t.Fatalf("variable %s: query: %v", v.Name, err)
			}
			q = qo.Query
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Fatalf("variable %s: query %q: the test reads label_values(metric, label) only", v.Name, q)
		}
		out[fmt.Sprintf("variable %s", v.Name)] = fmt.Sprintf("group by (%s) (%s)", m[2], m[1])
	}
	return out
}

// checkQueries checks each query's metrics and labels against fams.
func checkQueries(fams map[string]*family, queries map[string]string) []string {
	var problems []string
	for _, where := range slices.Sorted(maps.Keys(queries)) {
		expr := queries[where]
		q, err := parsePromQL(expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		if len(q.selectors) == 0 {
			problems = append(problems, fmt.Sprintf("%s selects no metric: %s", where, expr))
		}
		known := slices.Clone(targetLabels)
		for _, s := range q.selectors {
			if s.name == "" {
				problems = append(problems, fmt.Sprintf("%s: select metrics by name, so that the name can be checked: %s", where, expr))
				continue
			}
			if slices.Contains(prometheusSeries, s.name) {
				continue
			}
			f, extra, err := resolveMetric(fams, s.name)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			labels := append(append(slices.Clone(f.labels), extra...), targetLabels...)
			for _, l := range s.labels {
				if !slices.Contains(labels, l) {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s (it has %s)", where, s.name, l, strings.Join(f.labels, ", ")))
				}
			}
			known = append(known, labels...)
		}
		for _, l := range q.grouping {
			if !slices.Contains(known, l) {
				problems = append(problems, fmt.Sprintf("%s: groups by %s, which none of its metrics has", where, l))
			}
		}
	}
	return problems
}

// TestDashboardQueriesNameRegisteredMetrics: every metric and label the
// dashboard's queries use is one the code registers.
func TestDashboardQueriesNameRegisteredMetrics(t *testing.T) {
	fams := registeredMetrics(t)
	queries := dashboardQueries(t)
	if len(queries) < 30 {
		t.Fatalf("only %d queries read from %s: the test no longer reads the dashboard's layout", len(queries), dashboardFile)
	}
	for _, p := range checkQueries(fams, queries) {
		t.Error(p)
	}

	// The check itself: names and labels that do not exist are caught.
	for expr, want := range map[string]string{
		`sum(rate(strait_kafka_request_total[5m]))`:                                    "no metric strait_kafka_request_total",
		`rate(strait_kafka_connections_open_total[5m])`:                                "no metric strait_kafka_connections_open_total",
		`rate(strait_kafka_requests[5m])`:                                              "no metric strait_kafka_requests",
		`strait_kafka_upstream_latency_seconds`:                                        "query its _bucket, _sum or _count",
		`rate(strait_kafka_requests_total_bucket[5m])`:                                 "strait_kafka_requests_total is a counter, which has no _bucket series",
		`sum by (topic) (rate(strait_kafka_requests_total[5m]))`:                       "groups by topic",
		`rate(strait_llm_requests_total{virtual_cluster="x"}[5m])`:                     "has no label virtual_cluster",
		`histogram_quantile(0.9, rate(strait_kms_calls_total_bucket[5m]))`:             "has no _bucket series",
		`histogram_quantile(0.9, rate(strait_kafka_authz_decisions_bucket[5m]))`:       "no metric strait_kafka_authz_decisions_bucket",
		`sum by (le) (rate(strait_kafka_upstream_latency_seconds_bucket{le="1"}[5m]))`: "",
	} {
		problems := checkQueries(fams, map[string]string{"probe": expr})
		switch {
		case want == "" && len(problems) != 0:
			t.Errorf("%s: %v, want no problem", expr, problems)
		case want != "" && (len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), want)):
			t.Errorf("%s: %v, want a problem saying %q", expr, problems, want)
		}
	}
}

// TestDashboardLayout: what Grafana needs to import the dashboard into any
// Prometheus data source: unique panel ids, panels inside the 24-column
// grid, every query panel on the ${datasource} variable.
func TestDashboardLayout(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Title  string
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource *struct{ Type, UID string }
			GridPos    struct{ H, W, X, Y int }
			Targets    []json.RawMessage
		}
		Templating struct{ List []struct{ Name, Type string } }
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	hasDS := false
	for _, v := range d.Templating.List {
		hasDS = hasDS || v.Name == "datasource" && v.Type == "datasource"
	}
	if !hasDS {
		t.Error("no datasource variable: the dashboard would be tied to one data source")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: want queries on the ${datasource} variable", p.Title)
		}
	}
}
