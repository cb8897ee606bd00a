package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
	"go.yaml.in/yaml/v3"
)

// HelmModule is the helm the chart is tested with; test/interop/install-deps.sh
// installs this one (go install).
const HelmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// kubeVersion is the Kubernetes version the chart is rendered for. A helm
// built by go install has no version of its own to default to (it says
// v1.20), below the chart's kubeVersion.
const kubeVersion = "1.31.0"

const chartDir = "helm/strait"

// valuesFiles are the values the chart is rendered with, each a config of a
// different shape.
var valuesFiles = []string{"testdata/passthrough.yaml", "testdata/tls-sasl.yaml", "testdata/edge.yaml"}

// helmBinary finds helm: $STRAIT_HELM, then PATH, then go install's
// directory. Without it the test is skipped, or failed under
// STRAIT_REQUIRE_INTEROP=1.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STRAIT_HELM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	gobin := os.Getenv("GOBIN")
	if gobin == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gobin = filepath.Join(strings.TrimSpace(strings.Split(string(out), string(os.PathListSeparator))[0]), "bin")
		}
	}
	p := filepath.Join(gobin, "helm")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	testkit.Missing(t, "helm is not installed (go install "+HelmModule+", or sh test/interop/install-deps.sh)")
	return ""
}

// helm runs helm with args in this directory and returns its output, or an
// error holding its stderr.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No repositories, plugins or caches of the machine's user.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// obj is a decoded YAML mapping.
type obj = map[string]any

// rendered is the chart's output for one set of values.
type rendered struct {
	values obj // the values file, decoded
	config obj // its config
	docs   []obj
}

// render runs helm template on chart with the values file and extra flags.
func render(t *testing.T, chart, valuesFile string, flags ...string) (*rendered, error) {
	t.Helper()
	args := append([]string{"template", "strait", chart, "--namespace", "gateway", "--kube-version", kubeVersion, "-f", valuesFile}, flags...)
	out, err := helm(t, args...)
	if err != nil {
		return nil, err
	}
	// What the chart sees: its values.yaml with the file's values merged
	// over it, as helm merges them.
	r := &rendered{values: merge(readYAML(t, filepath.Join(chart, "values.yaml")), readYAML(t, valuesFile))}
	r.config, _ = r.values["config"].(obj)
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var d obj
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("rendered manifests are not YAML: %v\n%s", err, out)
		}
		if d != nil {
			r.docs = append(r.docs, d)
		}
	}
	return r, nil
}

// merge returns over merged onto base as helm merges values: mappings key
// by key, anything else replaced, null deleting the key.
func merge(base, over obj) obj {
	out := maps.Clone(base)
	for k, v := range over {
		switch {
		case v == nil:
			delete(out, k)
		default:
			bm, ok1 := out[k].(obj)
			om, ok2 := v.(obj)
			if ok1 && ok2 {
				out[k] = merge(bm, om)
			} else {
				out[k] = v
			}
		}
	}
	return out
}

