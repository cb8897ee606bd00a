package cli

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/straitgw/strait/internal/bench/llmload"
	"github.com/straitgw/strait/internal/bench/report"
)

// llmWorkloadFlags registers the LLM workload flags; the returned function
// builds the workload once flags are parsed.
func llmWorkloadFlags(fs *flag.FlagSet) func() (llmload.Workload, error) {
	d := llmload.DefaultWorkload()
	w := d
	fs.StringVar(&w.URL, "url", d.URL, "base URL of the gateway or provider (requests go to /v1/chat/completions or /v1/messages)")
	apiKey := fs.String("api-key", "", "API key to send (or set STRAIT_BENCH_API_KEY)")
	fs.StringVar(&w.Dialect, "dialect", d.Dialect, "openai or anthropic: the dialect of the requests")
	fs.StringVar(&w.Model, "model", d.Model, "model to ask for")
	fs.Float64Var(&w.Rate, "rate", d.Rate, "target rate in requests/s during measurement")
	fs.Float64Var(&w.RampFrom, "ramp-from", 0, "rate the warm-up starts at, climbing linearly to --rate (0: no ramp)")
	fs.DurationVar(&w.Warmup, "warmup", d.Warmup, "warm-up, not counted")
	fs.DurationVar(&w.Duration, "duration", d.Duration, "measured duration")
	fs.DurationVar(&w.Timeout, "timeout", d.Timeout, "client timeout of each request")
	fs.BoolVar(&w.Stream, "stream", false, "ask for streamed answers (server-sent events)")
	fs.BoolVar(&w.H2C, "h2c", false, "HTTP/2 without TLS over --conns connections (default: HTTP/1.1, a connection per request in flight)")
	fs.IntVar(&w.Conns, "conns", d.Conns, "h2c connections")
	fs.IntVar(&w.RequestBytes, "request-bytes", d.RequestBytes, "approximate request body size")
	fs.IntVar(&w.MaxTokens, "max-tokens", d.MaxTokens, "max_tokens of each request")
	fs.IntVar(&w.MaxInflight, "max-inflight", d.MaxInflight, "most requests outstanding; a request due beyond it is counted as due but not sent")
	fs.DurationVar(&w.Window, "window", d.Window, "window of the per-window p99 samples used by significance tests")
	fs.BoolVar(&w.Insecure, "insecure", false, "do not verify the server certificate of an https URL")
	return func() (llmload.Workload, error) {
		out := w
		out.APIKey = *apiKey
		if out.APIKey == "" {
			out.APIKey = os.Getenv("STRAIT_BENCH_API_KEY")
		}
		return out, out.Validate()
	}
}

func runBenchLLM(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench llm", stdout, stderr)
	workload := llmWorkloadFlags(fs)
	out := addRunFlags(fs, "the URL")
	if err := parse(fs, args); err != nil {
		return err
	}
	w, err := workload()
	if err != nil {
		return err
	}
	if *out.label == "" {
		*out.label = w.URL
	}
	label, jsonPath, htmlPath := out.label, out.json, out.report
	opt := llmload.Options{Label: *label, WatchPIDs: out.pids, Args: append([]string{"strait", "bench", "llm"}, args...)}
	if !*out.quiet {
		opt.Progress, opt.Overwrite = stderr, isTerminal(stderr)
	}
	res, err := llmload.Run(ctx, w, opt)
	if err != nil {
		return err
	}
	if err := report.LLMTable(stdout, res); err != nil {
		return err
	}
	return writeRunOutputs(*jsonPath, *htmlPath, "strait bench llm: "+*label, res, []report.Run{report.LLMRun(res)}, nil)
}
