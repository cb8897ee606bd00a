package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// nothing is an only list that allows no package of ours.
var nothing = []string{}

// rules is Strait's layering, one row per constraint. Paths are relative to
// the module root. A pattern is a package path, or a path ending in "/..."
// for it and every package below it; "..." alone is every package.
//
// Rules about packages that do not exist yet are marked future: they match
// nothing today and start to bite when the package appears. Every other rule
// must cover at least one package, so that a rename cannot quietly switch a
// rule off.
//
// Only non-test imports count: a test may use whatever it needs. Imports are
// those of the build configuration the test runs in (GOOS, GOARCH, tags).
var rules = []rule{
	{
		name: "kafka/wire is the bottom of the Kafka stack and imports nothing of ours",
		pkgs: []string{"internal/kafka/wire/..."},
		only: nothing,
	},
	{
		name:   "llm/api holds the canonical LLM types and imports nothing of ours",
		pkgs:   []string{"internal/llm/api/..."},
		only:   nothing,
		future: true,
	},
	{
		name: "topicsel matches topic selectors and imports nothing of ours",
		pkgs: []string{"internal/kafka/topicsel"},
		only: nothing,
	},
	{
		name: "membudget is a byte budget and imports nothing of ours",
		pkgs: []string{"internal/kafka/membudget"},
		only: nothing,
	},
	{
		name: "kms is the key-management interface and imports nothing of ours",
		pkgs: []string{"internal/kms"},
		only: nothing,
	},
	{
		name: "KMS implementations, and the data keys every key-protecting filter shares, build on the kms interface (and secretfile) alone",
		pkgs: []string{"internal/kms/vault", "internal/kms/datakey"},
		only: []string{"internal/kms", "internal/secretfile"},
	},
	{
		name: "credstore keeps the users of SASL PLAIN and SCRAM, and imports only secretfile of ours",
		pkgs: []string{"internal/auth/credstore"},
		only: []string{"internal/secretfile"},
	},
	{
		name:  "the SASL mechanisms find users through their Credentials interface, never the credential store itself",
		pkgs:  []string{"internal/auth/sasl/..."},
		never: []string{"internal/auth/credstore/..."},
	},
	{
		name: "llm/sse is SSE framing and imports nothing of ours",
		pkgs: []string{"internal/llm/sse"},
		only: nothing,
	},
	{
		name: "llm/translate converts between dialects on top of llm/sse and llm/jsonscan alone",
		pkgs: []string{"internal/llm/translate"},
		only: []string{"internal/llm/sse", "internal/llm/jsonscan"},
	},
	{
		name: "llm/jsonscan is a JSON scanner and imports nothing of ours",
		pkgs: []string{"internal/llm/jsonscan"},
		only: nothing,
	},
	{
		name: "the LLM gateway builds on the LLM packages and telemetry only",
		pkgs: []string{"internal/llm/gateway"},
		only: []string{"internal/llm/sse", "internal/llm/translate", "internal/llm/jsonscan", "internal/llm/limits", "internal/llm/h1client", "internal/llm/h2client", "internal/llm/h1server", "internal/llm/h2server", "internal/telemetry", "internal/h2sched", "internal/writebatch", "internal/prefacelisten"},
	},
	{
		name: "llm/h1client (the provider hop's HTTP/1.1 client) builds on writebatch alone",
		pkgs: []string{"internal/llm/h1client"},
		only: []string{"internal/writebatch"},
	},
	{
		name: "llm/h2client (the provider hop's HTTP/2 client) builds on h2frames and writebatch alone",
		pkgs: []string{"internal/llm/h2client"},
		only: []string{"internal/h2frames", "internal/writebatch"},
	},
	{
		name: "llm/h1server (the client hop's HTTP/1.1 server) builds on writebatch alone",
		pkgs: []string{"internal/llm/h1server"},
		only: []string{"internal/writebatch"},
	},
	{
		name: "llm/h2server (the client hop's HTTP/2 server) builds on h2frames, writebatch and prefacelisten alone",
		pkgs: []string{"internal/llm/h2server"},
		only: []string{"internal/h2frames", "internal/writebatch", "internal/prefacelisten"},
	},
	{
		name: "h2sched (an HTTP/2 write scheduler), prefacelisten (HTTP/2 prior knowledge sorted from HTTP/1.1) and h2frames (HTTP/2 frames written by hand) import nothing of ours",
		pkgs: []string{"internal/h2sched", "internal/prefacelisten", "internal/h2frames"},
		only: nothing,
	},
	{
		name: "writebatch (batched socket writes) builds on rawsock (raw socket reads and writes) alone",
		pkgs: []string{"internal/writebatch"},
		only: []string{"internal/rawsock"},
	},
	{
		name: "llm/limits keeps rate limits and spend, in memory or in Redis, and imports nothing of ours",
		pkgs: []string{"internal/llm/limits"},
		only: nothing,
	},
	{
		name: "mockllm is a self-contained test peer: it shares only the JSON scanner, the HTTP/1.1 server and the HTTP/2 and socket plumbing",
		pkgs: []string{"internal/mockllm/..."},
		only: []string{"internal/llm/jsonscan", "internal/llm/h1server", "internal/h2sched", "internal/h2frames", "internal/writebatch", "internal/rawsock", "internal/prefacelisten"},
	},
	{
		name: "rawsock (raw socket reads and writes) imports nothing of ours",
		pkgs: []string{"internal/rawsock"},
		only: nothing,
	},
	{
		name: "bench/result describes the harness's JSON documents and imports nothing of ours",
		pkgs: []string{"internal/bench/result"},
		only: nothing,
	},
	{
		name: "bench/stats and bench/procstat build on bench/result alone",
		pkgs: []string{"internal/bench/stats", "internal/bench/procstat"},
		only: []string{"internal/bench/result"},
	},
	{
		name: "bench/report renders results and statistics, nothing else",
		pkgs: []string{"internal/bench/report"},
		only: []string{"internal/bench/result", "internal/bench/stats"},
	},
	{
		name: "telemetry sits under every runtime package and imports nothing of ours",
		pkgs: []string{"internal/telemetry/..."},
		only: nothing,
	},
	{
		name: "config describes the file, and builds TLS settings on tlsfiles alone",
		pkgs: []string{"internal/config"},
		only: []string{"internal/tlsfiles"},
	},
	{
		name: "tlsfiles serves certificates from files and imports nothing of ours",
		pkgs: []string{"internal/tlsfiles"},
		only: nothing,
	},
	{
		name: "netedge is what every listener does before any protocol, and imports nothing of ours",
		pkgs: []string{"internal/netedge"},
		only: nothing,
	},
	{
		name: "TLS passthrough relays bytes: it shares the edge with the proxy, and never sees Kafka frames or filters",
		pkgs: []string{"internal/kafka/passthrough"},
		only: []string{"internal/netedge"},
	},
	{
		name: "devbroker is a self-contained development cluster and imports nothing of ours",
		pkgs: []string{"internal/devbroker/..."},
		only: nothing,
	},
	{
		name: "devregistry is a self-contained development schema registry and imports nothing of ours",
		pkgs: []string{"internal/devregistry/..."},
		only: nothing,
	},
	{
		name: "secretfile reads and writes files that hold secrets and imports nothing of ours",
		pkgs: []string{"internal/secretfile"},
		only: nothing,
	},
	{
		name: "certprincipal maps certificates to principals and imports nothing of ours",
		pkgs: []string{"internal/auth/certprincipal"},
		only: nothing,
	},
	{
		name: "oauth checks bearer tokens, and its errors are the SASL errors: it imports auth/sasl alone",
		pkgs: []string{"internal/auth/oauth"},
		only: []string{"internal/auth/sasl"},
	},
	{
		name:  "OAUTHBEARER takes a token validator, never the oauth package that provides one",
		pkgs:  []string{"internal/auth/sasl"},
		never: []string{"internal/auth/oauth/..."},
	},
	{
		name: "fieldpath names and splices fields and imports nothing of ours",
		pkgs: []string{"internal/schema/fieldpath"},
		only: nothing,
	},
	{
		name: "each schema format reads bytes with its library, and locates fields with fieldpath",
		pkgs: []string{"internal/schema/avro", "internal/schema/protobuf", "internal/schema/jsonschema"},
		only: []string{"internal/schema/fieldpath"},
	},
	{
		name: "the schema layer builds on its format packages alone",
		pkgs: []string{"internal/schema"},
		only: []string{"internal/schema/..."},
	},
	{
		name: "the filter API builds on kafka/wire alone, so filters never see the proxy",
		pkgs: []string{"internal/kafka/filter"},
		only: []string{"internal/kafka/wire/..."},
	},
	{
		name:  "filters use the filter API, never the proxy, the CLI or the config",
		pkgs:  []string{"internal/kafka/filters/..."},
		never: []string{"internal/kafka/proxy/...", "internal/cli/...", "internal/config/..."},
	},
	{
		name: "the authorization filter decides on the filter API, kafka/wire and topic selectors alone",
		pkgs: []string{"internal/kafka/filters/authz"},
		only: []string{"internal/kafka/filter", "internal/kafka/filter/registry", "internal/kafka/wire", "internal/kafka/topicsel"},
	},
	{
		name:   "only the CLI imports config; runtime packages take constructor options",
		pkgs:   []string{"..."},
		except: []string{"internal/cli", "internal/config/..."},
		never:  []string{"internal/config/..."},
	},
	{
		name: "admin is handed readiness by the CLI and never imports a gateway",
		pkgs: []string{"internal/admin/..."},
		only: []string{"internal/telemetry"},
	},
	{
		name: "gateways never import development clusters, benchmarks or mocks",
		pkgs: []string{"internal/kafka/...", "internal/llm/...", "internal/admin/...", "internal/telemetry/...", "internal/schema/...", "internal/kms/..."},
		never: []string{
			"internal/devbroker/...", "internal/devregistry/...", "bench/...", "internal/bench/...", "internal/mockllm/...",
		},
	},
	{
		name:   "the development cluster is for the CLI, tests and benchmarks only",
		pkgs:   []string{"..."},
		except: []string{"internal/cli", "internal/devbroker/...", "test/...", "bench/...", "internal/bench/..."},
		never:  []string{"internal/devbroker/..."},
	},
	{
		name:   "the development schema registry is for the CLI, tests and benchmarks only",
		pkgs:   []string{"..."},
		except: []string{"internal/cli", "internal/devregistry/...", "test/...", "bench/...", "internal/bench/..."},
		never:  []string{"internal/devregistry/..."},
	},
	{
		name:   "mock providers are for the CLI (strait mock), tests and benchmarks only",
		pkgs:   []string{"..."},
		except: []string{"internal/cli", "internal/mockllm/...", "test/...", "bench/...", "internal/bench/..."},
		never:  []string{"internal/mockllm/..."},
	},
	{
		name: "cmd/strait is a thin main over the CLI",
		pkgs: []string{"cmd/..."},
		only: []string{"internal/cli"},
	},
	{
		name:   "the CLI is the top layer: only cmd imports it",
		pkgs:   []string{"..."},
		except: []string{"cmd/...", "internal/cli/..."},
		never:  []string{"internal/cli/..."},
	},
	{
		name: "testkit holds shared test helpers and imports nothing of ours",
		pkgs: []string{"internal/testkit"},
		only: nothing,
	},
	{
		name:   "testkit is for tests only: no package imports it outside its tests",
		pkgs:   []string{"..."},
		except: []string{"internal/testkit"},
		never:  []string{"internal/testkit"},
	},
	{
		name:   "archtest only holds tests and is imported by nothing",
		pkgs:   []string{"..."},
		except: []string{"internal/archtest"},
		never:  []string{"internal/archtest/..."},
	},
}

