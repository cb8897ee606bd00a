package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// doc joins lines so that element i is on line i+1.
func doc(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

// minimal is the smallest valid configuration; tests copy and change it.
var minimal = []string{
	/* 1 */ "clusters:",
	/* 2 */ "  local:",
	/* 3 */ "    bootstrap_servers: [127.0.0.1:9092]",
	/* 4 */ "virtual_clusters:",
	/* 5 */ "  - name: demo",
	/* 6 */ "    cluster: local",
	/* 7 */ "    listen: 127.0.0.1:19092",
}

// with returns minimal with line n (1-based) replaced by repl (which may
// span several lines or be empty to delete it) and extra lines appended.
func with(n int, repl string, extra ...string) []string {
	out := append([]string(nil), minimal...)
	if n > 0 {
		out[n-1] = repl
		if repl == "" {
			out = append(out[:n-1], out[n:]...)
		}
	}
	return append(out, extra...)
}

func mustParse(t *testing.T, data []byte) *Config {
	t.Helper()
	cfg, err := Parse(data, "strait.yaml")
	if err != nil {
		t.Fatalf("Parse: got error\n%v\nwant none", err)
	}
	return cfg
}

func parseErrs(t *testing.T, data []byte) Errors {
	t.Helper()
	_, err := Parse(data, "strait.yaml")
	if err == nil {
		t.Fatalf("Parse: got no error, want some")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse: got error of type %T, want config.Errors", err)
	}
	return errs
}

func findErr(errs Errors, path string) *FieldError {
	for _, e := range errs {
		if e.Path == path {
			return e
		}
	}
	return nil
}

func TestParseDefaults(t *testing.T) {
	cfg := mustParse(t, doc(minimal...))
	vc := cfg.VirtualClusters[0]
	cl := cfg.Clusters["local"]
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"admin.listen", cfg.Admin.Listen, ""},
		{"log.level", cfg.Log.Level, "info"},
		{"log.format", cfg.Log.Format, "text"},
		{"shutdown.drain_timeout", cfg.Shutdown.DrainTimeout.Duration, 30 * time.Second},
		{"cluster name", cl.Name, "local"},
		{"bootstrap_servers", cl.BootstrapServers, []string{"127.0.0.1:9092"}},
		{"connect_timeout", cl.ConnectTimeout.Duration, 10 * time.Second},
		{"request_timeout", cl.RequestTimeout.Duration, 5 * time.Minute},
		{"cluster tls", cl.TLS, (*TLSClient)(nil)},
		{"vc name", vc.Name, "demo"},
		{"vc cluster", vc.Cluster, "local"},
		{"vc listen", vc.Listen, "127.0.0.1:19092"},
		{"advertised host", vc.AdvertisedHost(), "127.0.0.1"},
		{"node_ports.start", vc.NodePorts.Start, 19093},
		{"node_ports.end", vc.NodePorts.End, 20092},
		{"max_frame_bytes", vc.MaxFrameBytes, 104857600},
		{"max_inflight", vc.MaxInflight, 256},
		{"idle_timeout", vc.IdleTimeout.Duration, 10 * time.Minute},
		{"frame_read_timeout", vc.FrameReadTimeout.Duration, 30 * time.Second},
		{"vc tls", vc.TLS, (*TLSServer)(nil)},
		{"filters", len(vc.Filters), 0},
		{"file", cfg.File, "strait.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestParseFull(t *testing.T) {
	data := doc(
		"admin:",
		"  listen: 127.0.0.1:9190",
		"log: {level: debug, format: json}",
		"shutdown: {drain_timeout: 1m30s}",
		"clusters:",
		"  a:",
		"    bootstrap_servers: [10.0.0.1:9092, 10.0.0.2:9092]",
		"    connect_timeout: 3s",
		"    request_timeout: 45s",
		"    tls: {enabled: true, server_name: kafka.internal, insecure_skip_verify: true}",
		"  b:",
		"    bootstrap_servers: [\"[::1]:9092\"]",
		"virtual_clusters:",
		"  - name: one",
		"    cluster: a",
		"    listen: 0.0.0.0:18092",
		"    advertised_host: kafka.example.com",
		"    node_ports: {start: 30000, end: 30002}",
		"    max_frame_bytes: 1048576",
		"    max_inflight: 1",
		"    filters:",
		"      - type: first",
		"      - type: second",
		"        config:",
		"          topic_prefix: team-a.",
		"          limits: [1, 2]",
		"  - name: two",
		"    cluster: b",
		"    listen: 127.0.0.2:19092",
		"    node_ports: {start: 65000}",
		"    frame_read_timeout: 2m",
		"  - name: three",
		"    cluster: b",
		"    listen: 127.0.0.3:19092", // same port as two, other host: allowed
		"    node_ports: {start: 40000}",
	)
	cfg := mustParse(t, data)
	one, two := cfg.VirtualClusters[0], cfg.VirtualClusters[1]
	var second struct {
		TopicPrefix string `yaml:"topic_prefix"`
		Limits      []int  `yaml:"limits"`
	}
	if err := one.Filters[1].Config.Decode(&second); err != nil {
		t.Fatalf("decoding filter config: %v", err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"admin.listen", cfg.Admin.Listen, "127.0.0.1:9190"},
		{"log.level", cfg.Log.Level, "debug"},
		{"log.format", cfg.Log.Format, "json"},
		{"drain_timeout", cfg.Shutdown.DrainTimeout.Duration, 90 * time.Second},
		{"a bootstrap", cfg.Clusters["a"].BootstrapServers, []string{"10.0.0.1:9092", "10.0.0.2:9092"}},
		{"a connect_timeout", cfg.Clusters["a"].ConnectTimeout.Duration, 3 * time.Second},
		{"a request_timeout", cfg.Clusters["a"].RequestTimeout.Duration, 45 * time.Second},
		{"a tls", *cfg.Clusters["a"].TLS, TLSClient{Enabled: true, ServerName: "kafka.internal", InsecureSkipVerify: true}},
		{"b bootstrap", cfg.Clusters["b"].BootstrapServers, []string{"[::1]:9092"}},
		{"one advertised", one.AdvertisedHost(), "kafka.example.com"},
		{"one node_ports", one.NodePorts, NodePorts{30000, 30002}},
		{"one max_frame_bytes", one.MaxFrameBytes, 1 << 20},
		{"one max_inflight", one.MaxInflight, 1},
		{"filter types", []string{one.Filters[0].Type, one.Filters[1].Type}, []string{"first", "second"}},
		{"filter lines", []int{one.Filters[0].Line, one.Filters[1].Line}, []int{22, 23}},
		{"filter path", one.Filters[1].Path, "virtual_clusters[0].filters[1]"},
		{"filter without config", one.Filters[0].Config.Kind, yaml.Kind(0)},
		{"filter config prefix", second.TopicPrefix, "team-a."},
		{"filter config limits", second.Limits, []int{1, 2}},
		{"two end defaults to start+999", two.NodePorts, NodePorts{65000, 65535}},
		{"two advertised", two.AdvertisedHost(), "127.0.0.2"},
		{"two frame_read_timeout", two.FrameReadTimeout.Duration, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

// comparable strips what a marshal/parse round trip cannot keep.
func comparable(c *Config) *Config {
	out := *c
	out.lines, out.set, out.secret, out.bad = nil, nil, nil, nil
	out.VirtualClusters = nil
	for _, vc := range c.VirtualClusters {
		v := *vc
		v.Filters = nil
		for _, f := range vc.Filters {
			var cfg any
			_ = f.Config.Decode(&cfg)
			v.Filters = append(v.Filters, Filter{Type: f.Type, Path: f.Path})
		}
		out.VirtualClusters = append(out.VirtualClusters, &v)
	}
	return &out
}

func TestRoundTrip(t *testing.T) {
	first := mustParse(t, doc(with(0, "",
		"    filters:",
		"      - type: a",
		"        config: {x: 1}",
		"admin: {listen: \":9190\"}",
	)...))
	out, err := yaml.Marshal(first)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	second := mustParse(t, out)
	if got, want := comparable(second), comparable(first); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n%s\ngot  %+v\nwant %+v", out, got, want)
	}
	var x struct{ X int }
	if err := second.VirtualClusters[0].Filters[0].Config.Decode(&x); err != nil || x.X != 1 {
		t.Errorf("filter config after round trip: got %d (%v), want 1", x.X, err)
	}
}

// anyLine accepts any positive line: the YAML parser's own line numbers
// for syntax errors can be off by one.
const anyLine = -1

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		yaml     []string
		wantPath string
		wantLine int
		wantMsg  string // substring
	}{
		{"unknown top-level key", with(0, "", "extra: 1"), "extra", 8, `unknown key "extra"`},
		{"unknown key suggests", with(7, "    lisen: 127.0.0.1:19092"), "virtual_clusters[0].lisen", 7, `did you mean "listen"?`},
		{"port out of range", with(7, "    listen: 127.0.0.1:99999"), "virtual_clusters[0].listen", 7,
			`"127.0.0.1:99999" is not a valid host:port: port must be 1-65535 (e.g. 127.0.0.1:19092)`},
		{"port missing", with(7, "    listen: 127.0.0.1"), "virtual_clusters[0].listen", 7, "the port is missing"},
		{"listen required", with(7, ""), "virtual_clusters[0].listen", 5, "is required"},
		{"listen not a string", with(7, "    listen: [a, b]"), "virtual_clusters[0].listen", 7, "must be a single value, not a list"},
		{"name required", with(5, "  - cluster: local", "    "), "virtual_clusters[0].name", 5, "is required"},
		{"name charset", with(5, "  - name: my demo"), "virtual_clusters[0].name", 5, "use only letters, digits"},
		{"name unique", with(0, "", "  - {name: demo, cluster: local, listen: \"127.0.0.1:29092\"}"), "virtual_clusters[1].name", 8,
			`"demo" is already the name of virtual_clusters[0]`},
		{"cluster reference", with(6, "    cluster: lcal"), "virtual_clusters[0].cluster", 6, `"lcal" is not defined under clusters (known clusters: local)`},
		{"cluster required", with(6, ""), "virtual_clusters[0].cluster", 5, "known clusters: local"},
		{"listen unique", with(0, "", "  - {name: other, cluster: local, listen: \"127.0.0.1:19092\"}"), "virtual_clusters[1].listen", 8,
			"already the listen address of virtual_clusters[0]"},
		{"wildcard listen clashes", with(0, "", "  - {name: other, cluster: local, listen: \"0.0.0.0:19092\", advertised_host: h}"), "virtual_clusters[1].listen", 8,
			"already the listen address of virtual_clusters[0]"},
		{"node range contains listen port", with(0, "", "    node_ports: {start: 19000, end: 19100}"), "virtual_clusters[0].node_ports", 8,
			"19000-19100 contains port 19092, the listen port of this virtual cluster"},
		{"node ranges overlap", with(0, "",
			"  - name: other",
			"    cluster: local",
			"    listen: 127.0.0.1:29092",
			"    node_ports: {start: 19500}"), "virtual_clusters[1].node_ports", 11, "19500-20499 overlaps node_ports 19093-20092 of virtual_clusters[0]"},
		{"node end before start", with(0, "", "    node_ports: {start: 30000, end: 29999}"), "virtual_clusters[0].node_ports.end", 8, "must be from node_ports.start (30000) to 65535"},
		{"node start zero", with(0, "", "    node_ports: {start: 0}"), "virtual_clusters[0].node_ports.start", 8, "0 is not a valid port"},
		{"default node start out of range", with(7, "    listen: 127.0.0.1:65535"), "virtual_clusters[0].node_ports.start", 5, "listen port + 1 = 65536"},
		{"advertised_host required", with(7, "    listen: 0.0.0.0:19092"), "virtual_clusters[0].advertised_host", 5, "is required because listen"},
		{"advertised_host required for empty host", with(7, "    listen: :19092"), "virtual_clusters[0].advertised_host", 5, "is required because listen"},
		{"advertised_host with port", with(0, "", "    advertised_host: kafka:9092"), "virtual_clusters[0].advertised_host", 8, "without port"},
		{"log level enum", with(0, "", "log: {level: verbose}"), "log.level", 8, `"verbose" is not allowed: use one of debug, info, warn, error`},
		{"log format enum", with(0, "", "log:", "  format: xml"), "log.format", 9, "use one of text, json"},
		{"duration without unit", with(0, "", "shutdown: {drain_timeout: 30}"), "shutdown.drain_timeout", 8, `"30" is not a valid duration: add a unit (e.g. "30s"`},
		{"duration garbage", with(0, "", "shutdown: {drain_timeout: soon}"), "shutdown.drain_timeout", 8, `(e.g. "30s", "5m" or "1m30s")`},
		{"duration negative", with(0, "", "shutdown: {drain_timeout: -1s}"), "shutdown.drain_timeout", 8, "must not be negative"},
		{"connect_timeout zero", with(3, "    bootstrap_servers: [127.0.0.1:9092]\n    connect_timeout: 0s"), "clusters.local.connect_timeout", 4, "must be greater than zero"},
		{"request_timeout wrong kind", with(3, "    bootstrap_servers: [127.0.0.1:9092]\n    request_timeout: {m: 5}"), "clusters.local.request_timeout", 4, "must be a duration"},
		{"bootstrap required", with(3, "    connect_timeout: 1s"), "clusters.local.bootstrap_servers", 2, "at least one broker address is required"},
		{"bootstrap not a list", with(3, "    bootstrap_servers: 127.0.0.1:9092"), "clusters.local.bootstrap_servers", 3, "must be a list"},
		{"bootstrap needs host", with(3, "    bootstrap_servers: [\":9092\"]"), "clusters.local.bootstrap_servers[0]", 3, "the host is missing"},
		{"bootstrap scheme", with(3, "    bootstrap_servers: [\"kafka://h:9092\"]"), "clusters.local.bootstrap_servers[0]", 3, "leave out the scheme"},
		{"no clusters", minimal[3:], "clusters", 0, "at least one target cluster is required"},
		{"no virtual clusters", minimal[:3], "virtual_clusters", 0, "at least one virtual cluster is required"},
		{"empty cluster", with(3, "", "    "), "clusters.local.bootstrap_servers", 2, "at least one broker address"},
		{"max_frame_bytes zero", with(0, "", "    max_frame_bytes: 0"), "virtual_clusters[0].max_frame_bytes", 8, "must be greater than 0"},
		{"max_frame_bytes too large", with(0, "", "    max_frame_bytes: 4294967296"), "virtual_clusters[0].max_frame_bytes", 8, "32-bit"},
		{"max_inflight zero", with(0, "", "    max_inflight: 0"), "virtual_clusters[0].max_inflight", 8, "must be 1-65536"},
		{"max_inflight too large", with(0, "", "    max_inflight: 65537"), "virtual_clusters[0].max_inflight", 8, "must be 1-65536"},
		{"idle_timeout negative", with(0, "", "    idle_timeout: -1s"), "virtual_clusters[0].idle_timeout", 8, "must not be negative"},
		{"frame_read_timeout zero", with(0, "", "    frame_read_timeout: 0s"), "virtual_clusters[0].frame_read_timeout", 8, "must be greater than 0 (the default is 30s)"},
		{"frame_read_timeout negative", with(0, "", "    frame_read_timeout: -5s"), "virtual_clusters[0].frame_read_timeout", 8, "until idle_timeout"},
		{"max_inflight not a number", with(0, "", "    max_inflight: lots"), "virtual_clusters[0].max_inflight", 8, `must be a whole number, not "lots"`},
		{"duplicate key", with(0, "", "    listen: 127.0.0.1:29092"), "virtual_clusters[0].listen", 8, "duplicate key \"listen\" (first given on line 7)"},
		{"filter type required", with(0, "", "    filters:", "      - config: {a: 1}"), "virtual_clusters[0].filters[0].type", 9, "is required"},
		{"filters not a list", with(0, "", "    filters: {type: x}"), "virtual_clusters[0].filters", 8, "must be a list"},
		{"virtual_clusters not a list", []string{"clusters: {local: {bootstrap_servers: [\"h:1\"]}}", "virtual_clusters: {name: x}"}, "virtual_clusters", 2, "must be a list"},
		{"clusters not a mapping", []string{"clusters: [a]", "virtual_clusters: []"}, "clusters", 1, "must be a mapping"},
		{"server tls needs cert", with(0, "", "    tls: {key_file: k.pem}"), "virtual_clusters[0].tls.cert_file", 8, "is required when tls is set"},
		{"server tls client_auth enum", with(0, "", "    tls: {cert_file: c, key_file: k, client_auth: always}"), "virtual_clusters[0].tls.client_auth", 8, "use one of none, request, require"},
		{"server tls require needs CA", with(0, "", "    tls: {cert_file: c, key_file: k, client_auth: require}"), "virtual_clusters[0].tls.client_ca_file", 8, `is required when client_auth is "require"`},
		{"server tls min_version", with(0, "", "    tls: {cert_file: c, key_file: k, min_version: \"1.1\"}"), "virtual_clusters[0].tls.min_version", 8, "use one of 1.2, 1.3"},
		{"server tls file missing", with(0, "", "    tls: {cert_file: /nonexistent/c.pem, key_file: k}"), "virtual_clusters[0].tls.cert_file", 8, `cannot read "/nonexistent/c.pem": no such file or directory`},
		{"client tls not enabled", with(3, "    bootstrap_servers: [127.0.0.1:9092]\n    tls:\n      ca_file: ca.pem"), "clusters.local.tls.enabled", 4,
			"must be true when other tls settings are given (ca_file)"},
		{"client tls cert without key", with(3, "    bootstrap_servers: [127.0.0.1:9092]\n    tls: {enabled: true, cert_file: c.pem}"), "clusters.local.tls.key_file", 4, "is required when cert_file is set"},
		{"admin listen invalid", with(0, "", "admin: {listen: localhost}"), "admin.listen", 8, "the port is missing (e.g. 127.0.0.1:9190)"},
		{"admin clashes with listener", with(0, "", "admin: {listen: \"127.0.0.1:19092\"}"), "admin.listen", 8, "also the listen port of virtual_clusters[0]"},
		{"admin inside node ports", with(0, "", "admin: {listen: \":19100\"}"), "admin.listen", 8, "inside node_ports 19093-20092"},
		{"yaml syntax", with(0, "", "  - name: [oops"), "", anyLine, "invalid YAML: did not find expected ',' or ']'"},
		{"tab indentation", with(7, "\tlisten: x"), "", anyLine, "invalid YAML: found a tab character"},
		{"two documents", with(0, "", "---", "a: 1"), "", 8, "only one YAML document"},
		{"root not a mapping", []string{"- a", "- b"}, "", 1, "must be a mapping"},
		{"bad merge", with(0, "", "    <<: 3"), "virtual_clusters[0]", 8, "merge key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrs(t, doc(tt.yaml...))
			e := findErr(errs, tt.wantPath)
			if e == nil {
				t.Fatalf("got errors\n%v\nwant one at path %q", errs, tt.wantPath)
			}
			if tt.wantLine == anyLine && e.Line <= 0 {
				t.Errorf("got line %d, want a line number (%v)", e.Line, e)
			}
			if tt.wantLine != anyLine && e.Line != tt.wantLine {
				t.Errorf("got line %d, want %d (%v)", e.Line, tt.wantLine, e)
			}
			if !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("got message %q, want it to contain %q", e.Msg, tt.wantMsg)
			}
			if e.File != "strait.yaml" {
				t.Errorf("got file %q, want strait.yaml", e.File)
			}
		})
	}
}

