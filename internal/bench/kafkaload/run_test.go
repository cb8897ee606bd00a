package kafkaload

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/devbroker"
)

func startBroker(t *testing.T, opts devbroker.Options) *devbroker.Cluster {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	opts.Brokers = max(opts.Brokers, 1)
	c, err := devbroker.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func shortWorkload(bootstrap []string) Workload {
	w := DefaultWorkload()
	w.Bootstrap = bootstrap
	w.Partitions = 3
	w.Rate = 500
	w.Warmup = 500 * time.Millisecond
	w.Duration = 2 * time.Second
	w.Window = time.Second
	w.Drain = 20 * time.Second
	return w
}

func TestRunCountsEveryRecordOnceAndIsValid(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	w := shortWorkload(c.Addrs())
	w.Topics, w.ConsumerGroups, w.Producers = 2, 2, 2
	w.Payload = PayloadJSON
	res, err := Run(context.Background(), w, Options{Label: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Fatalf("run not valid: %v", res.Problems)
	}
	// The schedule fixes how many records are intended inside the
	// measurement window: rate × duration, give or take one per producer.
	want := int64(w.Rate * w.Duration.Seconds())
	if d := res.Published - want; d < -4 || d > 4 {
		t.Errorf("published %d measured records, want %d ± 4", res.Published, want)
	}
	if res.Consumed != 2*res.Published {
		t.Errorf("consumed %d, want 2 groups × %d", res.Consumed, res.Published)
	}
	if res.FinalBacklog != 0 || res.Errors != 0 {
		t.Errorf("final backlog %d, errors %d", res.FinalBacklog, res.Errors)
	}
	if res.PublishLatency.Count != res.Published || res.E2ELatency.Count != res.Consumed {
		t.Errorf("latency counts %d/%d, want %d/%d", res.PublishLatency.Count, res.E2ELatency.Count, res.Published, res.Consumed)
	}
	if res.PublishLatency.P50 <= 0 || res.E2ELatency.P50 < res.PublishLatency.P50/2 {
		t.Errorf("implausible latencies: publish p50 %v, e2e p50 %v", res.PublishLatency.P50, res.E2ELatency.P50)
	}
	if len(res.PublishLatency.WindowP99) < 1 {
		t.Errorf("no window p99 samples")
	}
	if size := res.PublishMBps / res.PublishRate * 1e6; size < 1000 || size > 1100 {
		t.Errorf("reference JSON record of %.0f bytes, want about 1 KiB", size)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"publish_latency_ms"`, `"e2e_latency_ms"`, `"target_rate"`, `"publish_rate"`, `"consume_rate"`, `"errors"`, `"valid"`, `"topics":2`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("result JSON lacks %s", key)
		}
	}
	if strings.Contains(string(b), "password") {
		t.Errorf("result JSON mentions a password")
	}
}

// TestStallShowsAsLatencyNotAsLowerRate is the coordinated-omission case:
// the broker stops answering for a second in the middle of measurement.
// Records scheduled during the stall are still counted, and each carries
// the time it waited, measured from when it was due.
func TestStallShowsAsLatencyNotAsLowerRate(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	w := shortWorkload(c.Addrs())
	w.Rate = 1000
	w.Duration = 3 * time.Second
	w.ConsumerGroups = 0
	const stall = time.Second
	var stalled atomic.Bool
	stallAt := time.Now().Add(10 * time.Hour)
	var armed atomic.Pointer[time.Time]
	armed.Store(&stallAt)
	kf := c.Kfake()
	kf.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		if time.Now().After(*armed.Load()) && stalled.CompareAndSwap(false, true) {
			time.Sleep(stall) // the whole broker stalls
		}
		return nil, nil, false
	})
	go func() {
		// Stall one second into measurement (after the warm-up).
		time.Sleep(w.Warmup + 1500*time.Millisecond)
		now := time.Now()
		armed.Store(&now)
	}()
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !stalled.Load() {
		t.Fatal("the stall never happened")
	}
	want := int64(w.Rate * w.Duration.Seconds())
	if d := res.Published - want; d < -2 || d > 2 {
		t.Errorf("published %d measured records, want %d ± 2: a stall must not thin the schedule", res.Published, want)
	}
	// About a third of the records were due during the stall, waiting up
	// to a second each: the tail shows it.
	if res.PublishLatency.Max < 0.8*float64(stall.Milliseconds()) {
		t.Errorf("max publish latency %.1f ms, want at least 800 ms after a 1 s stall", res.PublishLatency.Max)
	}
	if res.PublishLatency.P95 < 300 {
		t.Errorf("p95 publish latency %.1f ms, want at least 300 ms when a third of the records waited up to 1 s", res.PublishLatency.P95)
	}
}

func TestSetupErrorsAreOneClearLine(t *testing.T) {
	c := startBroker(t, devbroker.Options{Users: []devbroker.User{{Name: "u", Password: "right"}}})
	for _, tc := range []struct {
		name string
		edit func(*Workload)
		want string
	}{
		{"unreachable", func(w *Workload) { w.Bootstrap = []string{"127.0.0.1:1"} }, "cannot reach the cluster at 127.0.0.1:1"},
		{"wrong password", func(w *Workload) {
			w.Security = Security{Mechanism: "SCRAM-SHA-256", Username: "u", Password: "wrong"}
		}, `SASL SCRAM-SHA-256 authentication as "u"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := shortWorkload(c.Addrs())
			tc.edit(&w)
			_, err := Run(context.Background(), w, Options{SetupTimeout: 5 * time.Second})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestTopicThatCannotBeCreated(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	kf := c.Kfake()
	kf.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		r := req.(*kmsg.CreateTopicsRequest)
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			rt.ErrorCode = kerr.PolicyViolation.Code
			rt.ErrorMessage = kmsg.StringPtr("topic names must start with team-")
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	w := shortWorkload(c.Addrs())
	_, err := Run(context.Background(), w, Options{SetupTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), `cannot create topic "strait-bench"`) || !strings.Contains(err.Error(), "team-") {
		t.Fatalf("error %v, want the topic, the broker's code and its message", err)
	}
}

func TestClosedLoopRuns(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	w := shortWorkload(c.Addrs())
	w.Rate = 0
	w.Duration = time.Second
	w.MaxBuffered = 200
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.PublishRate < 100 {
		t.Fatalf("closed loop: valid %v (%v), rate %.0f", res.Valid, res.Problems, res.PublishRate)
	}
}