func mustRender(t *testing.T, valuesFile string, flags ...string) *rendered {
	t.Helper()
	r, err := render(t, chartDir, valuesFile, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readYAML(t *testing.T, path string) obj {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v obj
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// all returns the documents of kind.
func (r *rendered) all(kind string) []obj {
	var out []obj
	for _, d := range r.docs {
		if d["kind"] == kind {
			out = append(out, d)
		}
	}
	return out
}

// one returns the only document of kind, or nil and a problem.
func (r *rendered) one(kind string) (obj, error) {
	all := r.all(kind)
	if len(all) != 1 {
		return nil, fmt.Errorf("%d %s manifests rendered, want 1", len(all), kind)
	}
	return all[0], nil
}

// dig follows keys through nested mappings.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func list(v any) []obj {
	items, _ := v.([]any)
	out := make([]obj, 0, len(items))
	for _, it := range items {
		if m, ok := it.(obj); ok {
			out = append(out, m)
		}
	}
	return out
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

// container returns the named container of the Deployment's pod.
func (r *rendered) container(name string) (obj, error) {
	d, err := r.one("Deployment")
	if err != nil {
		return nil, err
	}
	for _, c := range list(dig(d, "spec", "template", "spec", "containers")) {
		if c["name"] == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("the Deployment has no container %q", name)
}

// listenPort is the port of a host:port listen address.
func listenPort(addr any) (int, error) {
	s, _ := addr.(string)
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return 0, fmt.Errorf("listen %q: %v", s, err)
	}
	return strconv.Atoi(port)
}

// expectedPorts is every port the config listens on, as Strait reads it:
// the admin port, and the client ports (virtual clusters' listen ports and
// their node ports, with node_ports' defaults; one port for a virtual
// cluster routed by SNI; TLS passthrough listeners; LLM listeners).
func expectedPorts(cfg obj) (admin int, client []int, err error) {
	if admin, err = listenPort(dig(cfg, "admin", "listen")); err != nil {
		return 0, nil, err
	}
	add := func(p int) {
		if p != admin && !slices.Contains(client, p) {
			client = append(client, p)
		}
	}
	for _, vc := range list(cfg["virtual_clusters"]) {
		p, err := listenPort(vc["listen"])
		if err != nil {
			return 0, nil, err
		}
		add(p)
		if _, sni := vc["sni"]; sni {
			continue
		}
		start, end := p+1, 0
		if s := toInt(dig(vc, "node_ports", "start")); s != 0 {
			start = s
		}
		end = min(start+999, 65535)
		if e := toInt(dig(vc, "node_ports", "end")); e != 0 {
			end = e
		}
		for n := start; n <= end; n++ {
			add(n)
		}
	}
	for _, tp := range list(cfg["tls_passthrough"]) {
		p, err := listenPort(tp["listen"])
		if err != nil {
			return 0, nil, err
		}
		add(p)
	}
	for _, l := range list(dig(cfg, "llm", "listeners")) {
		p, err := listenPort(l["listen"])
		if err != nil {
			return 0, nil, err
		}
		add(p)
	}
	slices.Sort(client)
	return admin, client, nil
}

// checkPorts compares the Deployment's container ports and the Services'
// ports with the ports the config implies.
func checkPorts(r *rendered) []string {
	var problems []string
	admin, client, err := expectedPorts(r.config)
	if err != nil {
		return []string{err.Error()}
	}
	c, err := r.container("strait")
	if err != nil {
		return []string{err.Error()}
	}
	byName := map[string]int{}
	var containerPorts []int
	for _, p := range list(c["ports"]) {
		n := toInt(p["containerPort"])
		name, _ := p["name"].(string)
		if _, dup := byName[name]; dup || name == "" {
			problems = append(problems, fmt.Sprintf("container port %d: name %q missing or not unique", n, name))
		}
		if len(name) > 15 {
			problems = append(problems, fmt.Sprintf("container port name %q is over 15 characters", name))
		}
		byName[name] = n
		containerPorts = append(containerPorts, n)
	}
	slices.Sort(containerPorts)
	want := append([]int{admin}, client...)
	slices.Sort(want)
	if !slices.Equal(containerPorts, want) {
		problems = append(problems, fmt.Sprintf("container ports %v, the config listens on %v", containerPorts, want))
	}
	var clientSvc, adminSvc obj
	for _, s := range r.all("Service") {
		if strings.HasSuffix(dig(s, "metadata", "name").(string), "-admin") {
			adminSvc = s
		} else {
			clientSvc = s
		}
	}
	if clientSvc == nil || adminSvc == nil {
		return append(problems, "want a client Service and an admin Service")
	}
	svcPorts := func(s obj) []int {
		var out []int
		for _, p := range list(dig(s, "spec", "ports")) {
			port := toInt(p["port"])
			// The target must be the container port of that number.
			target := p["targetPort"]
			if name, ok := target.(string); ok {
				if byName[name] != port {
					problems = append(problems, fmt.Sprintf("Service port %d targets %q, container port %d", port, name, byName[name]))
				}
			} else if toInt(target) != port {
				problems = append(problems, fmt.Sprintf("Service port %d targets %v", port, target))
			}
			out = append(out, port)
		}
		slices.Sort(out)
		return out
	}
	if got := svcPorts(clientSvc); !slices.Equal(got, client) {
		problems = append(problems, fmt.Sprintf("client Service ports %v, the config's client ports are %v", got, client))
	}
	if got := svcPorts(adminSvc); !slices.Equal(got, []int{admin}) {
		problems = append(problems, fmt.Sprintf("admin Service ports %v, want the admin port %d alone", got, admin))
	}
	return problems
}

// configFiles lists the files the config names, as Strait reads it: every
// *_file key, a schema definition's file, the credential store, a KMS vault
// path and ${file:...} references; and which must be owner-only.
func configFiles(cfg obj) map[string]bool {
	files := map[string]bool{}
	note := func(path string, ownerOnly bool) { files[path] = files[path] || ownerOnly }
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case obj:
			for k, x := range v {
				if s, ok := x.(string); ok && s != "" && !strings.HasPrefix(s, "${") {
					switch {
					case strings.HasSuffix(k, "_file"), k == "file":
						note(s, false)
					case k == "credentials", k == "path" && (key == "kms" || key == "previous"):
						note(s, true)
					}
				}
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			for rest := v; ; {
				i := strings.Index(rest, "${file:")
				if i < 0 {
					break
				}
				rest = rest[i+len("${file:"):]
				j := strings.IndexByte(rest, '}')
				if j < 0 {
					break
				}
				note(rest[:j], false)
				rest = rest[j+1:]
			}
		}
	}
	walk(cfg, "")
	return files
}

// resolved says where a path of the strait container lands: the pod
// volume behind it and the path inside that volume.
type resolved struct {
	volume obj
	inside string
}

// resolve finds the volume mount of the strait container holding path.
func (r *rendered) resolve(path string) (resolved, error) {
	c, err := r.container("strait")
	if err != nil {
		return resolved{}, err
	}
	d, _ := r.one("Deployment")
	volumes := map[string]obj{}
	for _, v := range list(dig(d, "spec", "template", "spec", "volumes")) {
		volumes[v["name"].(string)] = v
	}
	best := ""
	var mount obj
	for _, m := range list(c["volumeMounts"]) {
		mp := strings.TrimSuffix(m["mountPath"].(string), "/")
		if (path == mp || strings.HasPrefix(path, mp+"/")) && len(mp) > len(best) {
			best, mount = mp, m
		}
	}
	if mount == nil {
		return resolved{}, fmt.Errorf("%s is in no volume mount of the strait container", path)
	}
	v := volumes[mount["name"].(string)]
	if v == nil {
		return resolved{}, fmt.Errorf("%s: mount %s names volume %v, which the pod does not have", path, best, mount["name"])
	}
	inside := strings.TrimPrefix(path[len(best):], "/")
	if sp, _ := mount["subPath"].(string); sp != "" {
		inside = filepath.Join(sp, inside)
	}
	return resolved{volume: v, inside: inside}, nil
}

// checkMounts checks that every file the config names is in a volume the
// strait container mounts: a Secret, or for the owner-only files (vault,
// credential store) the memory volume an init container fills from a
// Secret; and that the config itself is mounted where the args point.
func checkMounts(r *rendered) []string {
	var problems []string
	c, err := r.container("strait")
	if err != nil {
		return []string{err.Error()}
	}
	args, _ := c["args"].([]any)
	if len(args) != 3 || args[0] != "run" || args[1] != "-c" {
		return []string{fmt.Sprintf("container args %v, want run -c FILE", args)}
	}
	cfgPath := args[2].(string)
	res, err := r.resolve(cfgPath)
	if err != nil {
		problems = append(problems, "the config: "+err.Error())
	} else if dig(res.volume, "configMap", "name") == nil {
		problems = append(problems, fmt.Sprintf("the config %s is not on the ConfigMap volume", cfgPath))
	}
	d, _ := r.one("Deployment")
	inits := list(dig(d, "spec", "template", "spec", "initContainers"))
	files := configFiles(r.config)
	for _, path := range slices.Sorted(maps.Keys(files)) {
		ownerOnly := files[path]
		res, err := r.resolve(path)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		switch {
		case dig(res.volume, "secret", "secretName") != nil:
			if ownerOnly {
				problems = append(problems, fmt.Sprintf("%s is read owner-only, but is mounted straight from a Secret, which Kubernetes makes group-readable", path))
			}
		case res.volume["emptyDir"] != nil:
			// Filled by an init container from a Secret volume.
			sub, _, _ := strings.Cut(res.inside, "/")
			if !initCopies(inits, res.volume["name"].(string), sub) {
				problems = append(problems, fmt.Sprintf("%s is on emptyDir %v/%s, which no init container fills from a Secret", path, res.volume["name"], sub))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s is on volume %v, neither a Secret nor filled from one", path, res.volume["name"]))
		}
	}
	return problems
}

// initCopies reports whether an init container copies a Secret volume into
// subdirectory sub of volume.
func initCopies(inits []obj, volume, sub string) bool {
	for _, ic := range inits {
		var dst string
		for _, m := range list(ic["volumeMounts"]) {
			if m["name"] == volume {
				dst = m["mountPath"].(string) + "/" + sub
			}
		}
		cmd, _ := ic["command"].([]any)
		for i, a := range cmd {
			if a == dst && i > 0 {
				if src, ok := cmd[i-1].(string); ok && strings.HasPrefix(src, "/") {
					return true
				}
			}
		}
	}
	return false
}

// drainTimeout is the config's shutdown.drain_timeout, Strait's default 30s.
func drainTimeout(cfg obj) (time.Duration, error) {
	s, ok := dig(cfg, "shutdown", "drain_timeout").(string)
	if !ok {
		return 30 * time.Second, nil
	}
	return time.ParseDuration(s)
}

// checkPod checks probes, termination grace, scrape annotations and the
// ConfigMap's content.
func checkPod(r *rendered) []string {
	var problems []string
	admin, _, err := expectedPorts(r.config)
	if err != nil {
		return []string{err.Error()}
	}
	c, err := r.container("strait")
	if err != nil {
		return []string{err.Error()}
	}
	portOf := func(v any) int {
		if name, ok := v.(string); ok {
			for _, p := range list(c["ports"]) {
				if p["name"] == name {
					return toInt(p["containerPort"])
				}
			}
		}
		return toInt(v)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		get := dig(c, probe, "httpGet")
		if get == nil {
			problems = append(problems, probe+" has no httpGet")
			continue
		}
		if p := dig(get, "path"); p != path {
			problems = append(problems, fmt.Sprintf("%s path %v, want %s", probe, p, path))
		}
		if p := portOf(dig(get, "port")); p != admin {
			problems = append(problems, fmt.Sprintf("%s port %d, want the admin port %d", probe, p, admin))
		}
	}
	d, _ := r.one("Deployment")
	drain, err := drainTimeout(r.config)
	if err != nil {
		return append(problems, err.Error())
	}
	grace := time.Duration(toInt(dig(d, "spec", "template", "spec", "terminationGracePeriodSeconds"))) * time.Second
	sleep := time.Duration(toInt(dig(c, "lifecycle", "preStop", "sleep", "seconds"))) * time.Second
	if grace <= drain+sleep {
		problems = append(problems, fmt.Sprintf("terminationGracePeriodSeconds %v is not longer than drain_timeout %v plus the preStop sleep %v", grace, drain, sleep))
	}
	ann, _ := dig(d, "spec", "template", "metadata", "annotations").(obj)
	if scrape, _ := dig(r.values, "metrics", "podAnnotations").(bool); scrape || dig(r.values, "metrics", "podAnnotations") == nil {
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(admin) || ann["prometheus.io/path"] != "/metrics" {
			problems = append(problems, fmt.Sprintf("scrape annotations %v, want the admin port %d and /metrics", ann, admin))
		}
	} else if ann["prometheus.io/scrape"] != nil {
		problems = append(problems, "scrape annotations rendered with metrics.podAnnotations: false")
	}
	roll, set := dig(r.values, "rollOnConfigChange").(bool)
	if _, has := ann["checksum/config"]; has != (roll || !set) {
		problems = append(problems, fmt.Sprintf("checksum/config annotation present: %v, rollOnConfigChange: %v", has, dig(r.values, "rollOnConfigChange")))
	}
	cm, err := r.one("ConfigMap")
	if err != nil {
		return append(problems, err.Error())
	}
	var inMap obj
	if err := yaml.Unmarshal([]byte(dig(cm, "data", "strait.yaml").(string)), &inMap); err != nil {
		return append(problems, "the ConfigMap's strait.yaml: "+err.Error())
	}
	if !equalYAML(inMap, r.config) {
		problems = append(problems, fmt.Sprintf("the ConfigMap's strait.yaml differs from the values' config:\n%v\nvs\n%v", inMap, r.config))
	}
	return problems
}

// equalYAML compares decoded YAML, with numbers compared by value.
func equalYAML(a, b any) bool {
	switch a := a.(type) {
	case obj:
		b, ok := b.(obj)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if !equalYAML(v, b[k]) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalYAML(a[i], b[i]) {
				return false
			}
		}
		return true
	case int, float64:
		switch b.(type) {
		case int, float64:
			return fmt.Sprint(a) == fmt.Sprint(b)
		}
		return false
	}
	return a == b
}

// checkPDB checks the PodDisruptionBudget against podDisruptionBudget in
// values, and that it selects the pods.
func checkPDB(r *rendered) []string {
	enabled, set := dig(r.values, "podDisruptionBudget", "enabled").(bool)
	pdbs := r.all("PodDisruptionBudget")
	if set && !enabled {
		if len(pdbs) != 0 {
			return []string{"a PodDisruptionBudget rendered with podDisruptionBudget.enabled: false"}
		}
		return nil
	}
	if len(pdbs) != 1 {
		return []string{fmt.Sprintf("%d PodDisruptionBudgets, want 1", len(pdbs))}
	}
	var problems []string
	d, _ := r.one("Deployment")
	podLabels, _ := dig(d, "spec", "template", "metadata", "labels").(obj)
	sel, _ := dig(pdbs[0], "spec", "selector", "matchLabels").(obj)
	if len(sel) == 0 {
		problems = append(problems, "the PodDisruptionBudget selects nothing")
	}
	for k, v := range sel {
		if podLabels[k] != v {
			problems = append(problems, fmt.Sprintf("the PodDisruptionBudget selects %s=%v, which the pods lack", k, v))
		}
	}
	if m := dig(r.values, "podDisruptionBudget", "minAvailable"); m != nil && toInt(dig(pdbs[0], "spec", "minAvailable")) != toInt(m) {
		problems = append(problems, fmt.Sprintf("minAvailable %v, values say %v", dig(pdbs[0], "spec", "minAvailable"), m))
	}
	return problems
}

// checkServiceMonitor checks that the ServiceMonitor, when enabled,
// scrapes /metrics on the admin Service's port and selects that Service
// alone.
func checkServiceMonitor(r *rendered) []string {
	enabled, _ := dig(r.values, "metrics", "serviceMonitor", "enabled").(bool)
	sms := r.all("ServiceMonitor")
	if !enabled {
		if len(sms) != 0 {
			return []string{"a ServiceMonitor rendered with metrics.serviceMonitor.enabled: false"}
		}
		return nil
	}
	if len(sms) != 1 {
		return []string{fmt.Sprintf("%d ServiceMonitors, want 1", len(sms))}
	}
	var problems []string
	sel, _ := dig(sms[0], "spec", "selector", "matchLabels").(obj)
	eps := list(dig(sms[0], "spec", "endpoints"))
	if len(eps) != 1 || eps[0]["path"] != "/metrics" {
		return []string{fmt.Sprintf("ServiceMonitor endpoints %v, want one on /metrics", eps)}
	}
	for _, svc := range r.all("Service") {
		labels, _ := dig(svc, "metadata", "labels").(obj)
		selected := len(sel) > 0
		for k, v := range sel {
			selected = selected && labels[k] == v
		}
		admin := strings.HasSuffix(dig(svc, "metadata", "name").(string), "-admin")
		if selected != admin {
			problems = append(problems, fmt.Sprintf("the ServiceMonitor selects Service %v: %v", dig(svc, "metadata", "name"), selected))
		}
		if admin {
			ports := list(dig(svc, "spec", "ports"))
			if len(ports) != 1 || ports[0]["name"] != eps[0]["port"] {
				problems = append(problems, fmt.Sprintf("the ServiceMonitor scrapes port %v; the admin Service has %v", eps[0]["port"], ports))
			}
		}
	}
	return problems
}

func report(t *testing.T, what string, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
}

func TestChartLint(t *testing.T) {
	for _, vf := range valuesFiles {
		out, err := helm(t, "lint", chartDir, "--strict", "--kube-version", kubeVersion, "-f", vf)
		if err != nil {
			t.Errorf("%s: %v\n%s", vf, err, out)
		}
	}
}

func TestChartRendersWhatTheConfigImplies(t *testing.T) {
	for _, vf := range valuesFiles {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			r := mustRender(t, vf)
			report(t, "ports", checkPorts(r))
			report(t, "mounts", checkMounts(r))
			report(t, "pod", checkPod(r))
			report(t, "pdb", checkPDB(r))
			report(t, "servicemonitor", checkServiceMonitor(r))
		})
	}
}