func TestNoCascade(t *testing.T) {
	tests := []struct {
		name string
		yaml []string
		want int
	}{
		// a badly typed listen is one error, not also "listen is required"
		{"bad listen type", with(7, "    listen: {host: x}"), 1},
		// a cluster that failed to decode is not also "missing bootstrap_servers"
		{"bad cluster type", with(2, "  local: [x]", ""), 1},
		// a listen address that is bad is not also an advertised_host problem
		{"bad listen", with(7, "    listen: 0.0.0.0:0"), 1},
		// two clashing listeners are not also overlapping node ranges
		{"same listen", with(0, "", "  - {name: b, cluster: local, listen: \"127.0.0.1:19092\"}"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrs(t, doc(tt.yaml...))
			if len(errs) != tt.want {
				t.Errorf("got %d errors\n%v\nwant %d", len(errs), errs, tt.want)
			}
		})
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	data := doc(
		"log:",
		"  level: loud",
		"clusters:",
		"  local:",
		"    bootstrap_servers: [127.0.0.1:9092]",
		"    tmeout: 3s",
		"virtual_clusters:",
		"  - name: demo",
		"    cluster: local",
		"    listen: 127.0.0.1:99999",
		"  - name: demo",
		"    cluster: remote",
		"    listen: 127.0.0.1:29092",
	)
	errs := parseErrs(t, data)
	want := strings.Join([]string{
		`strait.yaml:2: log.level: "loud" is not allowed: use one of debug, info, warn, error`,
		`strait.yaml:6: clusters.local.tmeout: unknown key "tmeout" (known keys: bootstrap_servers, connect_timeout, request_timeout, tls, sasl)`,
		`strait.yaml:10: virtual_clusters[0].listen: "127.0.0.1:99999" is not a valid host:port: port must be 1-65535 (e.g. 127.0.0.1:19092)`,
		`strait.yaml:11: virtual_clusters[1].name: "demo" is already the name of virtual_clusters[0]: names must be unique`,
		`strait.yaml:12: virtual_clusters[1].cluster: "remote" is not defined under clusters (known clusters: local)`,
	}, "\n")
	if got := errs.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestExpansion(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "name")
	if err := os.WriteFile(secretFile, []byte("broker.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRAIT_TEST_PORT", "19092")
	t.Setenv("STRAIT_TEST_INFLIGHT", "64")
	t.Setenv("STRAIT_TEST_TRUE", "true")
	t.Setenv("STRAIT_TEST_NESTED", "${env:STRAIT_TEST_PORT}")
	t.Setenv("STRAIT_TEST_EMPTY", "")

	cfg := mustParse(t, doc(
		"clusters:",
		"  local:",
		"    bootstrap_servers: [127.0.0.1:9092]",
		"    tls:",
		"      enabled: ${env:STRAIT_TEST_TRUE}",
		"      server_name: ${file:"+secretFile+"}",
		"virtual_clusters:",
		"  - name: demo",
		"    cluster: local",
		"    listen: 127.0.0.1:${env:STRAIT_TEST_PORT}",
		"    advertised_host: \"${env:STRAIT_TEST_EMPTY}\"",
		"    max_inflight: \"${env:STRAIT_TEST_INFLIGHT}\"",
		"    filters:",
		"      - type: x",
		"        config:",
		"          escaped: $${env:STRAIT_TEST_PORT}",
		"          nested: ${env:STRAIT_TEST_NESTED}",
		"          dollars: a$$b$c",
		"          key_${env:STRAIT_TEST_PORT}: 1",
	))
	vc := cfg.VirtualClusters[0]
	var fc map[string]any
	if err := vc.Filters[0].Config.Decode(&fc); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"env in part of a value", vc.Listen, "127.0.0.1:19092"},
		{"env to bool", cfg.Clusters["local"].TLS.Enabled, true},
		{"quoted env to int", vc.MaxInflight, 64},
		{"empty env", vc.AdvertisedHost(), "127.0.0.1"},
		{"file with newline trimmed", cfg.Clusters["local"].TLS.ServerName, "broker.example"},
		{"escape", fc["escaped"], "${env:STRAIT_TEST_PORT}"},
		{"not expanded twice", fc["nested"], "${env:STRAIT_TEST_PORT}"},
		{"lone dollars kept", fc["dollars"], "a$$b$c"},
		{"keys not expanded", fc["key_${env:STRAIT_TEST_PORT}"], 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestExpansionErrors(t *testing.T) {
	t.Setenv("STRAIT_TEST_SECRET", "hunter2:99999")
	t.Setenv("STRAIT_TEST_WORD", "hunter2")
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name     string
		line     string // appended as line 8
		wantPath string
		wantMsg  string
	}{
		{"unset env", "    advertised_host: ${env:STRAIT_TEST_UNSET}", "virtual_clusters[0].advertised_host",
			"environment variable STRAIT_TEST_UNSET is not set"},
		{"unreadable file", "    advertised_host: ${file:" + missing + "}", "virtual_clusters[0].advertised_host",
			"cannot read " + missing + " (referenced as ${file:" + missing + "}): no such file or directory"},
		{"unknown kind", "    advertised_host: ${vault:x}", "virtual_clusters[0].advertised_host", `"${vault:x}" is not a known reference`},
		{"unclosed", "    advertised_host: ${env:X", "virtual_clusters[0].advertised_host", `"${" is not closed`},
		{"empty name", "    advertised_host: ${env:}", "virtual_clusters[0].advertised_host", "names no variable"},
		{"secret hidden in file path", "    tls: {cert_file: \"${env:STRAIT_TEST_SECRET}\", key_file: x}", "virtual_clusters[0].tls.cert_file",
			`cannot read value from "${env:STRAIT_TEST_SECRET}"`},
		{"secret hidden in number", "    max_inflight: ${env:STRAIT_TEST_WORD}", "virtual_clusters[0].max_inflight",
			`must be a whole number, not value from "${env:STRAIT_TEST_WORD}"`},
		{"secret hidden in enum", "    tls: {cert_file: c, key_file: k, min_version: \"${env:STRAIT_TEST_WORD}\"}", "virtual_clusters[0].tls.min_version",
			`value from "${env:STRAIT_TEST_WORD}" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrs(t, doc(with(0, "", tt.line)...))
			e := findErr(errs, tt.wantPath)
			if e == nil {
				t.Fatalf("got errors\n%v\nwant one at path %q", errs, tt.wantPath)
			}
			if e.Line != 8 {
				t.Errorf("got line %d, want 8", e.Line)
			}
			if !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("got message %q, want it to contain %q", e.Msg, tt.wantMsg)
			}
			if strings.Contains(errs.Error(), "hunter2") {
				t.Errorf("got errors revealing a secret:\n%v", errs)
			}
		})
	}

	t.Run("secret hidden in listen", func(t *testing.T) {
		errs := parseErrs(t, doc(with(7, "    listen: ${env:STRAIT_TEST_SECRET}")...))
		if got, want := errs.Error(), `strait.yaml:7: virtual_clusters[0].listen: value from "${env:STRAIT_TEST_SECRET}" is not a valid host:port: port must be 1-65535 (e.g. 127.0.0.1:19092)`; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestAnchorsAndMerge(t *testing.T) {
	t.Setenv("STRAIT_TEST_HOST", "kafka.example.com")
	cfg := mustParse(t, doc(
		"clusters:",
		"  local: &cl",
		"    bootstrap_servers: [127.0.0.1:9092]",
		"  copy: *cl",
		"virtual_clusters:",
		"  - &vc",
		"    name: a",
		"    cluster: local",
		"    listen: 0.0.0.0:19092",
		"    advertised_host: ${env:STRAIT_TEST_HOST}",
		"    max_inflight: 8",
		"  - <<: *vc",
		"    name: b",
		"    listen: 0.0.0.0:29092",
		"  - <<: [*vc, {max_frame_bytes: 1024, max_inflight: 9}]",
		"    name: c",
		"    listen: 0.0.0.0:39092",
	))
	c := cfg.VirtualClusters[2]
	b := cfg.VirtualClusters[1]
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"alias cluster", cfg.Clusters["copy"].BootstrapServers, []string{"127.0.0.1:9092"}},
		{"alias cluster name", cfg.Clusters["copy"].Name, "copy"},
		{"merged field", b.MaxInflight, 8},
		{"merged expanded field", b.AdvertisedHost(), "kafka.example.com"},
		{"own field wins", b.Name, "b"},
		{"own listen wins", b.Listen, "0.0.0.0:29092"},
		{"node ports from own listen", b.NodePorts.Start, 29093},
		{"merge list: first wins", c.MaxInflight, 8},
		{"merge list: later sources fill in", c.MaxFrameBytes, 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestAliasBomb(t *testing.T) {
	// 400 virtual clusters of 400 filters each, from a file of a few KB.
	fs := strings.TrimSuffix(strings.Repeat("*f, ", 400), ", ")
	vcs := strings.TrimSuffix(strings.Repeat("*vc, ", 400), ", ")
	data := doc(
		"x:",
		"  f: &f {type: t}",
		"  fs: &fs ["+fs+"]",
		"  vc: &vc {name: a, cluster: local, listen: \"127.0.0.1:19092\", filters: *fs}",
		"  vcs: &vcs ["+vcs+"]",
		"clusters: {local: {bootstrap_servers: [\"127.0.0.1:9092\"]}}",
		"virtual_clusters: *vcs",
	)
	// The loader must refuse the expansion rather than build 160,000
	// filters; the error says so (how long it took is not asserted).
	errs := parseErrs(t, data)
	if !strings.Contains(errs.Error(), "too many aliases") {
		t.Errorf("got\n%.2000v\nwant an error about aliases", errs)
	}
}

// writeSelfSigned writes a self-signed certificate (usable as CA, server and
// client certificate for localhost) and its key; it returns their paths.
func writeSelfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSBuild(t *testing.T) {
	dir := t.TempDir()
	serverCert, serverKey := writeSelfSigned(t, dir, "server")
	clientCert, clientKey := writeSelfSigned(t, dir, "client")
	cfg := mustParse(t, doc(
		"clusters:",
		"  local:",
		"    bootstrap_servers: [127.0.0.1:9092]",
		"    tls:",
		"      enabled: true",
		"      ca_file: "+serverCert,
		"      cert_file: "+clientCert,
		"      key_file: "+clientKey,
		"      server_name: localhost",
		"virtual_clusters:",
		"  - name: demo",
		"    cluster: local",
		"    listen: 127.0.0.1:19092",
		"    tls:",
		"      cert_file: "+serverCert,
		"      key_file: "+serverKey,
		"      client_ca_file: "+clientCert,
		"      client_auth: require",
		"      min_version: \"1.3\"",
	))
	client, err := cfg.Clusters["local"].TLS.Build()
	if err != nil {
		t.Fatalf("client Build: %v", err)
	}
	server, err := cfg.VirtualClusters[0].TLS.Build()
	if err != nil {
		t.Fatalf("server Build: %v", err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"client min version", client.MinVersion, uint16(tls.VersionTLS12)},
		{"client server name", client.ServerName, "localhost"},
		{"client roots", client.RootCAs != nil, true},
		{"client certificate from the files", client.GetClientCertificate != nil, true},
		{"client insecure", client.InsecureSkipVerify, false},
		{"server min version", server.MinVersion, uint16(tls.VersionTLS13)},
		{"server client auth", server.ClientAuth, tls.RequireAndVerifyClientCert},
		{"server client CAs", server.ClientCAs != nil, true},
		{"server certificates from the files", server.GetCertificate != nil, true},
		{"server session tickets disabled", server.SessionTicketsDisabled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}

	t.Run("handshake", func(t *testing.T) {
		c, s := net.Pipe()
		defer c.Close()
		defer s.Close()
		done := make(chan error, 1)
		go func() { done <- tls.Server(s, server).Handshake() }()
		if err := tls.Client(c, client).Handshake(); err != nil {
			t.Fatalf("client handshake: got %v, want nil", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("server handshake: got %v, want nil", err)
		}
	})

	t.Run("defaults", func(t *testing.T) {
		srv, err := (&TLSServer{CertFile: serverCert, KeyFile: serverKey}).Build()
		if err != nil {
			t.Fatal(err)
		}
		if srv.MinVersion != tls.VersionTLS12 || srv.ClientAuth != tls.NoClientCert || !srv.SessionTicketsDisabled {
			t.Errorf("got MinVersion %x ClientAuth %v tickets disabled %v, want TLS 1.2, NoClientCert, true", srv.MinVersion, srv.ClientAuth, srv.SessionTicketsDisabled)
		}
		req, err := (&TLSServer{CertFile: serverCert, KeyFile: serverKey, ClientAuth: "request", ClientCAFile: clientCert}).Build()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := req.ClientAuth, tls.VerifyClientCertIfGiven; got != want {
			t.Errorf("request: got %v, want %v", got, want)
		}
		cl, err := (&TLSClient{Enabled: true}).Build()
		if err != nil || cl == nil || cl.RootCAs != nil || len(cl.Certificates) != 0 {
			t.Errorf("plain client: got %+v, %v; want system roots, no certificate", cl, err)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		var nilClient *TLSClient
		var nilServer *TLSServer
		for name, build := range map[string]func() (*tls.Config, error){
			"nil client":      nilClient.Build,
			"disabled client": (&TLSClient{CAFile: serverCert}).Build,
			"nil server":      nilServer.Build,
		} {
			if got, err := build(); got != nil || err != nil {
				t.Errorf("%s: got %v, %v; want nil, nil", name, got, err)
			}
		}
	})
}

func TestTLSFileErrors(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir, "a")
	_, otherKey := writeSelfSigned(t, dir, "b")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		line     string
		wantPath string
		wantMsg  string
	}{
		{"key does not match", "    tls: {cert_file: " + cert + ", key_file: " + otherKey + "}", "virtual_clusters[0].tls.cert_file",
			"private key does not match public key"},
		{"key missing", "    tls: {cert_file: " + cert + ", key_file: " + dir + "/nope.pem}", "virtual_clusters[0].tls.key_file",
			"no such file or directory"},
		{"key is a directory", "    tls: {cert_file: " + cert + ", key_file: " + dir + "}", "virtual_clusters[0].tls.key_file",
			"is a directory"},
		{"client CA not PEM", "    tls: {cert_file: " + cert + ", key_file: " + key + ", client_ca_file: " + notPEM + ", client_auth: request}",
			"virtual_clusters[0].tls.client_ca_file", "contains no PEM certificates"},
		{"broker CA not PEM", "  other: {bootstrap_servers: [\"h:1\"], tls: {enabled: true, ca_file: " + notPEM + "}}",
			"clusters.other.tls.ca_file", "contains no PEM certificates"},
		{"broker cert not PEM", "  other: {bootstrap_servers: [\"h:1\"], tls: {enabled: true, cert_file: " + notPEM + ", key_file: " + key + "}}",
			"clusters.other.tls.cert_file", "cert_file must hold a PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines []string
			if strings.HasPrefix(tt.line, "  other") {
				lines = with(3, minimal[2]+"\n"+tt.line)
			} else {
				lines = with(0, "", tt.line)
			}
			errs := parseErrs(t, doc(lines...))
			e := findErr(errs, tt.wantPath)
			if e == nil {
				t.Fatalf("got errors\n%v\nwant one at path %q", errs, tt.wantPath)
			}
			if !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("got message %q, want it to contain %q", e.Msg, tt.wantMsg)
			}
			if len(errs) != 1 {
				t.Errorf("got %d errors\n%v\nwant 1", len(errs), errs)
			}
		})
	}
}

func TestExamples(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) {
		cfg, err := Load("../../examples/passthrough.yaml")
		if err != nil {
			t.Fatalf("Load: got error\n%v\nwant none", err)
		}
		vc := cfg.VirtualClusters[0]
		node1, _ := vc.NodePort(1)
		tests := []struct {
			name string
			got  any
			want any
		}{
			{"name", vc.Name, "passthrough"},
			{"listen", vc.Listen, "127.0.0.1:19092"},
			{"node 1 port", node1, 19094},
			{"admin", cfg.Admin.Listen, "127.0.0.1:9190"},
			{"bootstrap", cfg.Clusters[vc.Cluster].BootstrapServers, []string{"127.0.0.1:9092"}},
		}
		for _, tt := range tests {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
			}
		}
	})

	t.Run("tls", func(t *testing.T) {
		dir := t.TempDir()
		serverCert, serverKey := writeSelfSigned(t, dir, "server")
		clientCA, _ := writeSelfSigned(t, dir, "clients-ca")
		brokerCA, _ := writeSelfSigned(t, dir, "broker-ca")
		straitCert, straitKey := writeSelfSigned(t, dir, "strait")
		for k, v := range map[string]string{
			"STRAIT_TLS_CERT":      serverCert,
			"STRAIT_TLS_KEY":       serverKey,
			"STRAIT_TLS_CLIENT_CA": clientCA,
			"STRAIT_BROKER_CA":     brokerCA,
			"STRAIT_BROKER_CERT":   straitCert,
			"STRAIT_BROKER_KEY":    straitKey,
		} {
			t.Setenv(k, v)
		}
		cfg, err := Load("../../examples/tls.yaml")
		if err != nil {
			t.Fatalf("Load: got error\n%v\nwant none", err)
		}
		for _, vc := range cfg.VirtualClusters {
			if _, err := vc.TLS.Build(); err != nil {
				t.Errorf("%s: server TLS Build: got %v, want nil", vc.Name, err)
			}
			if _, err := cfg.Clusters[vc.Cluster].TLS.Build(); err != nil {
				t.Errorf("%s: client TLS Build: got %v, want nil", vc.Name, err)
			}
		}
	})
}

func TestNodePort(t *testing.T) {
	vc := &VirtualCluster{Listen: "127.0.0.1:19092", NodePorts: NodePorts{Start: 19093, End: 19095}}
	tests := []struct {
		id       int32
		wantPort int
		wantOK   bool
	}{
		{0, 19093, true},
		{2, 19095, true},
		{3, 0, false},
		{-1, 0, false},
		{1 << 30, 0, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.id), func(t *testing.T) {
			port, ok := vc.NodePort(tt.id)
			if port != tt.wantPort || ok != tt.wantOK {
				t.Errorf("got %d, %v, want %d, %v", port, ok, tt.wantPort, tt.wantOK)
			}
			if ok {
				if id, ok := vc.NodeID(port); id != tt.id || !ok {
					t.Errorf("NodeID(%d): got %d, %v, want %d, true", port, id, ok, tt.id)
				}
			}
		})
	}
	if _, ok := vc.NodeID(19092); ok {
		t.Errorf("NodeID(19092): got ok, want not ok")
	}
	if _, ok := (&VirtualCluster{}).NodePort(0); ok {
		t.Errorf("NodePort on an empty range: got ok, want not ok")
	}
}

func TestAdvertisedHost(t *testing.T) {
	tests := []struct {
		name string
		vc   VirtualCluster
		want string
	}{
		{"from listen", VirtualCluster{Listen: "10.1.2.3:19092"}, "10.1.2.3"},
		{"ipv6 listen", VirtualCluster{Listen: "[::1]:19092"}, "::1"},
		{"override", VirtualCluster{Listen: "0.0.0.0:19092", Advertised: "kafka.example.com"}, "kafka.example.com"},
		{"bad listen", VirtualCluster{Listen: "nonsense"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.vc.AdvertisedHost(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  *FieldError
		want string
	}{
		{"all", NewFieldError("s.yaml", 3, "a.b", "bad"), "s.yaml:3: a.b: bad"},
		{"no line", NewFieldError("s.yaml", 0, "a.b", "bad"), "s.yaml: a.b: bad"},
		{"no file", NewFieldError("", 3, "a.b", "bad"), "line 3: a.b: bad"},
		{"no path", NewFieldError("s.yaml", 3, "", "bad"), "s.yaml:3: bad"},
		{"message only", NewFieldError("", 0, "", "bad"), "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}

	var errs Errors
	if err := errs.Err(); err != nil {
		t.Errorf("empty Errors.Err: got %v, want nil", err)
	}
	errs.Add("s.yaml", 9, "x", "second")
	errs.Append(NewFieldError("s.yaml", 2, "y", "first"), nil)
	errs.Sort()
	if got, want := errs.Err().Error(), "s.yaml:2: y: first\ns.yaml:9: x: second"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDurationYAML(t *testing.T) {
	var v struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 1m30s"), &v); err != nil || v.D.Duration != 90*time.Second {
		t.Errorf("got %v, %v, want 1m30s, nil", v.D, err)
	}
	err := yaml.Unmarshal([]byte("d: 90"), &v)
	if err == nil || !strings.Contains(err.Error(), `"90s"`) {
		t.Errorf("got %v, want an error suggesting \"90s\"", err)
	}
	out, err := yaml.Marshal(v)
	if err != nil || string(out) != "d: 1m30s\n" {
		t.Errorf("got %q, %v, want \"d: 1m30s\\n\"", out, err)
	}
}

func TestValidateInCode(t *testing.T) {
	cfg := &Config{
		Clusters: map[string]*Cluster{"local": {BootstrapServers: []string{"127.0.0.1:9092"}}},
		VirtualClusters: []*VirtualCluster{
			{Name: "demo", Cluster: "local", Listen: "127.0.0.1:19092"},
		},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	cfg.VirtualClusters[0].Cluster = "nope"
	err := cfg.Validate()
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "virtual_clusters[0].cluster" {
		t.Errorf("got %v, want one error at virtual_clusters[0].cluster", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want an os.ErrNotExist error", err)
	}
}

// TestEdgeSettings: PROXY protocol and connection limits are checked, each
// mistake named with its path and fix.
func TestEdgeSettings(t *testing.T) {
	cases := []struct {
		lines []string
		path  string
		says  string
	}{
		{[]string{"    proxy_protocol: yes"}, "virtual_clusters[0].proxy_protocol", "use one of off, allowed, required"},
		{[]string{"    proxy_protocol: required"}, "virtual_clusters[0].proxy_protocol_from", "is required with proxy_protocol"},
		{[]string{"    proxy_protocol: allowed", "    proxy_protocol_from: [10.0.0.0/33]"}, "virtual_clusters[0].proxy_protocol_from[0]", "is not a network"},
		{[]string{"    proxy_protocol_from: [10.0.0.0/8]"}, "virtual_clusters[0].proxy_protocol_from", "proxy_protocol is off"},
		{[]string{"    max_connections: -1"}, "virtual_clusters[0].max_connections", "must not be negative"},
		{[]string{"    max_connections: 10", "    max_connections_per_address: 20"}, "virtual_clusters[0].max_connections_per_address", "above max_connections"},
		{[]string{"    client_write_timeout: -1s"}, "virtual_clusters[0].client_write_timeout", "must not be negative"},
	}
	for _, tc := range cases {
		errs := parseErrs(t, doc(append(append([]string(nil), minimal...), tc.lines...)...))
		e := findErr(errs, tc.path)
		if e == nil || !strings.Contains(e.Error(), tc.says) {
			t.Errorf("%v: errors %v, want %s saying %q", tc.lines, errs, tc.path, tc.says)
		}
	}
	cfg := mustParse(t, doc(append(append([]string(nil), minimal...), "    proxy_protocol: required", "    proxy_protocol_from: [127.0.0.0/8, 10.1.2.3]")...))
	vc := cfg.VirtualClusters[0]
	if vc.ProxyProtocol != "required" || len(vc.ProxyProtocolFrom) != 2 || vc.ClientWriteTimeout.Duration != DefaultClientWriteTimeout {
		t.Errorf("parsed %q %v %v", vc.ProxyProtocol, vc.ProxyProtocolFrom, vc.ClientWriteTimeout)
	}
	if p, err := ParsePrefix("10.1.2.3"); err != nil || p.Bits() != 32 {
		t.Errorf("one address: %v, %v", p, err)
	}
}

// TestSNISettings: SNI routing needs TLS and a broker name pattern, and
// takes no node ports.
func TestSNISettings(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir, "server")
	tlsLines := []string{"    tls:", "      cert_file: " + cert, "      key_file: " + key}
	cases := []struct {
		lines []string
		path  string
		says  string
	}{
		{[]string{"    sni: {bootstrap_host: kafka.example.com, broker_host: broker-$(node).kafka.example.com}"}, "virtual_clusters[0].sni", "needs tls"},
		{append([]string{"    sni: {bootstrap_host: kafka.example.com, broker_host: broker.kafka.example.com}"}, tlsLines...), "virtual_clusters[0].sni.broker_host", "must contain $(node) once"},
		{append([]string{"    sni: {broker_host: b-$(node).kafka.example.com}"}, tlsLines...), "virtual_clusters[0].sni.bootstrap_host", "is required"},
		{append([]string{"    sni: {bootstrap_host: kafka.example.com, broker_host: b-$(node).kafka.example.com}", "    node_ports: {start: 20000, end: 20010}"}, tlsLines...), "virtual_clusters[0].node_ports", "remove node_ports"},
		{[]string{"    sni: {bootstrap_host: kafka.example.com, broker_host: b-$(node).kafka.example.com}", "    tls:", "      certificates: [{cert_file: " + cert + "}]"}, "virtual_clusters[0].tls.certificates[0].key_file", "is required"},
	}
	for _, tc := range cases {
		errs := parseErrs(t, doc(append(append([]string(nil), minimal...), tc.lines...)...))
		e := findErr(errs, tc.path)
		if e == nil || !strings.Contains(e.Error(), tc.says) {
			t.Errorf("%v: errors %v, want %s saying %q", tc.lines, errs, tc.path, tc.says)
		}
	}
	ok := append(append([]string(nil), minimal...), "    sni: {bootstrap_host: kafka.example.com, broker_host: b-$(node).kafka.example.com}",
		"    tls:", "      certificates: [{cert_file: "+cert+", key_file: "+key+"}]")
	cfg := mustParse(t, doc(ok...))
	if vc := cfg.VirtualClusters[0]; vc.NodePorts.Start != 0 || vc.SNI.BrokerHost != "b-$(node).kafka.example.com" {
		t.Errorf("parsed %+v %+v", vc.NodePorts, vc.SNI)
	}
	if _, err := cfg.VirtualClusters[0].TLS.Build(); err != nil {
		t.Errorf("Build with certificates only: %v", err)
	}
}

// TestTLSPassthroughSettings: a passthrough listener needs routes, takes
// no filters (and says why), and may stand alone in a file.
func TestTLSPassthroughSettings(t *testing.T) {
	cases := []struct {
		lines []string
		path  string
		says  string
	}{
		{[]string{"tls_passthrough:", "  - name: edge", "    listen: 0.0.0.0:9093"}, "tls_passthrough[0].routes", "is required"},
		{[]string{"tls_passthrough:", "  - name: edge", "    listen: 0.0.0.0:9093", "    routes: {kafka.example.com: 10.0.0.1:9093}", "    filters: [{type: authorization}]"}, "tls_passthrough[0].filters", "never decrypts its traffic"},
		{[]string{"tls_passthrough:", "  - name: edge", "    listen: 0.0.0.0:9093", "    routes: {kafka.example.com: 10.0.0.1}"}, "tls_passthrough[0].routes.kafka.example.com", "is not a host:port"},
		{[]string{"tls_passthrough:", "  - name: edge", "    listen: 0.0.0.0:9093", "    route_pattern: {server_name: b.example.com, upstream: b:9093}"}, "tls_passthrough[0].route_pattern.server_name", "must contain $(node) once"},
		{[]string{"tls_passthrough:", "  - name: edge", "    listen: 0.0.0.0:9093", "    routes: {kafka.example.com: 10.0.0.1:9093}", "    proxy_protocol: required"}, "tls_passthrough[0].proxy_protocol_from", "is required"},
	}
	for _, tc := range cases {
		errs := parseErrs(t, doc(tc.lines...))
		e := findErr(errs, tc.path)
		if e == nil || !strings.Contains(e.Error(), tc.says) {
			t.Errorf("%v: errors %v, want %s saying %q", tc.lines, errs, tc.path, tc.says)
		}
	}
	cfg := mustParse(t, doc("tls_passthrough:", "  - name: edge", "    listen: 0.0.0.0:9093",
		"    routes: {kafka.example.com: 10.0.0.1:9093}", "    route_pattern: {server_name: broker-$(node).kafka.example.com, upstream: \"b-$(node).internal:9093\"}"))
	if tp := cfg.TLSPassthrough[0]; tp.Routes["kafka.example.com"] != "10.0.0.1:9093" || tp.RoutePattern.Upstream != "b-$(node).internal:9093" {
		t.Errorf("parsed %+v", tp)
	}
}
