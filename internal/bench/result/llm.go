package result

import "encoding/json"

// KindLLM is the kind of a result of the LLM load generator.
const KindLLM = "llm"

// LLM is the result of one run of the LLM load generator. Rates are in
// requests per second; latencies run from when a request was due to be
// sent (its intended time), not from when it was sent.
type LLM struct {
	Schema   int      `json:"schema"` // SchemaVersion
	Kind     string   `json:"kind"`   // KindLLM
	Label    string   `json:"label"`
	Meta     Meta     `json:"meta"`
	Workload any      `json:"workload"`
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems,omitempty"`

	TargetRate float64 `json:"target_rate"`
	// Due is how many requests the schedule called for during
	// measurement, Sent how many the generator managed to start: fewer
	// means the generator itself could not keep up, and the run says so.
	Due  int64 `json:"due"`
	Sent int64 `json:"sent"`
	// OK counts complete successful answers (for streams: the final event
	// arrived); Errors everything else, by kind in ErrorKinds.
	OK         int64            `json:"ok"`
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	// Statuses counts HTTP status codes ("200", "429", ...).
	Statuses map[string]int64 `json:"statuses,omitempty"`
	// Throughput is successful answers completed per second of
	// measurement.
	Throughput float64 `json:"throughput"`
	// PeakInflight is the most requests outstanding at once.
	PeakInflight int64 `json:"peak_inflight"`

	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`

	// Latency runs to the complete answer (for streams, the final event);
	// FirstEvent, for streams only, to the first event.
	Latency    Latency  `json:"latency_ms"`
	FirstEvent *Latency `json:"first_event_ms,omitempty"`

	Processes []Process `json:"processes,omitempty"`
	// Generator is what the load generator itself (this process) used
	// during the measurement: a harness that eats the machine hides the
	// system under test.
	Generator *Process `json:"generator,omitempty"`
}

// UnmarshalJSON decodes l, keeping the workload as a json.RawMessage.
func (l *LLM) UnmarshalJSON(data []byte) error {
	type plain LLM
	var raw json.RawMessage
	p := (*plain)(l)
	p.Workload = &raw
	if err := json.Unmarshal(data, p); err != nil {
		return err
	}
	l.Workload = rawOrNil(raw)
	return nil
}
