// Package devbroker runs a development Kafka cluster inside the current
// process, built on franz-go's kfake. It backs `strait broker`, `strait demo`,
// tests and benchmarks.
//
// It is for development and tests only, never production: kfake handles every
// request of the cluster on one goroutine, keeps records in memory (about 2.5
// bytes per byte stored) unless given a data directory, and deviates from
// Apache Kafka in ways real clients notice. This package works around one of
// them, the SaslHandshake versions librdkafka needs (apiversions.go).
//
// The package depends on nothing of Strait's; only the CLI, tests and
// benchmarks should import it.
package devbroker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Defaults applied by Start to zero-valued Options fields.
const (
	DefaultBrokers    = 3
	DefaultListen     = "127.0.0.1:9092"
	DefaultPartitions = 3
)

// clusterID is what every devbroker cluster calls itself. It is fixed rather
// than kfake's default so that the ApiVersions hook knows which cluster a v5
// ApiVersions request is asking for (KIP-1242), see apiversions.go.
const clusterID = "strait-devbroker"

// retentionInterval is how often size retention runs when RetentionBytes is
// set; it is also the value given to the broker config
// log.cleaner.backoff.ms.
const retentionInterval = time.Second

// Options configures Start. The zero value of each field means its default.
type Options struct {
	// Brokers is how many brokers to run, with node IDs 0..Brokers-1.
	// Zero means DefaultBrokers.
	Brokers int

	// Listen is host:port for broker 0; broker i listens on port+i. Port 0
	// lets the system pick a free port for every broker (tests). Only
	// loopback is supported (kfake binds 127.0.0.1); "" means
	// DefaultListen.
	Listen string

	// DataDir, if set, persists the cluster across restarts (kfake
	// DataDir). "" keeps everything in memory. On restart the topics,
	// records, offsets and configs in DataDir come back, while the SASL
	// users are always the ones in Users: see Start. After a crash
	// (no Close) they come back too, but for the requests in flight:
	// a topic is saved before the first records produced to it are
	// stored (topics.go), and records are in their segment files
	// before they are acknowledged (on disk, not only in the page
	// cache, with SyncWrites).
	DataDir string

	// SyncWrites fsyncs every produced batch when DataDir is set.
	SyncWrites bool

	// Partitions is the partition count of auto-created and seeded
	// topics. Zero means DefaultPartitions.
	Partitions int

	// AutoCreateTopics lets Metadata requests that ask for it create
	// topics. The zero value is false; the CLI passes true.
	AutoCreateTopics bool

	// Topics are created at start if they do not exist yet.
	Topics []string

	// Users are the SASL users. A non-empty list enables SASL (PLAIN,
	// SCRAM-SHA-256 and SCRAM-SHA-512) on every broker; a User with an
	// empty Mechanism is added for all three.
	Users []User

	// TLS, if set, makes every broker listen with TLS only. Consider
	// SessionTicketsDisabled: kafka-python 2.0.2 breaks on the tickets Go's
	// TLS 1.3 server sends right after the handshake.
	TLS *tls.Config

	// Blackhole acknowledges produce requests without storing the records
	// (kfake BlackholeProduce): offsets advance, nothing can be consumed.
	// For produce throughput benchmarks.
	Blackhole bool

	// SyntheticFetchBytes > 0 answers every fetch of an existing partition
	// with copies of one canned batch of records whose values are this
	// many bytes (kfake SyntheticFetch), from any offset, with a high
	// watermark of 1<<62. Produce still stores unless Blackhole is set.
	// For fetch throughput benchmarks.
	SyntheticFetchBytes int

	// RetentionBytes > 0 caps each partition's stored bytes, so that long
	// runs in storing mode do not grow memory without bound. See
	// retention.go for how it is applied.
	RetentionBytes int64

	// Advertise, if set, is host:port the brokers tell clients to
	// connect to instead of where they listen: broker i advertises
	// port+i. For putting a relay between clients and brokers (a
	// benchmark's floor, a container's published port). It needs a
	// fixed Listen port.
	Advertise string

	// Logger receives kfake's own log at warn level and above. nil
	// discards it.
	Logger *slog.Logger
}

