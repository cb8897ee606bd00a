package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/bench/promscrape"
	"github.com/straitgw/strait/internal/bench/report"
	"github.com/straitgw/strait/internal/bench/result"
)

// benchCommands are the subcommands of `strait bench`.
func benchCommands() []command {
	return []command{
		{"kafka", "open-loop Kafka load: publish and end-to-end latency from intended send times", runBenchKafka},
		{"sweep", "step the target rate (or the producer count) and find the last sustained rate", runBenchSweep},
		{"layers", "direct vs. through the gateway vs. each further layer, against one broker, in one run", runBenchLayers},
		{"llm", "open-loop LLM load (OpenAI or Anthropic dialect, JSON or streaming, h1 or h2c)", runBenchLLM},
		{"llm-layers", "mock provider, then direct vs. through the gateway at one rate, per dialect pair, JSON and streaming", runBenchLLMLayers},
		{"compare", "a markdown table of result files side by side, with significance tests", runBenchCompare},
	}
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runGroup(ctx, "bench", "<command> [flags]", benchCommands(), func(w io.Writer) {
		fmt.Fprintln(w, "\nRun 'strait bench <command> -h' for its flags. Output formats: docs/bench.md.")
	}, args, stdout, stderr)
}

// workloadFlags registers the workload flags shared by kafka, sweep and
// layers. The returned function builds the workload once flags are parsed:
// defaults, then the --config properties file, then flags given on the
// command line.
func workloadFlags(fs *flag.FlagSet) func() (kafkaload.Workload, error) {
	d := kafkaload.DefaultWorkload()
	w := d
	bootstrap := fs.String("bootstrap", strings.Join(d.Bootstrap, ","), "comma-separated host:port list of brokers (or of the gateway)")
	fs.IntVar(&w.Topics, "topics", d.Topics, "number of topics")
	fs.StringVar(&w.TopicPrefix, "topic-prefix", d.TopicPrefix, "topic name, or name prefix when --topics > 1 (prefix-0, prefix-1, ...); created if missing")
	fs.IntVar(&w.Partitions, "partitions", d.Partitions, "partitions per topic (for topics it creates)")
	fs.IntVar(&w.Producers, "producers", d.Producers, "producers per topic, each its own client")
	fs.IntVar(&w.ConsumerGroups, "consumer-groups", d.ConsumerGroups, "consumer groups per topic; each reads every record (0: none)")
	fs.Float64Var(&w.Rate, "rate", d.Rate, "target publish rate in records/s over all producers; 0 = as fast as possible (closed loop)")
	fs.IntVar(&w.Size, "size", d.Size, "record value size in bytes (random payload)")
	fs.StringVar(&w.Payload, "payload", d.Payload, "random, or the reference record as json, avro or protobuf (bench/schemas)")
	fs.IntVar(&w.SchemaID, "schema-id", 0, "put the Confluent wire-format prefix with this schema id before each reference record")
	fs.StringVar(&w.Acks, "acks", d.Acks, "all, 1 or 0")
	fs.DurationVar(&w.Linger, "linger", d.Linger, "producer linger")
	fs.IntVar(&w.BatchBytes, "batch-size", d.BatchBytes, "producer batch size limit in bytes (0: client default)")
	fs.StringVar(&w.Compression, "compression", d.Compression, "none, gzip, snappy, lz4 or zstd")
	fs.BoolVar(&w.Idempotent, "idempotent", d.Idempotent, "idempotent producers (needs --acks all)")
	fs.IntVar(&w.MaxBuffered, "max-buffered", d.MaxBuffered, "records a producer may hold unacknowledged before the pacer waits")
	fs.DurationVar(&w.Warmup, "warmup", d.Warmup, "warm-up, not counted")
	fs.DurationVar(&w.Duration, "duration", d.Duration, "measured duration")
	fs.DurationVar(&w.Window, "window", d.Window, "window of the per-window p99 samples used by significance tests")
	fs.DurationVar(&w.Drain, "drain", d.Drain, "time consumers get after the last send to read everything")
	sec := &w.Security
	fs.BoolVar(&sec.TLS, "tls", false, "connect with TLS")
	fs.StringVar(&sec.CAFile, "tls-ca", "", "PEM CA bundle to trust")
	fs.StringVar(&sec.CertFile, "tls-cert", "", "client certificate (PEM) for mutual TLS")
	fs.StringVar(&sec.KeyFile, "tls-key", "", "client key (PEM)")
	fs.StringVar(&sec.ServerName, "tls-server-name", "", "name to verify in the server certificate")
	fs.BoolVar(&sec.Insecure, "tls-insecure", false, "do not verify the server certificate")
	fs.StringVar(&sec.Mechanism, "sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&sec.Username, "sasl-user", "", "SASL username")
	passFile := fs.String("sasl-password-file", "", "file holding the SASL password (or set STRAIT_BENCH_SASL_PASSWORD)")
	props := fs.String("config", "", "Kafka-style client properties file (security.protocol, sasl.*, ssl.* PEM locations, acks, linger.ms, ...); flags win")
	return func() (kafkaload.Workload, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		out := w
		out.Bootstrap = splitComma(*bootstrap)
		if *props != "" {
			p, err := kafkaload.ReadProperties(*props)
			if err != nil {
				return out, fmt.Errorf("--config: %w", err)
			}
			if len(p.Bootstrap) > 0 && !set["bootstrap"] {
				out.Bootstrap = p.Bootstrap
			}
			if p.Acks != "" && !set["acks"] {
				out.Acks = p.Acks
			}
			if p.Linger != nil && !set["linger"] {
				out.Linger = *p.Linger
			}
			if p.BatchBytes > 0 && !set["batch-size"] {
				out.BatchBytes = p.BatchBytes
			}
			if p.Compression != "" && !set["compression"] {
				out.Compression = p.Compression
			}
			if p.Idempotent != nil && !set["idempotent"] {
				out.Idempotent = *p.Idempotent
			}
			s := p.Security
			for name, apply := range map[string]func(){
				"tls": func() { s.TLS = sec.TLS }, "tls-ca": func() { s.CAFile = sec.CAFile },
				"tls-cert": func() { s.CertFile = sec.CertFile }, "tls-key": func() { s.KeyFile = sec.KeyFile },
				"tls-server-name": func() { s.ServerName = sec.ServerName }, "tls-insecure": func() { s.Insecure = sec.Insecure },
				"sasl-mechanism": func() { s.Mechanism = sec.Mechanism }, "sasl-user": func() { s.Username = sec.Username },
			} {
				if set[name] {
					apply()
				}
			}
			out.Security = s
		}
		if out.Acks == "-1" {
			out.Acks = "all"
		}
		if *passFile != "" {
			b, err := os.ReadFile(*passFile)
			if err != nil {
				return out, fmt.Errorf("--sasl-password-file: %w", err)
			}
			out.Security.Password = strings.TrimRight(string(b), "\r\n")
		} else if p, ok := os.LookupEnv("STRAIT_BENCH_SASL_PASSWORD"); ok {
			out.Security.Password = p
		}
		out.Security.Mechanism = strings.ToUpper(out.Security.Mechanism)
		return out, out.Validate()
	}
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// pidList is a repeatable --watch-pid flag.
type pidList []int

func (p *pidList) String() string { return fmt.Sprint(*p) }
func (p *pidList) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a process id", s)
	}
	*p = append(*p, n)
	return nil
}