// A rule constrains what the packages it covers may import of ours. Set only
// or never (or both).
type rule struct {
	// name says what the rule keeps; failure messages quote it.
	name string
	// pkgs are the packages the rule covers, except those in except.
	pkgs, except []string
	// only, if not nil, lists the only packages of ours the covered
	// packages may import; nothing means none.
	only []string
	// never lists packages of ours the covered packages must not import.
	never []string
	// future marks a rule about packages that may not exist yet.
	future bool
}

// match reports whether the module-relative package path p matches pattern.
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// covers reports whether the rule applies to package pkg.
func (r *rule) covers(pkg string) bool {
	return matchAny(r.pkgs, pkg) && !matchAny(r.except, pkg)
}

// forbids returns why package pkg may not import imp under r (both paths
// module-relative), or "" if it may.
func (r *rule) forbids(pkg, imp string) string {
	if !r.covers(pkg) || pkg == imp {
		return ""
	}
	for _, pat := range r.never {
		if match(pat, imp) {
			return "must not import " + pat
		}
	}
	if r.only != nil && !matchAny(r.only, imp) {
		if len(r.only) == 0 {
			return "may import nothing of ours"
		}
		return "may import only " + strings.Join(r.only, ", ") + " of ours"
	}
	return ""
}

// pkg is the part of `go list -json` output the tests read.
type pkg struct {
	ImportPath  string
	Name        string
	Doc         string
	Imports     []string // not TestImports or XTestImports: tests may import anything
	GoFiles     []string
	TestGoFiles []string
	Error       *struct{ Err string }
}