// Cluster is a running development cluster.
type Cluster struct {
	kf    *kfake.Cluster
	addrs []string

	stop      chan struct{} // closed by Close to stop background work
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Start starts a cluster. It returns an error, and leaves nothing running, if
// the options are invalid or a port cannot be listened on.
func Start(opts Options) (*Cluster, error) {
	brokers := opts.Brokers
	switch {
	case brokers == 0:
		brokers = DefaultBrokers
	case brokers < 0:
		return nil, fmt.Errorf("devbroker: brokers must be positive, got %d", brokers)
	}
	partitions := opts.Partitions
	switch {
	case partitions == 0:
		partitions = DefaultPartitions
	case partitions < 0:
		return nil, fmt.Errorf("devbroker: partitions must be positive, got %d", partitions)
	}
	port, err := parseListen(opts.Listen, brokers)
	if err != nil {
		return nil, err
	}
	var advertise kfake.Opt
	if opts.Advertise != "" {
		host, aport, err := parseAdvertise(opts.Advertise, port, brokers)
		if err != nil {
			return nil, err
		}
		advertise = kfake.ListenFn(advertisingListen(host, port, aport))
	}
	if opts.SyntheticFetchBytes < 0 {
		return nil, fmt.Errorf("devbroker: synthetic fetch bytes must not be negative, got %d", opts.SyntheticFetchBytes)
	}
	if opts.RetentionBytes < 0 {
		return nil, fmt.Errorf("devbroker: retention bytes must not be negative, got %d", opts.RetentionBytes)
	}
	users, err := expandUsers(opts.Users)
	if err != nil {
		return nil, err
	}
	for _, t := range opts.Topics {
		if err := validateTopic(t); err != nil {
			return nil, err
		}
	}

	kopts := []kfake.Opt{
		kfake.ClusterID(clusterID),
		kfake.DefaultNumPartitions(partitions),
		kfake.BrokerConfigs(brokerConfigs(opts.RetentionBytes)),
	}
	if port == 0 {
		kopts = append(kopts, kfake.NumBrokers(brokers))
	} else {
		ports := make([]int, brokers)
		for i := range ports {
			ports[i] = port + i
		}
		kopts = append(kopts, kfake.Ports(ports...))
	}
	if advertise != nil {
		kopts = append(kopts, advertise)
	}
	if opts.AutoCreateTopics {
		kopts = append(kopts, kfake.AllowAutoTopicCreation())
	}
	if opts.DataDir != "" {
		kopts = append(kopts, kfake.DataDir(opts.DataDir))
		if opts.SyncWrites {
			kopts = append(kopts, kfake.SyncWrites())
		}
	}
	if len(users) > 0 {
		kopts = append(kopts, kfake.EnableSASL())
		for _, u := range users {
			kopts = append(kopts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
		}
		if opts.DataDir != "" {
			// On restart kfake replaces the users given as options
			// with the ones it saved (and saves an empty list when
			// SASL was off), so a changed --user flag would be
			// ignored, or every SCRAM user lost. Drop the saved list
			// so that Users is what the cluster accepts. (kfake
			// v0.0.0-20260918054303, persist.go loadSASL.)
			if err := os.Remove(filepath.Join(opts.DataDir, "sasl.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("devbroker: resetting saved SASL users: %w", err)
			}
		}
	}
	if opts.TLS != nil {
		kopts = append(kopts, kfake.TLS(opts.TLS))
	}
	if opts.Blackhole {
		kopts = append(kopts, kfake.BlackholeProduce())
	}
	if opts.SyntheticFetchBytes > 0 {
		kopts = append(kopts, kfake.SyntheticFetch(kfake.SyntheticBatch{RecordBytes: opts.SyntheticFetchBytes}))
	}
	if opts.Logger != nil {
		kopts = append(kopts, kfake.WithLogger(slogAdapter{opts.Logger}))
	}

	var versions *apiVersionsTable
	if len(users) > 0 {
		// Learn kfake's ApiVersions answer before any client can
		// connect, so the hook is in place for the first request.
		if versions, err = probeAPIVersions(); err != nil {
			return nil, fmt.Errorf("devbroker: %w", err)
		}
	}

	kf, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, startError(err, port, brokers)
	}
	c := &Cluster{
		kf:    kf,
		addrs: kf.ListenAddrs(),
		stop:  make(chan struct{}),
	}
	if versions != nil {
		installSASLHandshakeFix(kf, versions)
	}
	if opts.DataDir != "" {
		installTopicSaver(kf, opts.DataDir, opts.Logger)
	}
	for _, t := range opts.Topics {
		// SeedTopics would be skipped when DataDir already holds a
		// cluster, so create whatever is missing either way.
		if kf.TopicInfo(t) != nil {
			continue
		}
		if err := kf.CreateTopic(t, int32(partitions), nil); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			c.Close()
			return nil, fmt.Errorf("devbroker: creating topic %q: %w", t, err)
		}
	}
	if opts.RetentionBytes > 0 && !opts.Blackhole {
		c.wg.Add(1)
		go c.runRetention()
	}
	return c, nil
}

// Addrs returns host:port of every broker as started, in node-id order.
// After Kfake().AddNode or RemoveNode, ask Kfake().ListenAddrs instead.
func (c *Cluster) Addrs() []string {
	return append([]string(nil), c.addrs...)
}

// Kfake returns the underlying kfake cluster, for fault tests
// (MoveTopicPartition, RemoveNode/AddNode, ControlKey, ...). Its methods must
// not be called after Close: most of them block forever on a closed cluster.
//
// With SASL on, the cluster already holds an ApiVersions ControlKey
// (apiversions.go), and with DataDir a Produce ControlKey (topics.go). kfake
// runs controls in the order they were added and stops at the first that
// answers, so a later control of the same key sees only the requests those
// leave to kfake.
func (c *Cluster) Kfake() *kfake.Cluster { return c.kf }

// Close stops the cluster, persisting it first when DataDir is set. It is
// safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		// Background work calls into kfake, which blocks forever once
		// the cluster is closed, so it must stop first.
		close(c.stop)
		c.wg.Wait()
		c.kf.Close()
	})
}

