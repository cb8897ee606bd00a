// Package kafkaload is the Kafka load generator behind `strait bench kafka`
// and `strait bench sweep`: producers and consumers in one process
// (franz-go), open-loop pacing, and latency measured from each record's
// intended send time so that a slow system shows as rising latency rather
// than as a lower send rate.
package kafkaload

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Workload describes one run. It is written, whole, into the result JSON
// (the password is not).
type Workload struct {
	Bootstrap   []string `json:"bootstrap"`
	Topics      int      `json:"topics"`
	TopicPrefix string   `json:"topic_prefix"`
	Partitions  int      `json:"partitions"`
	// Producers is per topic; each is its own client (own connections).
	Producers int `json:"producers_per_topic"`
	// ConsumerGroups is per topic: every group reads every record.
	ConsumerGroups int `json:"consumer_groups_per_topic"`
	// Rate is the target publish rate in records per second over all
	// producers; 0 runs closed-loop, as fast as the system accepts.
	Rate float64 `json:"target_rate"`
	// Size is the value size of random payloads (reference records have
	// their own size).
	Size    int    `json:"size"`
	Payload string `json:"payload"`
	// SchemaID, if set, puts the Confluent wire-format prefix (magic byte
	// 0, the id, and for Protobuf the message index [0]) before each
	// reference record, as a registry-aware serializer does: what a
	// schema-validating gateway reads.
	SchemaID    int           `json:"schema_id,omitempty"`
	Acks        string        `json:"acks"`
	Linger      time.Duration `json:"linger_ns"`
	BatchBytes  int           `json:"batch_bytes"`
	Compression string        `json:"compression"`
	Idempotent  bool          `json:"idempotent"`
	// MaxBuffered bounds records a producer holds unacknowledged; when it
	// is full the pacer waits and the wait shows in the latency.
	MaxBuffered int           `json:"max_buffered"`
	Warmup      time.Duration `json:"warmup_ns"`
	Duration    time.Duration `json:"duration_ns"`
	// Window is the length of the windows whose p99s feed significance
	// tests.
	Window time.Duration `json:"window_ns"`
	// Drain bounds how long consumers get, after the last record is
	// sent, to read everything.
	Drain    time.Duration `json:"drain_ns"`
	Security Security      `json:"security"`
}

// Defaults for flags left out.
const (
	DefaultTopicPrefix = "strait-bench"
	DefaultPartitions  = 10
	DefaultRate        = 1000
	DefaultSize        = 1024
	DefaultAcks        = "all"
	DefaultWarmup      = 5 * time.Second
	DefaultDuration    = 30 * time.Second
	DefaultWindow      = 10 * time.Second
	DefaultDrain       = 30 * time.Second
	DefaultMaxBuffered = 10000
)

// DefaultWorkload is one topic, one producer, one consumer group, 1,000
// records of 1 KiB per second, acks=all.
func DefaultWorkload() Workload {
	return Workload{
		Bootstrap: []string{"127.0.0.1:9092"}, Topics: 1, TopicPrefix: DefaultTopicPrefix,
		Partitions: DefaultPartitions, Producers: 1, ConsumerGroups: 1, Rate: DefaultRate,
		Size: DefaultSize, Payload: PayloadRandom, Acks: DefaultAcks, Compression: "none",
		MaxBuffered: DefaultMaxBuffered, Warmup: DefaultWarmup, Duration: DefaultDuration,
		Window: DefaultWindow, Drain: DefaultDrain,
	}
}

// Compressions lists the Compression values.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// TopicNames are the run's topic names: the prefix alone for one topic,
// prefix-0, prefix-1, ... for several.
func (w Workload) TopicNames() []string {
	if w.Topics == 1 {
		return []string{w.TopicPrefix}
	}
	names := make([]string, w.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", w.TopicPrefix, i)
	}
	return names
}

// Validate reports every bad setting at once, naming the flag.
func (w Workload) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if len(w.Bootstrap) == 0 {
		bad("bootstrap", "give at least one host:port")
	}
	if w.Topics < 1 {
		bad("topics", "must be at least 1")
	}
	if w.TopicPrefix == "" || strings.ContainsAny(w.TopicPrefix, " /\\") {
		bad("topic-prefix", "%q is not a usable topic name", w.TopicPrefix)
	}
	if w.Partitions < 1 {
		bad("partitions", "must be at least 1")
	}
	if w.Producers < 1 {
		bad("producers", "must be at least 1")
	}
	if w.ConsumerGroups < 0 {
		bad("consumer-groups", "must be 0 or more")
	}
	if w.Rate < 0 {
		bad("rate", "must be 0 (as fast as possible) or a positive number of records per second")
	}
	if w.Payload == PayloadRandom && (w.Size < 1 || w.Size > 64<<20) {
		bad("size", "must be between 1 and 64 MiB")
	}
	if w.SchemaID < 0 || (w.SchemaID > 0 && w.Payload == PayloadRandom) {
		bad("schema-id", "must be a positive schema id, and needs --payload json, avro or protobuf")
	}
	if !slices.Contains(PayloadKinds, w.Payload) {
		bad("payload", "%q: use one of %s", w.Payload, strings.Join(PayloadKinds, ", "))
	}
	switch w.Acks {
	case "all", "-1", "1", "0":
	default:
		bad("acks", "%q: use all, 1 or 0", w.Acks)
	}
	if w.Acks == "0" && w.Idempotent {
		bad("idempotent", "needs --acks all")
	}
	if w.Idempotent && w.Acks == "1" {
		bad("idempotent", "needs --acks all")
	}
	if !slices.Contains(Compressions, w.Compression) {
		bad("compression", "%q: use one of %s", w.Compression, strings.Join(Compressions, ", "))
	}
	if w.Linger < 0 {
		bad("linger", "must not be negative")
	}
	if w.Warmup < 0 {
		bad("warmup", "must not be negative")
	}
	if w.Duration <= 0 {
		bad("duration", "must be positive")
	}
	if w.Window <= 0 {
		bad("window", "must be positive")
	}
	if w.MaxBuffered < 1 {
		bad("max-buffered", "must be at least 1")
	}
	return errors.Join(errs...)
}