// isTerminal reports whether w is a character device, to redraw the
// progress line in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// setDefaults changes the defaults of flags already registered, for a
// command that wants other ones (shorter phases, say). A value in
// parentheses is no default but a note that the command sets the flag
// itself ("(set by the run)"): it is added to the flag's description, and
// -h shows no default for the flag.
func setDefaults(fs *flag.FlagSet, defaults map[string]string) {
	for name, v := range defaults {
		f := fs.Lookup(name)
		if strings.HasPrefix(v, "(") {
			f.Usage += " " + v
			f.DefValue = "" // the zero value of the flags this is used on: PrintDefaults leaves it out
			continue
		}
		f.DefValue = v
		_ = fs.Set(name, v)
	}
}

// runFlags are the output flags of a single run (bench kafka, bench llm).
type runFlags struct {
	label, json, report *string
	quiet               *bool
	pids                pidList
}

func addRunFlags(fs *flag.FlagSet, labelDefault string) *runFlags {
	r := &runFlags{
		label:  fs.String("label", "", "name of this run in tables and comparisons (default: "+labelDefault+")"),
		json:   fs.String("json", "", "write the full result (schema in docs/bench.md) to this file"),
		report: fs.String("report", "", "write a self-contained HTML report to this file"),
		quiet:  fs.Bool("quiet", false, "no live progress line"),
	}
	fs.Var(&r.pids, "watch-pid", "report the CPU time and peak memory this process used during measurement (repeatable)")
	return r
}

// gatewayMetricsFlag registers --gateway-metrics, the admin /metrics URL
// of the gateway a Kafka run goes through.
func gatewayMetricsFlag(fs *flag.FlagSet) *string {
	return fs.String("gateway-metrics", "", "the gateway's admin /metrics URL (e.g. http://127.0.0.1:9190/metrics): count the Kafka requests it relayed during measurement, by API, for CPU per request")
}