// TestChartPortCheckCatchesADroppedPort renders copies of the chart that
// each lose one kind of port and expects the port check to say so: the
// check compares with the config, not with what the chart happens to do.
func TestChartPortCheckCatchesADroppedPort(t *testing.T) {
	helpers, err := os.ReadFile(chartDir + "/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ name, old, new, values string }{
		{"last node port", "(int (add $end 1))", "(int $end)", "testdata/tls-sasl.yaml"},
		{"LLM listeners", `{{- $ports = append $ports (dict "name" (printf "llm-%d" $i)`, `{{- $_ := (dict "name" (printf "llm-%d" $i)`, "testdata/tls-sasl.yaml"},
		{"TLS passthrough listeners", `"kind" "passthrough"`, `"kind" "admin"`, "testdata/edge.yaml"},
	} {
		t.Run(m.name, func(t *testing.T) {
			if !bytes.Contains(helpers, []byte(m.old)) {
				t.Fatalf("_helpers.tpl no longer contains %q: update this test", m.old)
			}
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
				t.Fatal(err)
			}
			mutated := bytes.Replace(helpers, []byte(m.old), []byte(m.new), 1)
			if err := os.WriteFile(filepath.Join(dir, "templates/_helpers.tpl"), mutated, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := render(t, dir, m.values)
			if err != nil {
				t.Fatal(err)
			}
			if problems := checkPorts(r); len(problems) == 0 {
				t.Errorf("the chart without its %s passed the port check", m.name)
			} else {
				t.Logf("caught: %s", strings.Join(problems, "; "))
			}
		})
	}
}