// violations checks every import of ours of every package against rules and
// returns one message per forbidden import, naming the package, the import
// and each rule it breaks.
func violations(module string, pkgs []pkg, rules []rule) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := rel(module, p.ImportPath)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			to, ok := rel(module, imp)
			if !ok {
				continue // the standard library or another module
			}
			var why []string
			for i := range rules {
				if reason := rules[i].forbids(from, to); reason != "" {
					why = append(why, fmt.Sprintf("rule %q (%s %s)", rules[i].name, from, reason))
				}
			}
			if len(why) > 0 {
				out = append(out, fmt.Sprintf("%s imports %s, forbidden by %s", from, to, strings.Join(why, "; and by ")))
			}
		}
	}
	return out
}

// rel returns path relative to the module root, and whether it is in the
// module at all.
func rel(module, path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// listing is the module's package list, made once for all tests.
var listing struct {
	once   sync.Once
	module string
	pkgs   []pkg
	err    error
}

// goList lists every package of the module, as `go list -e -json ./...` run
// at the module root (found with `go env GOMOD`) sees them.
func goList(t *testing.T) (module string, pkgs []pkg) {
	t.Helper()
	listing.once.Do(func() { listing.module, listing.pkgs, listing.err = list() })
	if listing.err != nil {
		t.Fatal(listing.err)
	}
	return listing.module, listing.pkgs
}

func list() (module string, pkgs []pkg, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", nil, fmt.Errorf("the go command is needed to list packages: %w", err)
	}
	gomod, err := run(goBin, "", "env", "GOMOD")
	if err != nil {
		return "", nil, err
	}
	gomod = strings.TrimSpace(gomod)
	if gomod == "" || gomod == os.DevNull {
		return "", nil, fmt.Errorf("go env GOMOD = %q: not inside a module", gomod)
	}
	root := filepath.Dir(gomod)
	if module, err = run(goBin, root, "list", "-m"); err != nil {
		return "", nil, err
	}
	module = strings.TrimSpace(module)
	// -e: a package someone is half-way through editing is listed with its
	// Error set instead of failing the whole listing.
	out, err := run(goBin, root, "list", "-e", "-json=ImportPath,Name,Doc,Imports,GoFiles,TestGoFiles,Error", "./...")
	if err != nil {
		return "", nil, err
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", nil, fmt.Errorf("decoding go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return "", nil, fmt.Errorf("go list ./... in %s listed no packages", root)
	}
	return module, pkgs, nil
}