// checkGatewayMetrics validates --gateway-metrics.
func checkGatewayMetrics(url string) error {
	if url == "" {
		return nil
	}
	if err := promscrape.CheckURL(url); err != nil {
		return fmt.Errorf("--gateway-metrics: %w", err)
	}
	return nil
}

// perAPIFlag registers --per-api, which splits CPU per request between
// Produce and Fetch with a produce-only run before the measured one.
func perAPIFlag(fs *flag.FlagSet, what string) *bool {
	return fs.Bool("per-api", false, "split CPU per request between Produce and Fetch: "+what+" first runs the workload without consumers, then with them, and derives the Fetch cost (docs/bench.md)")
}

func runBenchKafka(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench kafka", stdout, stderr)
	workload := workloadFlags(fs)
	out := addRunFlags(fs, "the bootstrap address")
	gwMetrics := gatewayMetricsFlag(fs)
	perAPI := perAPIFlag(fs, "the run")
	if err := parse(fs, args); err != nil {
		return err
	}
	w, err := workload()
	if err != nil {
		return err
	}
	if err := checkGatewayMetrics(*gwMetrics); err != nil {
		return err
	}
	if *perAPI && (w.ConsumerGroups == 0 || len(out.pids) == 0) {
		return errors.New("--per-api splits the CPU of watched processes between Produce and Fetch: it needs --watch-pid and --consumer-groups of 1 or more")
	}
	if *out.label == "" {
		*out.label = strings.Join(w.Bootstrap, ",")
	}
	label, jsonPath, htmlPath := out.label, out.json, out.report
	opt := runOptions(*label, out.pids, *out.quiet, stderr, args)
	opt.GatewayMetrics = *gwMetrics
	var produceOnly *result.Kafka
	if *perAPI {
		fmt.Fprintln(stderr, "== produce only (for --per-api)")
		po, poOpt := w, opt
		po.ConsumerGroups = 0
		poOpt.Label += " produce-only"
		if produceOnly, err = kafkaload.Run(ctx, po, poOpt); err != nil {
			return fmt.Errorf("the produce-only run: %w", err)
		}
		fmt.Fprintln(stderr, "== producers and consumers")
	}
	res, err := kafkaload.Run(ctx, w, opt)
	if err != nil {
		return err
	}
	if produceOnly != nil {
		result.SplitByAPI(res, produceOnly)
	}
	if err := report.Table(stdout, res); err != nil {
		return err
	}
	return writeOutputs(*jsonPath, *htmlPath, "strait bench kafka: "+*label, res, []*result.Kafka{res}, nil)
}

func runOptions(label string, pids []int, quiet bool, stderr io.Writer, args []string) kafkaload.Options {
	opt := kafkaload.Options{Label: label, WatchPIDs: pids, Args: append([]string{"strait", "bench"}, args...)}
	if !quiet {
		opt.Progress = stderr
		opt.Overwrite = isTerminal(stderr)
	}
	return opt
}

func writeOutputs(jsonPath, htmlPath, title string, doc any, kruns []*result.Kafka, ksweeps []*result.Sweep) error {
	var sweeps []report.SweepView
	for _, s := range ksweeps {
		sweeps = append(sweeps, report.KafkaSweep(s))
	}
	return writeRunOutputs(jsonPath, htmlPath, title, doc, report.KafkaRuns(kruns), sweeps)
}

