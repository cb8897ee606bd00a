// Package cli implements the strait command: one file per subcommand, the
// wiring from config to constructors, signals and graceful shutdown. It is
// the only package that imports config.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"demo", "run a development cluster and the gateway in one process, with a demo config", runDemo},
		{"run", "run the gateway described by a YAML config (-c FILE)", runRun},
		{"validate", "check a config file and report every error (-c FILE)", runValidate},
		{"broker", "run a development Kafka cluster (for development and tests only)", runBroker},
		{"registry", "run a development schema registry (Confluent REST API; for development and tests only)", runRegistry},
		{"keys", "manage key-encryption keys in a filesystem vault or AWS KMS: create, rotate, list", runKeys},
		{"users", "manage the users of SASL PLAIN and SCRAM in a credential store: add, remove, list", runUsers},
		{"llm-keys", "manage LLM gateway keys and their limits in an api_keys_file: add (shows the key once), remove, list", runLLMKeys},
		{"mock", "run a mock LLM provider (mock llm; for tests and benchmarks only)", runMock},
		{"bench", "measure: Kafka load (kafka), rate sweeps (sweep), the layer table (layers), LLM load (llm, llm-layers), comparisons (compare)", runBench},
		{"version", "print the version", runVersion},
	}
}

// errUsage marks bad command-line usage: exit code 2.
var errUsage = errors.New("usage")

// isHelp says whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// Run runs the strait command with args and returns the exit code. Help
// asked for goes to stdout with exit code 0 (so that it can be paged);
// usage errors go to stderr with exit code 2.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if isHelp(args[0]) {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "strait %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "strait: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Strait: a gateway for Kafka clusters and LLM providers. Toward Kafka it speaks")
	fmt.Fprintln(w, "the Kafka protocol (and can encrypt and validate records); toward LLM")
	fmt.Fprintln(w, "providers it serves the OpenAI and Anthropic APIs, translating between them.")
	fmt.Fprintln(w, "\nUsage: strait <command> [flags]\n\nCommands:")
	printCommands(w, commands())
	fmt.Fprintln(w, "\nRun 'strait <command> -h' for a command's flags. Start with 'strait demo'.")
}

// helpOrUsage is where a command group (bench, keys, mock) prints its
// overview, and what it returns: stdout and flag.ErrHelp (exit 0) when args
// ask for help, stderr and errUsage (exit 2) when they name no command or
// one that does not exist.
func helpOrUsage(args []string, stdout, stderr io.Writer) (io.Writer, error) {
	if len(args) > 0 && isHelp(args[0]) {
		return stdout, flag.ErrHelp
	}
	return stderr, errUsage
}

// printCommands lists commands, their descriptions aligned after the
// longest name.
// runGroup runs `strait GROUP <command>`: the command args[0] names, or,
// without one or when asked for help, the usage: the synopsis, the
// commands, then what about writes.
func runGroup(ctx context.Context, group, synopsis string, cmds []command, about func(w io.Writer), args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		w, err := helpOrUsage(args, stdout, stderr)
		fmt.Fprintf(w, "Usage: strait %s %s\n\nCommands:\n", group, synopsis)
		printCommands(w, cmds)
		about(w)
		return err
	}
	names := make([]string, len(cmds))
	for i, c := range cmds {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
		names[i] = c.name
	}
	want := names[len(names)-1]
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + want
	}
	fmt.Fprintf(stderr, "strait %s: unknown command %q (want %s)\n", group, args[0], want)
	return errUsage
}

func printCommands(w io.Writer, cmds []command) {
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.usage)
	}
}

// newFlags returns a flag set that reports errors instead of exiting. What
// it prints while parsing goes to stdout when help was asked for (-h), to
// stderr otherwise: see parseFlags.
func newFlags(name string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("strait "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{stdout: stdout, stderr: stderr})
	return fs
}

// flagOutput is the output of a flag set made by newFlags: stderr, but
// held back while parseFlags runs, which then decides where it goes.
type flagOutput struct {
	stdout, stderr io.Writer
	held           *bytes.Buffer
}

func (o *flagOutput) Write(p []byte) (int, error) {
	if o.held != nil {
		return o.held.Write(p)
	}
	return o.stderr.Write(p)
}

// parseFlags is fs.Parse, except that the usage the flag package prints
// for -h goes to stdout; for a bad flag it goes to stderr with the error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	o, ok := fs.Output().(*flagOutput)
	if !ok {
		return fs.Parse(args)
	}
	var held bytes.Buffer
	o.held = &held
	err := fs.Parse(args)
	o.held = nil
	w := o.stderr
	if errors.Is(err, flag.ErrHelp) {
		w = o.stdout
	}
	_, _ = w.Write(held.Bytes())
	return err
}

// parse parses flags, mapping bad usage to errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	return nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
