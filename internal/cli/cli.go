// Package cli implements the strait command: one file per subcommand, the
// wiring from config to constructors, signals and graceful shutdown. It is
// the only package that imports config.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
		{"keys", "manage key-encryption keys in a filesystem vault: create, rotate, list", runKeys},
		{"mock", "run a mock LLM provider (mock llm; for tests and benchmarks only)", runMock},
		{"bench", "measure: Kafka load (kafka), rate sweeps (sweep), the layer table (layers), comparisons (compare)", runBench},
		{"version", "print the version", runVersion},
	}
}

// errUsage marks bad command-line usage: exit code 2.
var errUsage = errors.New("usage")

// Run runs the strait command with args and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
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
	fmt.Fprintln(w, "Strait: a gateway for Kafka clusters.")
	fmt.Fprintln(w, "\nUsage: strait <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun 'strait <command> -h' for a command's flags. Start with 'strait demo'.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("strait "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags, mapping bad usage to errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
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