// writeRunOutputs writes the --json document and the --report page.
func writeRunOutputs(jsonPath, htmlPath, title string, doc any, runs []report.Run, sweeps []report.SweepView) error {
	if jsonPath != "" {
		if err := result.Write(jsonPath, doc); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if htmlPath != "" {
		f, err := os.Create(htmlPath)
		if err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		if err := report.Page(f, title, runs, sweeps); err != nil {
			f.Close()
			return fmt.Errorf("--report: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	return nil
}

func runBenchCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench compare", stdout, stderr)
	htmlPath := fs.String("report", "", "also write a self-contained HTML page with the runs' percentile curves")
	// Flags may come before, between or after the file names.
	var files []string
	for {
		if err := parseFlags(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) < 2 {
		fmt.Fprintln(stderr, "strait bench compare: give at least two result files (the first is the baseline)")
		return errUsage
	}
	var runs []report.Run
	for _, path := range files {
		doc, err := result.Read(path)
		if err != nil {
			return err
		}
		r, ok := report.AnyRun(doc)
		if !ok {
			return fmt.Errorf("%s: not a single-run result (a sweep? compare the runs inside it with their own files)", path)
		}
		if r.Label == "" {
			r.Label = path
		}
		runs = append(runs, r)
	}
	if err := report.CompareRuns(stdout, runs); err != nil {
		return err
	}
	return writeRunOutputs("", *htmlPath, "strait bench compare", nil, runs, nil)
}

func runBenchSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench sweep", stdout, stderr)
	workload := workloadFlags(fs)
	from := fs.Float64("from", 1000, "first target rate, records/s")
	to := fs.Float64("to", 10000, "last target rate, records/s")
	step := fs.Float64("step", 1000, "rate increment, records/s")
	prodSweep := fs.String("producers-sweep", "", "instead of rates, step the producers per topic through this list (e.g. 1,2,4,8,16) at --rate records/s per producer")
	stopAfter := fs.Int("stop-after", 2, "stop after this many saturated steps in a row (0: run every step)")
	jsonPath := fs.String("json", "", "write the sweep (every step's full result) to this file")
	htmlPath := fs.String("report", "", "write a self-contained HTML report (achieved rate and p99 against target)")
	quiet := fs.Bool("quiet", false, "no live progress line")
	var pids pidList
	fs.Var(&pids, "watch-pid", "report this process's CPU time at each step (repeatable)")
	gwMetrics := gatewayMetricsFlag(fs)
	// Sweep steps are short by default.
	setDefaults(fs, map[string]string{"warmup": "3s", "duration": "10s", "window": "2s"})
	if err := parse(fs, args); err != nil {
		return err
	}
	w, err := workload()
	if err != nil {
		return err
	}
	if err := checkGatewayMetrics(*gwMetrics); err != nil {
		return err
	}
	type stepSpec struct {
		rate      float64
		producers int
	}
	var steps []stepSpec
	mode := "rate"
	if *prodSweep != "" {
		mode = "producers"
		if w.Rate <= 0 {
			return fmt.Errorf("--producers-sweep needs a per-producer --rate above 0")
		}
		for _, s := range splitComma(*prodSweep) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return fmt.Errorf("--producers-sweep: %q is not a producer count", s)
			}
			steps = append(steps, stepSpec{rate: w.Rate * float64(n*w.Topics), producers: n})
		}
	} else {
		if *from <= 0 || *to < *from || *step <= 0 {
			return fmt.Errorf("--from, --to, --step: want 0 < from <= to and step > 0 (got %g, %g, %g)", *from, *to, *step)
		}
		if n := (*to-*from) / *step + 1; n > 200 {
			return fmt.Errorf("--from/--to/--step give %.0f steps; at most 200", n)
		}
		for r := *from; r <= *to+1e-9; r += *step {
			steps = append(steps, stepSpec{rate: r, producers: w.Producers})
		}
	}
	sw := &result.Sweep{Schema: result.SchemaVersion, Kind: result.KindKafkaSweep, Mode: mode,
		Meta: result.CollectMeta(append([]string{"strait", "bench", "sweep"}, args...)), Workload: w}
	saturatedRun := 0
	for i, s := range steps {
		sw2 := w
		sw2.Rate, sw2.Producers = s.rate, s.producers
		label := fmt.Sprintf("%.0f/s", s.rate)
		if mode == "producers" {
			label = fmt.Sprintf("%d producers", s.producers)
		}
		fmt.Fprintf(stderr, "step %d/%d: %s\n", i+1, len(steps), label)
		opt := runOptions(label, pids, *quiet, stderr, args)
		opt.GatewayMetrics = *gwMetrics
		res, err := kafkaload.Run(ctx, sw2, opt)
		if err != nil {
			return fmt.Errorf("step %s: %w", label, err)
		}
		st := result.SweepStep{Target: s.rate, Producers: s.producers, Achieved: res.PublishRate,
			P99: res.PublishLatency.P99, E2EP99: res.E2ELatency.P99, Result: res}
		st.Saturated = result.Saturated(st.Target, st.Achieved)
		sw.Steps = append(sw.Steps, st)
		if st.Saturated {
			saturatedRun++
		} else {
			saturatedRun = 0
		}
		if *stopAfter > 0 && saturatedRun >= *stopAfter {
			fmt.Fprintf(stderr, "stopping: %d saturated steps in a row\n", saturatedRun)
			break
		}
	}
	result.Finish(sw)
	if err := report.SweepTable(stdout, sw); err != nil {
		return err
	}
	var runs []*result.Kafka
	for _, st := range sw.Steps {
		runs = append(runs, st.Result)
	}
	return writeOutputs(*jsonPath, *htmlPath, "strait bench sweep", sw, runs, []*result.Sweep{sw})
}