func run(goBin, dir string, args ...string) (string, error) {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// reportBroken fails t for each package go list could not load, and returns
// the rest: a broken package's imports are incomplete, so checking them
// would prove nothing.
func reportBroken(t *testing.T, module string, pkgs []pkg) []pkg {
	t.Helper()
	var ok []pkg
	for _, p := range pkgs {
		if p.Error != nil {
			name, _ := rel(module, p.ImportPath)
			t.Errorf("cannot check %s: go list cannot load it (is it mid-edit?): %s", name, p.Error.Err)
			continue
		}
		ok = append(ok, p)
	}
	return ok
}

func TestLayering(t *testing.T) {
	module, pkgs := goList(t)
	pkgs = reportBroken(t, module, pkgs)
	for _, msg := range violations(module, pkgs, rules) {
		t.Error(msg)
	}
}

// TestRulesCoverPackages keeps the table honest: a rule that is not marked
// future must cover some package, and every pattern must be well formed.
func TestRulesCoverPackages(t *testing.T) {
	module, pkgs := goList(t)
	for i := range rules {
		r := &rules[i]
		if r.only == nil && len(r.never) == 0 {
			t.Errorf("rule %q sets neither only nor never: it checks nothing", r.name)
		}
		for _, pat := range slices.Concat(r.pkgs, r.except, r.only, r.never) {
			if err := checkPattern(pat); err != nil {
				t.Errorf("rule %q: pattern %q: %v", r.name, pat, err)
			}
		}
		if r.future {
			continue
		}
		covered := slices.ContainsFunc(pkgs, func(p pkg) bool {
			name, ok := rel(module, p.ImportPath)
			return ok && r.covers(name)
		})
		if !covered {
			t.Errorf("rule %q covers no package (%s): was a package renamed? Mark the rule future if its packages are still to come",
				r.name, strings.Join(r.pkgs, ", "))
		}
	}
}

func checkPattern(pat string) error {
	switch {
	case pat == "...":
		return nil
	case pat == "" || strings.HasPrefix(pat, "/") || strings.HasSuffix(pat, "/"):
		return errors.New("want a module-relative path without leading or trailing slash")
	case strings.Contains(strings.TrimSuffix(pat, "/..."), "..."):
		return errors.New(`"..." may only end a pattern, as "/..."`)
	}
	return nil
}

// TestPackageDocs requires a package comment on every package under
// internal/ and cmd/, saying what the package is for (and, by the
// convention of this module, what it must not depend on).
func TestPackageDocs(t *testing.T) {
	module, pkgs := goList(t)
	pkgs = reportBroken(t, module, pkgs)
	for _, p := range pkgs {
		name, ok := rel(module, p.ImportPath)
		if !ok || !matchAny([]string{"internal/...", "cmd/..."}, name) {
			continue
		}
		switch {
		case len(p.GoFiles) == 0 && len(p.TestGoFiles) > 0:
			t.Errorf("%s has only test files, so no package comment: add a doc.go saying what the package is for", name)
		case strings.TrimSpace(p.Doc) == "":
			t.Errorf("%s has no package comment: add one (in doc.go or the main file) saying what the package is for", name)
		case p.Name != "main" && !strings.HasPrefix(p.Doc, "Package "+p.Name+" "):
			t.Errorf("%s: package comment starts %q, want \"Package %s ...\"", name, firstWords(p.Doc), p.Name)
		}
	}
}

func firstWords(s string) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(len(f), 3)], " ")
}

