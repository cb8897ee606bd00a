package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/straitgw/strait/internal/bench/llmload"
	"github.com/straitgw/strait/internal/bench/report"
	"github.com/straitgw/strait/internal/bench/result"
)

// llmLayersConfig is the gateway of `strait bench llm-layers`: both
// dialects on one listener, gpt-* to the mock as an OpenAI provider and
// claude-* to the same mock as an Anthropic provider.
const llmLayersConfig = `admin: {listen: %q}
log: {level: warn}
llm:
  listeners:
    - {listen: %q, protocols: [http1, h2c], http1_server: %s, http2_server: %s}
  api_keys:
    - {name: bench, key: %q}
  providers:
    openai-mock: {dialect: openai, base_url: %q, api_key: mock-key, http: %s, max_conns: 50000, response_timeout: 120s, request_timeout: 10m}
    anthropic-mock: {dialect: anthropic, base_url: %q, api_key: mock-key, http: %s, max_conns: 50000, response_timeout: 120s, request_timeout: 10m}
  routes:
    - {match: "gpt-*", provider: openai-mock}
    - {match: "claude-*", provider: anthropic-mock}
`

// llmPair is one client dialect → provider dialect combination.
type llmPair struct{ client, provider string }

func (p llmPair) String() string { return p.client + "→" + p.provider }

func parsePairs(s string) ([]llmPair, error) {
	var out []llmPair
	for _, item := range splitComma(s) {
		c, p, ok := strings.Cut(item, ">")
		ok = ok && (c == llmload.OpenAI || c == llmload.Anthropic) && (p == llmload.OpenAI || p == llmload.Anthropic)
		if !ok {
			return nil, fmt.Errorf("--pairs: %q: want CLIENT>PROVIDER with openai or anthropic on each side", item)
		}
		out = append(out, llmPair{c, p})
	}
	return out, nil
}

