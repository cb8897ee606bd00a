package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/straitgw/strait/internal/mockllm"
	"github.com/straitgw/strait/internal/telemetry"
)

const mockWarning = "This is a mock LLM provider for tests and benchmarks: its answers are synthetic."

// runMock runs `strait mock llm`, the mock LLM provider that tests and
// benchmarks put behind the gateway (or in place of it, for a baseline).
func runMock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "llm" {
		w, err := helpOrUsage(args, stdout, stderr)
		if len(args) > 0 && !isHelp(args[0]) {
			fmt.Fprintf(w, "strait mock: unknown mock %q\n", args[0])
		}
		fmt.Fprintln(w, "Usage: strait mock llm [flags]\n\nRun 'strait mock llm -h' for the flags. (llm is the only mock there is.)")
		return err
	}
	fs := newFlags("mock llm", stdout, stderr)
	var opt mockllm.Options
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve on (HTTP/1.1 and cleartext HTTP/2, or TLS with --tls-cert)")
	fs.DurationVar(&opt.Latency, "latency", 0, "time to answer, from the request's arrival; a stream's deltas are spread evenly over it, the first at once")
	fs.DurationVar(&opt.Jitter, "jitter", 0, "vary each request's latency by a random amount within ± this")
	fs.Float64Var(&opt.SpikeRate, "spike-rate", 0, "fraction of requests (0 to 1) whose latency gets --spike added")
	fs.DurationVar(&opt.Spike, "spike", 0, "latency added to a spiking request")
	fs.IntVar(&opt.Deltas, "deltas", mockllm.DefaultDeltas, "deltas per stream (text or tool-call arguments)")
	fs.IntVar(&opt.ResponseBytes, "response-bytes", mockllm.DefaultResponseBytes, "approximate size of a non-streaming OpenAI text answer; sets the reply text's length, the same in both dialects")
	fs.Float64Var(&opt.ErrorRate, "error-rate", 0, "fraction of chat completion and message requests (0 to 1) answered with an error from --error-kinds")
	kinds := fs.String("error-kinds", "500", "comma-separated errors to inject: HTTP statuses (429,500,503,529,...) and overloaded, timeout, midstream, cut, reset")
	modelErrors := fs.String("model-errors", "", "errors for some models only, each at its own rate: 'MODEL=RATE[:KIND,KIND];...' (MODEL a glob), e.g. 'gpt-4o=0.2:500,503;claude-*=0.1:cut'")
	fs.IntVar(&opt.CutAfter, "cut-after", 0, "deltas the midstream and cut errors send before failing (0: half of them)")
	fs.DurationVar(&opt.RateLimitEvery, "429-every", 0, "open a window of 429s (with retry-after) at every multiple of this after start")
	fs.DurationVar(&opt.RateLimitFor, "429-for", 0, "how long each --429-every window lasts")
	fs.DurationVar(&opt.Hang, "hang", mockllm.DefaultHang, "how long the timeout error holds a request before dropping it")
	fs.StringVar(&opt.APIKey, "api-key", "", "accept only this API key (Authorization: Bearer, or x-api-key for Anthropic); default: any")
	models := fs.String("models", strings.Join(mockllm.DefaultModels, ","), "comma-separated model IDs GET /v1/models lists (any model is accepted)")
	fs.IntVar(&opt.MaxConcurrentStreams, "max-streams", mockllm.DefaultMaxConcurrentStreams, "HTTP/2 streams per connection")
	certFile := fs.String("tls-cert", "", "serve TLS (HTTP/2 by ALPN, and HTTP/1.1) with this certificate (PEM)")
	keyFile := fs.String("tls-key", "", "the certificate's private key (PEM)")
	logLevel := fs.String("log-level", "warn", "log level: debug (a line per injected fault), info, warn, error")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}

	var err error
	if opt.ErrorKinds, err = mockllm.ParseErrorKinds(*kinds); err != nil {
		return fmt.Errorf("--error-kinds: %w", err)
	}
	if opt.ModelErrors, err = mockllm.ParseModelErrors(*modelErrors); err != nil {
		return fmt.Errorf("--model-errors: %w", err)
	}
	for m := range strings.SplitSeq(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			opt.Models = append(opt.Models, m)
		}
	}
	if err := opt.Validate(); err != nil {
		return fmt.Errorf("invalid flags: %s", flagNames.Replace(err.Error()))
	}
	var tlsConfig *tls.Config
	if (*certFile == "") != (*keyFile == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if opt.Logger, err = telemetry.NewLogger(stderr, *logLevel, "text"); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}

	s := mockllm.New(opt)
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	served := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			served <- s.ServeTLS(l, tlsConfig)
		} else {
			served <- s.Serve(l)
		}
	}()
	fmt.Fprintln(stderr, mockWarning)
	describeMock(stdout, l.Addr().String(), tlsConfig != nil, opt, *kinds)

	select {
	case err := <-served:
		if err != nil {
			return fmt.Errorf("serving on %s: %w", l.Addr(), err)
		}
		return nil
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		s.Close()
	}
	return nil
}

// flagNames turns the option names in mockllm's validation errors into
// the flags that set them. Longer names come first: the replacer tries
// them in order at each position.
var flagNames = strings.NewReplacer(
	"RateLimitEvery", "--429-every", "RateLimitFor", "--429-for", "SpikeRate", "--spike-rate", "Spike", "--spike",
	"Latency", "--latency", "Jitter", "--jitter", "Deltas", "--deltas", "ResponseBytes", "--response-bytes",
	"ErrorRate", "--error-rate", "Hang", "--hang", "MaxConcurrentStreams", "--max-streams",
	"CutAfter", "--cut-after", "ModelErrors", "--model-errors",
)

func describeMock(w io.Writer, addr string, tlsOn bool, opt mockllm.Options, kinds string) {
	base, protos := "http://"+addr, "HTTP/1.1, h2c"
	if tlsOn {
		base, protos = "https://"+addr, "HTTP/1.1, h2 over TLS"
	}
	fmt.Fprintf(w, "strait mock llm: %s (%s): POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models\n", base, protos)
	fmt.Fprintf(w, "  latency %v", opt.Latency)
	if opt.Jitter > 0 {
		fmt.Fprintf(w, " ±%v", opt.Jitter)
	}
	if opt.SpikeRate > 0 {
		fmt.Fprintf(w, ", +%v for %g of requests", opt.Spike, opt.SpikeRate)
	}
	fmt.Fprintf(w, "; %d deltas per stream; answers of about %d bytes", opt.Deltas, opt.ResponseBytes)
	if opt.ErrorRate > 0 {
		fmt.Fprintf(w, "; errors %s at rate %g", kinds, opt.ErrorRate)
	}
	if opt.RateLimitEvery > 0 {
		fmt.Fprintf(w, "; 429 for %v every %v", opt.RateLimitFor, opt.RateLimitEvery)
	}
	for _, me := range opt.ModelErrors {
		fmt.Fprintf(w, "; %s: errors at rate %g", me.Model, me.Rate)
	}
	if opt.APIKey != "" {
		fmt.Fprint(w, "; one API key accepted")
	}
	fmt.Fprintln(w)
}
