package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"

	"github.com/straitgw/strait/internal/devbroker"
	"github.com/straitgw/strait/internal/telemetry"
)

const devWarning = "This is a development Kafka cluster (franz-go's kfake) for development and tests only: not for production data."

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("broker", stdout, stderr)
	opts := devbroker.Options{AutoCreateTopics: true}
	fs.IntVar(&opts.Brokers, "brokers", devbroker.DefaultBrokers, "number of brokers")
	fs.StringVar(&opts.Listen, "listen", devbroker.DefaultListen, "address of broker 0; broker i listens on port+i")
	fs.StringVar(&opts.Advertise, "advertise", "", "host:port brokers tell clients instead of --listen (broker i: port+i), for a relay in front")
	fs.StringVar(&opts.DataDir, "data-dir", "", "directory to persist data across restarts (default: memory only)")
	fs.BoolVar(&opts.SyncWrites, "sync-writes", false, "fsync every write to --data-dir")
	fs.IntVar(&opts.Partitions, "partitions", devbroker.DefaultPartitions, "partitions of auto-created topics")
	noAuto := fs.Bool("no-auto-create", false, "do not create topics on first use")
	var topics, users multiFlag
	fs.Var(&topics, "topic", "create this topic at start (repeatable)")
	fs.Var(&users, "user", "SASL user MECHANISM:name:password or name:password for PLAIN and both SCRAMs (repeatable; enables SASL)")
	certFile := fs.String("tls-cert", "", "serve TLS with this certificate (PEM)")
	keyFile := fs.String("tls-key", "", "the certificate's private key (PEM)")
	fs.BoolVar(&opts.Blackhole, "blackhole", false, "benchmark mode: acknowledge produce without storing")
	fs.IntVar(&opts.SyntheticFetchBytes, "synthetic-fetch", 0, "benchmark mode: serve fetches with synthetic records of this value size")
	fs.Int64Var(&opts.RetentionBytes, "retention-bytes", 0, "cap each partition's stored bytes (bounds memory in long runs)")
	logLevel := fs.String("log-level", "warn", "kfake log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	opts.AutoCreateTopics = !*noAuto
	opts.Topics = topics
	for _, u := range users {
		pu, err := devbroker.ParseUser(u)
		if err != nil {
			return fmt.Errorf("--user: %w", err)
		}
		opts.Users = append(opts.Users, pu)
	}
	if (*certFile == "") != (*keyFile == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true}
	}
	log, err := telemetry.NewLogger(stderr, *logLevel, "text")
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	opts.Logger = log
	fmt.Fprintln(stderr, devWarning)
	c, err := devbroker.Start(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	describeBroker(stdout, opts, c)
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping")
	return nil
}

func describeBroker(w io.Writer, opts devbroker.Options, c *devbroker.Cluster) {
	mode := "storing records in memory"
	if opts.DataDir != "" {
		mode = "storing records in " + opts.DataDir
	}
	if opts.Blackhole {
		mode = "blackhole produce (records are acknowledged, not stored)"
	}
	fmt.Fprintf(w, "strait broker: %d brokers at %v (%s", len(c.Addrs()), c.Addrs(), mode)
	if len(opts.Users) > 0 {
		fmt.Fprintf(w, ", SASL on")
	}
	if opts.TLS != nil {
		fmt.Fprintf(w, ", TLS on")
	}
	fmt.Fprintln(w, ")")
}