func runBenchLLMLayers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench llm-layers", stdout, stderr)
	workload := llmWorkloadFlags(fs)
	latency := fs.Duration("latency", 1500*time.Millisecond, "the mock provider's fixed latency")
	deltas := fs.Int("deltas", 10, "text deltas per streamed answer, spread over --latency")
	pairsFlag := fs.String("pairs", "openai>openai,anthropic>anthropic,openai>anthropic,anthropic>openai", "client>provider dialect pairs to measure")
	modes := fs.String("modes", "json,stream", "json, stream or both")
	mockPort := fs.Int("mock-port", 28000, "port of the mock provider started for the run")
	gatewayPort := fs.Int("gateway-port", 28080, "port of the gateway (its admin listener takes the next port)")
	strait := fs.String("strait", "", "strait binary to run the mock and the gateway with (default: this one)")
	h1server := fs.String("http1-server", "net/http", "the gateway listener's http1_server: net/http or strait")
	h2server := fs.String("http2-server", "net/http", "the gateway listener's http2_server: net/http or strait")
	outDir := fs.String("out-dir", "", "write one result JSON per run here (for strait bench compare)")
	jsonPath := fs.String("json", "", "write every run's result, as a JSON array, to this file")
	htmlPath := fs.String("report", "", "write a self-contained HTML report of every run's latency curves")
	quiet := fs.Bool("quiet", false, "no live progress line")
	var gatewayEnv multiFlag
	fs.Var(&gatewayEnv, "gateway-env", "NAME=VALUE added to the gateway's environment only (repeatable), e.g. GOGC=off and GOMEMLIMIT=1GiB to measure the gateway under a memory-limit collector while the mock and the generator keep theirs")
	setDefaults(fs, map[string]string{"warmup": "3s", "duration": "10s", "window": "2s", "rate": "200", "url": "(set by the run)"})
	if err := parse(fs, args); err != nil {
		return err
	}
	w, err := workload()
	if err != nil {
		return err
	}
	pairs, err := parsePairs(*pairsFlag)
	if err != nil {
		return err
	}
	var streams []bool
	for _, m := range splitComma(*modes) {
		switch m {
		case "json":
			streams = append(streams, false)
		case "stream":
			streams = append(streams, true)
		default:
			return fmt.Errorf("--modes: %q: use json and/or stream", m)
		}
	}
	exe := *strait
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	for _, kv := range gatewayEnv {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return fmt.Errorf("--gateway-env: %q: use NAME=VALUE, e.g. GOMEMLIMIT=1GiB", kv)
		}
	}
	dir, err := os.MkdirTemp("", "strait-llm-layers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	mockAddr := fmt.Sprintf("127.0.0.1:%d", *mockPort)
	gwAddr := fmt.Sprintf("127.0.0.1:%d", *gatewayPort)
	mock, err := startChild(ctx, exe, []string{"mock", "llm", "--listen", mockAddr, "--latency", latency.String(),
		"--deltas", strconv.Itoa(*deltas), "--log-level", "warn"}, os.Environ(), stderr)
	if err != nil {
		return fmt.Errorf("starting the mock: %w", err)
	}
	defer stopChild(mock)
	upstream := "h1"
	if w.H2C {
		upstream = "h2c"
	}
	const key = "strait-bench-key"
	mockURL := "http://" + mockAddr
	if *h1server != "net/http" && *h1server != "strait" {
		return fmt.Errorf("--http1-server: %q: use net/http or strait", *h1server)
	}
	if *h2server != "net/http" && *h2server != "strait" {
		return fmt.Errorf("--http2-server: %q: use net/http or strait", *h2server)
	}
	cfg := fmt.Sprintf(llmLayersConfig, fmt.Sprintf("127.0.0.1:%d", *gatewayPort+1), gwAddr, *h1server, *h2server, key, mockURL, upstream, mockURL, upstream)
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	gw, err := startChild(ctx, exe, []string{"run", "-c", cfgPath}, append(os.Environ(), gatewayEnv...), stderr)
	if err != nil {
		return fmt.Errorf("starting the gateway: %w", err)
	}
	defer stopChild(gw)
	for _, a := range []string{mockAddr, gwAddr} {
		if err := waitListening(ctx, a, 20*time.Second); err != nil {
			return err
		}
	}

	type row struct {
		mode          string
		pair          llmPair
		direct, thru  *result.LLM
		gatewayCPUms  float64
		gatewayPeakMB float64
		// CPU µs per request of the mock and the generator through the
		// gateway (0: not measured).
		mockCPUus, generatorCPUus float64
	}
	var rows []row
	var all []*result.LLM
	for _, stream := range streams {
		mode := "json"
		if stream {
			mode = "stream"
		}
		for _, p := range pairs {
			model := "gpt-bench"
			if p.provider == llmload.Anthropic {
				model = "claude-bench"
			}
			r := row{mode: mode, pair: p}
			for _, through := range []bool{false, true} {
				rw := w
				rw.Dialect, rw.Model, rw.Stream = p.client, model, stream
				rw.URL, rw.APIKey = mockURL, "mock-key"
				label := fmt.Sprintf("%s %s direct", mode, p)
				pids := []int{mock.Process.Pid}
				if through {
					rw.URL, rw.APIKey = "http://"+gwAddr, key
					label = fmt.Sprintf("%s %s via strait", mode, p)
					pids = append(pids, gw.Process.Pid)
				}
				fmt.Fprintf(stderr, "== %s\n", label)
				opt := llmload.Options{Label: label, WatchPIDs: pids, Args: append([]string{"strait", "bench", "llm-layers"}, args...)}
				if !*quiet {
					opt.Progress, opt.Overwrite = stderr, isTerminal(stderr)
				}
				res, err := llmload.Run(ctx, rw, opt)
				if err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				res.Processes[0].Name = "mock"
				if through {
					res.Processes[1].Name = "gateway"
					r.thru = res
					r.gatewayCPUms = res.Processes[1].CPUPerKRequests
					r.gatewayPeakMB = float64(res.Processes[1].PeakRSSBytes) / (1 << 20)
					r.mockCPUus = res.Processes[0].CPUMicrosPerRequest
					if res.Generator != nil {
						r.generatorCPUus = res.Generator.CPUMicrosPerRequest
					}
				} else {
					r.direct = res
				}
				all = append(all, res)
				if *outDir != "" {
					if err := os.MkdirAll(*outDir, 0o755); err != nil {
						return err
					}
					name := strings.NewReplacer(" ", "-", "→", "-to-").Replace(label) + ".json"
					if err := result.Write(filepath.Join(*outDir, name), res); err != nil {
						return err
					}
				}
			}
			rows = append(rows, r)
		}
	}

	var b strings.Builder
	proto := "HTTP/1.1"
	if w.H2C {
		proto = fmt.Sprintf("h2c over %d connections", w.Conns)
	}
	fmt.Fprintf(&b, "%s req/s, mock latency %s, %s, %s warm-up + %s measured per run\n\n", report.Num(w.Rate), *latency, proto, w.Warmup, w.Duration)
	fmt.Fprintln(&b, "| mode | client→provider | answered | direct p50 | direct p99 | via Strait p50 | via Strait p99 | added p50 | added p99 | first event added p99 | gateway CPU µs per req | gateway peak RSS MiB | mock CPU µs per req | generator CPU µs per req |")
	fmt.Fprintln(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		first := "–"
		if r.thru.FirstEvent != nil && r.direct.FirstEvent != nil {
			first = fmt.Sprintf("%+.2f", r.thru.FirstEvent.P99-r.direct.FirstEvent.P99)
		}
		answered := "–"
		if r.thru.Due > 0 {
			answered = fmt.Sprintf("%.1f%%", 100*float64(r.thru.OK)/float64(r.thru.Due))
		}
		valid := ""
		if !r.direct.Valid || !r.thru.Valid {
			valid = " (invalid)"
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s | %.1f | %.1f | %.1f | %.1f | %+.2f | %+.2f | %s | %.1f | %.1f | %.1f | %.1f |\n",
			r.mode, r.pair, valid, answered, r.direct.Latency.P50, r.direct.Latency.P99, r.thru.Latency.P50, r.thru.Latency.P99,
			r.thru.Latency.P50-r.direct.Latency.P50, r.thru.Latency.P99-r.direct.Latency.P99, first, r.gatewayCPUms, r.gatewayPeakMB, r.mockCPUus, r.generatorCPUus)
	}
	for _, res := range all {
		for _, p := range res.Problems {
			fmt.Fprintf(&b, "\n**%s does not count: %s**", res.Label, p)
		}
	}
	b.WriteString("\n")
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	var runs []report.Run
	for _, res := range all {
		runs = append(runs, report.LLMRun(res))
	}
	var doc any
	if *jsonPath != "" {
		doc = all
	}
	return writeRunOutputs(*jsonPath, *htmlPath, "strait bench llm-layers", doc, runs, nil)
}