func parseListen(listen string, brokers int) (int, error) {
	if listen == "" {
		listen = DefaultListen
	}
	host, portS, err := net.SplitHostPort(listen)
	if err != nil {
		return 0, fmt.Errorf("devbroker: listen address %q: %w", listen, err)
	}
	switch host {
	case "127.0.0.1", "localhost", "":
	default:
		// As of kfake v0.0.0-20260918054303 brokers always bind
		// 127.0.0.1 and advertise what they bound.
		return 0, fmt.Errorf("devbroker: listen address %q: only 127.0.0.1 is supported", listen)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("devbroker: listen address %q: invalid port", listen)
	}
	if port != 0 && port+brokers-1 > 65535 {
		return 0, fmt.Errorf("devbroker: listen address %q: %d brokers need ports up to %d, above 65535", listen, brokers, port+brokers-1)
	}
	return port, nil
}

// validateTopic applies Kafka's topic name rules, which kfake's CreateTopic
// does not check (as of v0.0.0-20260918054303), and which keep a seeded name
// from turning into a path inside DataDir.
func validateTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("devbroker: invalid topic name %q", t)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("devbroker: invalid topic name %q: only ASCII letters, digits, '.', '_' and '-' are allowed", t)
		}
	}
	return nil
}

func startError(err error, port, brokers int) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		if port == 0 {
			return fmt.Errorf("devbroker: a port is already in use: %w", err)
		}
		return fmt.Errorf("devbroker: a port in 127.0.0.1:%d-%d is already in use (another broker running? choose another --listen port): %w", port, port+brokers-1, err)
	}
	return fmt.Errorf("devbroker: starting kfake: %w", err)
}

// slogAdapter forwards kfake's warnings and errors to slog; its info and
// debug output is one line per request and is dropped.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	var sl slog.Level
	switch level {
	case kfake.LogLevelError:
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	default:
		return
	}
	a.l.Log(context.Background(), sl, fmt.Sprintf(format, args...), "component", "kfake")
}

var _ kfake.Logger = slogAdapter{}
