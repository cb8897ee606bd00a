// Package result defines the JSON documents the benchmark harness writes,
// schema version 1: one run against Kafka ("kafka"), a sweep of such runs
// ("kafka-sweep"), and the parts every kind shares — latency summaries, run
// metadata, watched processes. Reports and comparisons read these files
// back, possibly written by another build, so field names never change
// within a schema version; fields may be added.
//
// It imports nothing of ours, so every harness and report can depend on it.
package result

import "time"

// SchemaVersion is the version of the documents this package writes and
// the only one it reads.
const SchemaVersion = 1

// Kinds of document: the value of their "kind" field.
const (
	KindKafka      = "kafka"
	KindKafkaSweep = "kafka-sweep"
)

// Sweep modes: what a sweep steps.
const (
	ModeRate      = "rate"      // the target rate, with a fixed number of producers
	ModeProducers = "producers" // the number of producers, each at a fixed rate
)

// Latency summarizes one latency distribution, in milliseconds. The
// percentiles come from an HdrHistogram with three significant digits, so
// each is within 0.1% of the exact value.
type Latency struct {
	P50  float64 `json:"p50"`
	P75  float64 `json:"p75"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
	// Count is how many latencies were recorded.
	Count int64 `json:"count"`
	// WindowP99 is the p99 of each measurement window that had records,
	// in order: the samples a significance test compares between runs.
	WindowP99 []float64 `json:"window_p99,omitempty"`
	// Curve is the percentile distribution, for plots.
	Curve []CurvePoint `json:"curve,omitempty"`
}

// CurvePoint is one point of a percentile distribution: Percentile percent
// (0 to 100) of the latencies were at most Ms milliseconds.
type CurvePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// Meta says what was measured where and when, so that two result files
// can be told apart and a surprising one explained.
type Meta struct {
	// Commit is the source revision of the harness, with "+dirty" when
	// it had uncommitted changes, or "unknown".
	Commit    string    `json:"commit"`
	GoVersion string    `json:"go_version"`
	CPUModel  string    `json:"cpu_model"`
	CPUs      int       `json:"cpus"`
	Start     time.Time `json:"start"`
	Host      string    `json:"host"`
	// Command is the command line that ran the benchmark.
	Command string `json:"command"`
}

// Process is what one watched process (the gateway, a broker) used during
// the measurement, and the sizing coefficients derived from it.
type Process struct {
	PID  int    `json:"pid"`
	Name string `json:"name"`
	// CPUSeconds is user plus system CPU time used during the measurement.
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakRSSBytes is the largest resident set seen during the
	// measurement (see procstat for how it is found).
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// MsCPUPerMBps is the sizing coefficient: milliseconds of CPU per
	// second — millicores — per MB/s of traffic through the process. A
	// process at 250 here needs a quarter of a core for each MB/s.
	MsCPUPerMBps float64 `json:"ms_cpu_per_mbps"`
	// CPUPerKRequests is milliseconds of CPU per thousand requests, for
	// traffic better counted in requests than in bytes (LLM calls).
	CPUPerKRequests float64 `json:"cpu_ms_per_k_requests"`
	// CPUMicrosPerRequest is the same figure as CPUPerKRequests in the unit
	// requests are sized by: microseconds of CPU per request.
	CPUMicrosPerRequest float64 `json:"cpu_us_per_request,omitempty"`
	// CPUMicrosPerProduce and CPUMicrosPerFetch split a Kafka run's CPU
	// per request by API (see SplitByAPI): per Produce as measured in a
	// produce-only run, per Fetch derived from this run. 0 when not split.
	CPUMicrosPerProduce float64 `json:"cpu_us_per_produce,omitempty"`
	CPUMicrosPerFetch   float64 `json:"cpu_us_per_fetch,omitempty"`
}

// SetTraffic fills in the sizing coefficients from the traffic that went
// through the process during the measurement: durationS seconds at mbps
// MB/s, requests requests. A coefficient whose traffic is zero stays 0.
func (p *Process) SetTraffic(durationS, mbps float64, requests int64) {
	p.MsCPUPerMBps, p.CPUPerKRequests, p.CPUMicrosPerRequest = 0, 0, 0
	if durationS > 0 && mbps > 0 {
		millicores := p.CPUSeconds / durationS * 1000
		p.MsCPUPerMBps = millicores / mbps
	}
	if requests > 0 {
		p.CPUPerKRequests = p.CPUSeconds * 1000 / (float64(requests) / 1000)
		p.CPUMicrosPerRequest = p.CPUSeconds * 1e6 / float64(requests)
	}
}

// Window is one measurement window of a run: the rates in it and the p99
// latencies of the records sent in it.
type Window struct {
	// StartS is when the window began, in seconds from the start of the
	// measurement.
	StartS      float64 `json:"start_s"`
	PublishRate float64 `json:"publish_rate"`
	ConsumeRate float64 `json:"consume_rate"`
	PublishP99  float64 `json:"publish_p99_ms"`
	E2EP99      float64 `json:"e2e_p99_ms"`
}

// Kafka is the result of one run of the Kafka load generator. Rates are in
// records per second; throughputs in MB/s (10^6 bytes per second).
type Kafka struct {
	Schema int    `json:"schema"` // SchemaVersion
	Kind   string `json:"kind"`   // KindKafka
	// Label names the setup measured: "direct", "passthrough", ... or,
	// when none was given, the bootstrap address.
	Label string `json:"label"`
	Meta  Meta   `json:"meta"`
	// Workload is the generator's full workload description. Read
	// decodes it as a json.RawMessage.
	Workload any `json:"workload"`

	// Valid says whether the run counts: the consumers kept up with the
	// producers and the backlog drained to zero. Problems says why not.
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems,omitempty"`

	TargetRate  float64 `json:"target_rate"` // 0: closed loop, as fast as it goes
	PublishRate float64 `json:"publish_rate"`
	ConsumeRate float64 `json:"consume_rate"`
	PublishMBps float64 `json:"publish_mbps"`
	ConsumeMBps float64 `json:"consume_mbps"`

	Published int64 `json:"published"`
	Consumed  int64 `json:"consumed"`
	Errors    int64 `json:"errors"`
	// ErrorKinds counts the errors by kind (an error code's name, "timeout",
	// ...).
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`

	// PeakBacklog is the most records published but not yet consumed at
	// any time; FinalBacklog is how many were left at the end.
	PeakBacklog  int64 `json:"peak_backlog"`
	FinalBacklog int64 `json:"final_backlog"`

	DurationS float64 `json:"duration_s"` // the measurement, warm-up excluded
	WarmupS   float64 `json:"warmup_s"`

	// PublishLatency runs from when a record was due to be sent to its
	// acknowledgement; E2ELatency from when it was due to when a consumer
	// received it.
	PublishLatency Latency `json:"publish_latency_ms"`
	E2ELatency     Latency `json:"e2e_latency_ms"`

	Windows   []Window  `json:"windows,omitempty"`
	Processes []Process `json:"processes,omitempty"`

	// ClientRequests are the Kafka requests the harness's clients wrote
	// during the measurement (the same window as Processes), by API.
	ClientRequests *Requests `json:"client_requests,omitempty"`
	// GatewayRequests are those the gateway counted over the same window:
	// the increase of strait_kafka_requests_total on its metrics page,
	// GatewayMetrics, summed over virtual clusters.
	GatewayRequests *Requests `json:"gateway_requests,omitempty"`
	GatewayMetrics  string    `json:"gateway_metrics,omitempty"`
	// RequestsCountedBy names the count each process's cpu_us_per_request
	// divides by: CountedByGateway when the gateway's was read,
	// CountedByClient otherwise.
	RequestsCountedBy string `json:"requests_counted_by,omitempty"`
	// ProduceOnly is the produce-only run that split this run's CPU per
	// request into Produce and Fetch (SplitByAPI), when there was one.
	ProduceOnly *Kafka `json:"produce_only,omitempty"`
	// SplitNotes says how the split was made and what it could not do.
	SplitNotes []string `json:"split_notes,omitempty"`
}

// Who counted a run's Kafka requests: the values of RequestsCountedBy.
const (
	CountedByGateway = "gateway"
	CountedByClient  = "client"
)

// Names of the Kafka APIs a run's CPU is split between, as the gateway's
// api label and franz-go both name them.
const (
	APIProduce = "Produce"
	APIFetch   = "Fetch"
)

// Requests counts the Kafka requests of a measurement.
type Requests struct {
	Total int64 `json:"total"`
	// ByAPI splits Total by API name ("Produce", "Fetch", ...).
	ByAPI     map[string]int64 `json:"by_api,omitempty"`
	PerSecond float64          `json:"per_second"`
}

// NewRequests counts byAPI over durationS seconds.
func NewRequests(byAPI map[string]int64, durationS float64) *Requests {
	r := &Requests{ByAPI: map[string]int64{}}
	for api, n := range byAPI {
		if n > 0 {
			r.ByAPI[api] = n
			r.Total += n
		}
	}
	if durationS > 0 {
		r.PerSecond = float64(r.Total) / durationS
	}
	return r
}

// API is how many requests of api there were.
func (r *Requests) API(api string) int64 {
	if r == nil {
		return 0
	}
	return r.ByAPI[api]
}

// CountedRequests is the count the run's CPU per request divides by:
// the gateway's when it was read, the clients' otherwise (nil if neither).
func (k *Kafka) CountedRequests() *Requests {
	if k.RequestsCountedBy == CountedByGateway && k.GatewayRequests != nil {
		return k.GatewayRequests
	}
	return k.ClientRequests
}

// SweepStep is one step of a sweep: one run at one load.
type SweepStep struct {
	// Target is the total target rate of the step, in records per second;
	// Producers how many producers shared it.
	Target    float64 `json:"target"`
	Producers int     `json:"producers"`
	// Achieved is the publish rate reached.
	Achieved float64 `json:"achieved"`
	P99      float64 `json:"p99_ms"`     // publish
	E2EP99   float64 `json:"e2e_p99_ms"` // end to end
	// Saturated marks a step whose achieved rate fell more than 5% below
	// its target (see Saturated).
	Saturated bool   `json:"saturated"`
	Result    *Kafka `json:"result,omitempty"`
}

// Sweep is a series of runs at increasing load, and how far the system
// kept up.
type Sweep struct {
	Schema   int         `json:"schema"` // SchemaVersion
	Kind     string      `json:"kind"`   // KindKafkaSweep
	Label    string      `json:"label"`  // the setup, as Kafka.Label
	Mode     string      `json:"mode"`   // ModeRate or ModeProducers
	Meta     Meta        `json:"meta"`
	Workload any         `json:"workload"`
	Steps    []SweepStep `json:"steps"`
	// LastSustained is the achieved rate of the last step before the
	// first that was saturated or invalid, and LastSustainedP99 its
	// publish p99; both 0 when even the first step was not sustained.
	LastSustained    float64 `json:"last_sustained"`
	LastSustainedP99 float64 `json:"last_sustained_p99_ms"`
}