// TestChartRefusesWhatCannotWork: configs the chart cannot deploy fail
// helm template with the field at fault and the fix.
func TestChartRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(v obj)
		want   []string
	}{
		{"admin on loopback", func(v obj) { dig(v, "config", "admin").(obj)["listen"] = "127.0.0.1:9190" },
			[]string{"config.admin.listen", "loopback", "0.0.0.0:9190"}},
		{"no admin listener", func(v obj) { dig(v, "config", "admin").(obj)["listen"] = "" },
			[]string{"config.admin.listen is required", "probes"}},
		{"listen port from the environment", func(v obj) { list(dig(v, "config", "virtual_clusters"))[1]["listen"] = "0.0.0.0:${env:PORT}" },
			[]string{"config.virtual_clusters[1].listen", "${env:...}"}},
		{"default node port range", func(v obj) { delete(list(dig(v, "config", "virtual_clusters"))[1], "node_ports") },
			[]string{"config.virtual_clusters[1].node_ports", "1000 ports", "set node_ports.end"}},
		{"grace not past the drain", func(v obj) { v["terminationGracePeriodSeconds"] = 95 },
			[]string{"terminationGracePeriodSeconds: 95", "drain_timeout (90s)", "at least 96"}},
		{"drain timeout from the environment", func(v obj) { dig(v, "config", "shutdown").(obj)["drain_timeout"] = "${env:DRAIN}" },
			[]string{"config.shutdown.drain_timeout", "not a duration"}},
		{"file outside every secret", func(v obj) { v["secrets"] = v["secrets"].([]any)[1:] },
			[]string{"tls.cert_file: /etc/strait/tls/tls.crt is in no mounted volume", "mountPath: /etc/strait/tls"}},
		{"nothing to serve", func(v obj) { v["config"] = obj{"admin": obj{"listen": ":9190"}} },
			[]string{"config has no virtual_clusters, tls_passthrough or llm listeners"}},
		{"relative file", func(v obj) {
			dig(v, "config", "clusters", "prod", "tls").(obj)["ca_file"] = "certs/ca.crt"
		}, []string{"config.clusters.prod.tls.ca_file", "is relative"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := readYAML(t, "testdata/tls-sasl.yaml")
			c.change(v)
			data, err := yaml.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = render(t, chartDir, f)
			if err == nil {
				t.Fatal("helm template succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestChartConfigChangeRollsPods: the checksum annotation follows the
// config.
func TestChartConfigChangeRollsPods(t *testing.T) {
	sum := func(r *rendered) any {
		d, err := r.one("Deployment")
		if err != nil {
			t.Fatal(err)
		}
		return dig(d, "spec", "template", "metadata", "annotations", "checksum/config")
	}
	a := sum(mustRender(t, "testdata/passthrough.yaml"))
	b := sum(mustRender(t, "testdata/passthrough.yaml", "--set", "config.log.level=debug"))
	c := sum(mustRender(t, "testdata/passthrough.yaml", "--set", "replicaCount=5"))
	if a == nil || a == b {
		t.Errorf("checksum/config %v before and %v after a config change", a, b)
	}
	if a != c {
		t.Errorf("checksum/config changed with replicaCount alone: %v, %v", a, c)
	}
}

// TestInstallDepsInstallsHelm: CI installs the helm these tests are written
// against.
func TestInstallDepsInstallsHelm(t *testing.T) {
	data, err := os.ReadFile("../test/interop/install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "go install "+HelmModule) {
		t.Errorf("test/interop/install-deps.sh does not run go install %s", HelmModule)
	}
}

// TestConfigFileKeysAreKnown: every YAML key in the code whose name says it
// may be a file is one that configFiles (and the chart's strait.walkPaths)
// treat as a file, or is listed here as something else. A new file setting
// must be mounted by the chart, or Strait cannot start in a pod.
func TestConfigFileKeysAreKnown(t *testing.T) {
	notFiles := map[string]string{
		"kafka/filters/fieldencryption/config.go path": "a field's path inside a record",
		"config/llm.go on_store_error":                 "what a limit does when its store fails",
	}
	tag := regexp.MustCompile(`yaml:"([a-z0-9_]+)`)
	err := filepath.WalkDir("../internal", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../internal/")
		for _, m := range tag.FindAllStringSubmatch(string(data), -1) {
			key := m[1]
			if !strings.Contains(key, "file") && !strings.Contains(key, "path") && !strings.Contains(key, "dir") &&
				!strings.Contains(key, "store") && key != "credentials" {
				continue
			}
			if _, ok := notFiles[rel+" "+key]; ok {
				continue
			}
			file := strings.HasSuffix(key, "_file") || key == "file" || key == "credentials" ||
				key == "path" && strings.HasPrefix(rel, "kms/kmsconfig/")
			if !file {
				t.Errorf("%s: YAML key %s: if it names a file, make configFiles and strait.walkPaths (deploy/helm/strait/templates/_helpers.tpl) treat it as one; if not, list it in notFiles", rel, key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