// TestRuleSelfCheck shows that the checker can fail: synthetic packages
// with forbidden edges must be reported, allowed edges must not, and each
// message must name the package, the import and the rule.
func TestRuleSelfCheck(t *testing.T) {
	const mod = "example.com/m"
	tests := []struct {
		name     string
		from, to string
		rule     string // substring of the rule's name the message must quote; "" when allowed
	}{
		{"wire imports filter", "internal/kafka/wire", "internal/kafka/filter", "kafka/wire is the bottom"},
		{"wire subpackage imports telemetry", "internal/kafka/wire/sub", "internal/telemetry", "kafka/wire is the bottom"},
		{"filter imports proxy", "internal/kafka/filter", "internal/kafka/proxy", "filter API builds on kafka/wire alone"},
		{"filter imports wire", "internal/kafka/filter", "internal/kafka/wire", ""},
		{"a filter imports the proxy", "internal/kafka/filters/encrypt", "internal/kafka/proxy", "filters use the filter API"},
		{"a filter imports the config", "internal/kafka/filters/sasl", "internal/config", "filters use the filter API"},
		{"a filter imports the filter API", "internal/kafka/filters/authz", "internal/kafka/filter", ""},
		{"proxy imports config", "internal/kafka/proxy", "internal/config", "only the CLI imports config"},
		{"cli imports config", "internal/cli", "internal/config", ""},
		{"proxy imports devbroker", "internal/kafka/proxy", "internal/devbroker", "gateways never import"},
		{"admin imports a future bench package", "internal/admin", "internal/bench", "gateways never import"},
		{"a future llm gateway imports the mock", "internal/llm/gateway", "internal/mockllm", "gateways never import"},
		{"cli imports devbroker", "internal/cli", "internal/devbroker", ""},
		{"a future llm/api imports telemetry", "internal/llm/api", "internal/telemetry", "llm/api holds the canonical"},
		{"telemetry imports wire", "internal/telemetry", "internal/kafka/wire", "telemetry sits under"},
		{"main imports the proxy", "cmd/strait", "internal/kafka/proxy", "cmd/strait is a thin main"},
		{"main imports the cli", "cmd/strait", "internal/cli", ""},
		{"proxy imports the cli", "internal/kafka/proxy", "internal/cli", "the CLI is the top layer"},
		{"credstore imports sasl", "internal/auth/credstore", "internal/auth/sasl", "credstore keeps the users"},
		{"sasl imports credstore", "internal/auth/sasl", "internal/auth/credstore", "through their Credentials interface"},
		{"a test package imports devbroker", "test/interop", "internal/devbroker", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkgs := []pkg{{ImportPath: mod + "/" + tt.from, Imports: []string{"fmt", "github.com/twmb/franz-go/pkg/kmsg", mod + "x/other", mod + "/" + tt.to}}}
			got := violations(mod, pkgs, rules)
			if tt.rule == "" {
				if len(got) != 0 {
					t.Fatalf("%s → %s: got violations %q, want none", tt.from, tt.to, got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%s → %s: got %d messages %q, want 1", tt.from, tt.to, len(got), got)
			}
			for _, want := range []string{tt.from + " imports " + tt.to, tt.rule} {
				if !strings.Contains(got[0], want) {
					t.Errorf("message %q does not mention %q", got[0], want)
				}
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"internal/kafka/wire", "internal/kafka/wire", true},
		{"internal/kafka/wire", "internal/kafka/wire/sub", false},
		{"internal/kafka/filter", "internal/kafka/filters/addresses", false},
		{"internal/kafka/filters/...", "internal/kafka/filters", true},
		{"internal/kafka/filters/...", "internal/kafka/filters/addresses", true},
		{"internal/kafka/filters/...", "internal/kafka/filtersx", false},
		{"...", "cmd/strait", true},
	}
	for _, tt := range tests {
		if got := match(tt.pattern, tt.path); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}
