package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/straitgw/strait/internal/telemetry"
)

const devRegistryWarning = "This is a development schema registry for development and tests only: no authentication, Avro-only compatibility checks."

// runRegistry serves the development schema registry until ctx ends, as
// `strait broker` serves the development Kafka cluster.
func runRegistry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("registry", stdout, stderr)
	var opts devregistry.Options
	fs.StringVar(&opts.Listen, "listen", devregistry.DefaultListen, "address to serve the Confluent Schema Registry REST API on")
	fs.StringVar(&opts.DataDir, "data-dir", "", "directory to keep the registry across restarts (default: memory only)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	log, err := telemetry.NewLogger(stderr, *logLevel, "text")
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	opts.Logger = log
	fmt.Fprintln(stderr, devRegistryWarning)
	srv, err := devregistry.Start(opts)
	if err != nil {
		return err
	}
	mode := "in memory"
	if opts.DataDir != "" {
		mode = "in " + opts.DataDir
	}
	fmt.Fprintf(stdout, "strait registry: serving %s (schemas kept %s)\n", srv.URL(), mode)
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
