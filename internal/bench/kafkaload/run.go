package kafkaload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/bench/procstat"
	"github.com/straitgw/strait/internal/bench/promscrape"
	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/bench/stats"
)

// Options are how a run reports, as opposed to what it does (Workload).
type Options struct {
	// Label names the run in results and tables (e.g. "direct").
	Label string
	// Progress receives a live progress line each second; nil for none.
	Progress io.Writer
	// Overwrite redraws the progress line in place (a terminal) instead of
	// printing one line per window.
	Overwrite bool
	// WatchPIDs are processes whose CPU time and memory the run reports.
	WatchPIDs []int
	// GatewayMetrics is the admin /metrics URL of the gateway the run goes
	// through, or "": its request counters are read at the start and the
	// end of the measurement, to count requests as the gateway saw them.
	GatewayMetrics string
	// Args is the command line, for the result's metadata.
	Args []string
	// SetupTimeout bounds reaching the cluster, creating topics and
	// joining consumer groups.
	SetupTimeout time.Duration
}

// header carries each record's intended send time and the run it belongs
// to, so consumers measure end-to-end latency from the intended time and
// ignore records of other runs.
const header = "strait-bench"

// Run runs the workload and returns its result. Setup failures (an
// unreachable cluster, failed authentication, a topic that cannot be
// created) return an error; failures during the run are counted in the
// result and make it invalid.
func Run(ctx context.Context, w Workload, opt Options) (*result.Kafka, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if opt.SetupTimeout <= 0 {
		opt.SetupTimeout = 20 * time.Second
	}
	base, err := w.Security.Options()
	if err != nil {
		return nil, err
	}
	if opt.GatewayMetrics != "" {
		if err := promscrape.CheckURL(opt.GatewayMetrics); err != nil {
			return nil, fmt.Errorf("--gateway-metrics: %w", err)
		}
	}
	// Every client counts the requests it writes, for CPU per request.
	reqs := &requestCounter{}
	base = append(base, kgo.SeedBrokers(w.Bootstrap...), kgo.DialTimeout(5*time.Second),
		kgo.RetryTimeout(opt.SetupTimeout), kgo.ClientID("strait-bench"), kgo.WithHooks(reqs))

	setupCtx, cancelSetup := context.WithTimeout(ctx, opt.SetupTimeout)
	defer cancelSetup()
	admin, err := kgo.NewClient(base...)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := admin.Ping(setupCtx); err != nil {
		if w.Security.Mechanism != "" && (errors.Is(err, io.EOF) || errors.Is(err, kerr.SaslAuthenticationFailed)) {
			return nil, fmt.Errorf("SASL %s authentication as %q at %s failed (%v): check the user name, password and mechanism",
				w.Security.Mechanism, w.Security.Username, strings.Join(w.Bootstrap, ","), err)
		}
		return nil, fmt.Errorf("cannot reach the cluster at %s: %w", strings.Join(w.Bootstrap, ","), setupError(err, setupCtx))
	}
	parts, err := ensureTopics(setupCtx, admin, w.TopicNames(), w.Partitions)
	if err != nil {
		return nil, setupError(err, setupCtx)
	}
	starts, err := endOffsets(setupCtx, admin, parts)
	if err != nil {
		return nil, setupError(err, setupCtx)
	}
	pay, err := newPayloads(w.Payload, w.Size, w.SchemaID)
	if err != nil {
		return nil, err
	}

	r := newRun(w, opt, pay.Size())
	r.requests = reqs
	defer r.close()
	if err := r.startConsumers(setupCtx, base, parts, starts); err != nil {
		return nil, setupError(err, setupCtx)
	}
	if err := r.startProducers(base); err != nil {
		return nil, err
	}
	if opt.GatewayMetrics != "" {
		// Setup went through the gateway, so its page must count requests
		// by now: a wrong URL fails here, not after the run.
		if _, err := scrapeGateway(setupCtx, opt.GatewayMetrics); err != nil {
			return nil, err
		}
	}
	var watch *procstat.Watch
	if len(opt.WatchPIDs) > 0 {
		if watch, err = procstat.NewWatch(opt.WatchPIDs); err != nil {
			return nil, err
		}
	}
	res := r.drive(ctx, pay, watch)
	res.Meta = result.CollectMeta(opt.Args)
	res.Meta.Start = r.t0
	return res, ctx.Err()
}

// setupError prefers a timeout's cause to a bare "context deadline
// exceeded".
func setupError(err error, ctx context.Context) error {
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (setup did not finish in time: is the bootstrap address right and the cluster up?)", err)
	}
	return err
}

type run struct {
	w       Workload
	opt     Options
	size    int
	runID   uint64
	groups  int
	t0      time.Time // first intended send
	warmEnd time.Time // measurement start
	end     time.Time // measurement end: no record is intended at or after it

	producers []*kgo.Client
	consumers []*kgo.Client
	wg        sync.WaitGroup // producer pacers and consumer pollers

	pubLat, e2eLat *stats.Recorder

	// Counters. "measured" counts records intended inside the measurement
	// window; "inWindow" counts events that happened inside it.
	sent, acked          atomic.Int64 // all records of the run
	ackedMeasured        atomic.Int64
	ackedInWindow        atomic.Int64
	consumed             atomic.Int64 // all records of the run, all groups
	consumedInWindow     atomic.Int64
	consumedMeasuredByGr []atomic.Int64
	errMu                sync.Mutex
	errKinds             map[string]int64
	errCount             atomic.Int64
	errMeasured          atomic.Int64 // failed produces of measured records
	firstErr             atomic.Pointer[string]
	measuring            atomic.Bool
	stopConsumers        context.CancelFunc
	requests             *requestCounter
}

func newRun(w Workload, opt Options, size int) *run {
	var id [8]byte
	_, _ = newSeed().Read(id[:])
	return &run{
		w: w, opt: opt, size: size, runID: binary.BigEndian.Uint64(id[:]),
		groups:               w.ConsumerGroups,
		pubLat:               stats.NewRecorder(w.Window),
		e2eLat:               stats.NewRecorder(w.Window),
		consumedMeasuredByGr: make([]atomic.Int64, w.ConsumerGroups),
		errKinds:             make(map[string]int64),
	}
}

func (r *run) close() {
	if r.stopConsumers != nil {
		r.stopConsumers()
	}
	for _, c := range r.producers {
		c.Close()
	}
	for _, c := range r.consumers {
		c.Close()
	}
}

func (r *run) startConsumers(ctx context.Context, base []kgo.Opt, parts map[string]int, starts map[string]map[int32]int64) error {
	want := 0
	for _, n := range parts {
		want += n
	}
	pollCtx, cancel := context.WithCancel(context.Background())
	r.stopConsumers = cancel
	topics := r.w.TopicNames()
	for g := range r.groups {
		assigned := make(chan int, 16)
		opts := append(append([]kgo.Opt(nil), base...),
			kgo.ConsumerGroup(fmt.Sprintf("%s-%016x-g%d", r.w.TopicPrefix, r.runID, g)),
			kgo.ConsumeTopics(topics...),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.DisableAutoCommit(),
			kgo.AdjustFetchOffsetsFn(func(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
				// Start exactly where this run's records begin, whatever
				// the group's reset policy would pick.
				for t, ps := range offs {
					for p := range ps {
						if at, ok := starts[t][p]; ok {
							ps[p] = kgo.NewOffset().At(at)
						}
					}
				}
				return offs, nil
			}),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				n := 0
				for _, ps := range a {
					n += len(ps)
				}
				select {
				case assigned <- n:
				default:
				}
			}),
		)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		r.consumers = append(r.consumers, cl)
		r.wg.Add(1)
		go r.consume(pollCtx, cl, g)
		// One member per group gets every partition; wait for it.
		got := 0
		for got < want {
			select {
			case n := <-assigned:
				got += n
			case <-ctx.Done():
				return fmt.Errorf("consumer group %d was not assigned all %d partitions in time (got %d)", g, want, got)
			}
		}
	}
	return nil
}

func (r *run) consume(ctx context.Context, cl *kgo.Client, g int) {
	defer r.wg.Done()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.countError("fetch", err)
			}
		})
		measuring := r.measuring.Load()
		fs.EachRecord(func(rec *kgo.Record) {
			intended, ok := r.intended(rec)
			if !ok {
				return
			}
			r.consumed.Add(1)
			if measuring {
				r.consumedInWindow.Add(1)
			}
			if r.inMeasurement(intended) {
				r.consumedMeasuredByGr[g].Add(1)
				r.e2eLat.Record(now.Sub(intended))
			}
		})
	}
}

func (r *run) intended(rec *kgo.Record) (time.Time, bool) {
	for _, h := range rec.Headers {
		if h.Key == header && len(h.Value) == 16 && binary.BigEndian.Uint64(h.Value[8:]) == r.runID {
			return time.Unix(0, int64(binary.BigEndian.Uint64(h.Value))), true
		}
	}
	return time.Time{}, false
}

func (r *run) inMeasurement(t time.Time) bool {
	return !t.Before(r.warmEnd) && t.Before(r.end)
}

func (r *run) startProducers(base []kgo.Opt) error {
	acks := kgo.AllISRAcks()
	switch r.w.Acks {
	case "1":
		acks = kgo.LeaderAck()
	case "0":
		acks = kgo.NoAck()
	}
	codec := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[r.w.Compression]
	for _, topic := range r.w.TopicNames() {
		for range r.w.Producers {
			opts := append(append([]kgo.Opt(nil), base...),
				kgo.DefaultProduceTopic(topic),
				kgo.RequiredAcks(acks),
				kgo.ProducerLinger(r.w.Linger),
				kgo.ProducerBatchCompression(codec),
				kgo.MaxBufferedRecords(r.w.MaxBuffered),
				kgo.RecordDeliveryTimeout(30*time.Second),
			)
			if r.w.BatchBytes > 0 {
				opts = append(opts, kgo.ProducerBatchMaxBytes(int32(r.w.BatchBytes)))
			}
			if !r.w.Idempotent {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return err
			}
			r.producers = append(r.producers, cl)
		}
	}
	return nil
}

// drive runs warm-up and measurement, then drains, and builds the result.
func (r *run) drive(ctx context.Context, pay *payloads, watch *procstat.Watch) *result.Kafka {
	n := len(r.producers)
	r.t0 = time.Now().Add(50 * time.Millisecond)
	r.warmEnd = r.t0.Add(r.w.Warmup)
	r.end = r.warmEnd.Add(r.w.Duration)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	// Records carry their own context in franz-go: cancelling it fails
	// the records still buffered. So records get one that lives through
	// the drain, and the pacers' sleeps get loadCtx.
	produceCtx, stopProduce := context.WithCancel(ctx)
	defer stopProduce()

	var pacers sync.WaitGroup
	var due int64
	for i, cl := range r.producers {
		var sched *stats.Schedule
		if r.w.Rate > 0 {
			interval := time.Duration(float64(time.Second) * float64(n) / r.w.Rate)
			// Stagger producers across one interval so they do not send
			// in lockstep.
			start := r.t0.Add(time.Duration(i) * interval / time.Duration(n))
			sched = &stats.Schedule{Start: start, Interval: interval}
			due += countBetween(start, interval, r.warmEnd, r.end)
		}
		pacers.Add(1)
		go func() {
			defer pacers.Done()
			r.pace(loadCtx, produceCtx, cl, sched, pay.clone())
		}()
	}

	// Only records intended inside the measurement window are recorded,
	// so the recorders can start now; their windows begin at warmEnd.
	r.pubLat.Start(r.warmEnd)
	r.e2eLat.Start(r.warmEnd)
	var (
		procs       []result.Process
		stopAt      time.Time
		measureDone = make(chan struct{})
	)
	var watchMu sync.Mutex // the timers below run on their own goroutines
	counts := &requestWindow{url: r.opt.GatewayMetrics}
	startTimer := time.AfterFunc(time.Until(r.warmEnd), func() {
		watchMu.Lock()
		defer watchMu.Unlock()
		r.measuring.Store(true)
		counts.start(ctx, r.requests)
		if watch != nil {
			if err := watch.Start(); err != nil {
				r.countError("watch", err)
				watch = nil
			}
		}
	})
	defer startTimer.Stop()
	endTimer := time.AfterFunc(time.Until(r.end), func() {
		watchMu.Lock()
		defer watchMu.Unlock()
		r.measuring.Store(false)
		stopAt = time.Now()
		if watch != nil {
			p, err := watch.Stop()
			if err != nil {
				r.countError("watch", err)
			}
			procs = p
		}
		counts.stop(ctx, r.requests)
		close(measureDone)
	})

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	var (
		peakBacklog         int64
		windows             []result.Window
		winStart            = r.warmEnd
		winAcked, winConsum int64
		last                = r.t0
		lastAcked, lastCons int64
	)
	closeWindow := func(now time.Time) {
		secs := now.Sub(winStart).Seconds()
		if secs <= 0 {
			return
		}
		a, c := r.ackedInWindow.Load(), r.consumedInWindow.Load()
		windows = append(windows, result.Window{
			StartS:      winStart.Sub(r.warmEnd).Seconds(),
			PublishRate: float64(a-winAcked) / secs,
			ConsumeRate: float64(c-winConsum) / secs,
		})
		winStart, winAcked, winConsum = now, a, c
	}
	aborted := false
loop:
	for {
		select {
		case <-ctx.Done():
			aborted = true
			break loop
		case <-measureDone:
			break loop
		case now := <-ticker.C:
			if r.measuring.Load() {
				r.pubLat.Tick(now)
				r.e2eLat.Tick(now)
				if now.Sub(winStart) >= r.w.Window {
					closeWindow(now)
				}
				if b := r.backlog(); b > peakBacklog {
					peakBacklog = b
				}
			}
			acked, cons := r.acked.Load(), r.consumed.Load()
			secs := now.Sub(last).Seconds()
			r.progress(now, float64(acked-lastAcked)/secs, float64(cons-lastCons)/secs)
			last, lastAcked, lastCons = now, acked, cons
			if r.errCount.Load() > 0 && r.acked.Load() == 0 && now.Sub(r.t0) > 10*time.Second {
				// Nothing gets through: stop early and say why.
				aborted = true
				break loop
			}
		}
	}
	if aborted && endTimer.Stop() {
		// Stopped before the end: end the measurement here.
		watchMu.Lock()
		r.measuring.Store(false)
		stopAt = time.Now()
		if watch != nil && !stopAt.Before(r.warmEnd) {
			procs, _ = watch.Stop()
		}
		counts.stop(ctx, r.requests)
		watchMu.Unlock()
		close(measureDone)
	}
	<-measureDone
	if now := time.Now(); now.Sub(winStart) > r.w.Window/2 {
		closeWindow(stopAt)
	}
	started := !stopAt.Before(r.warmEnd)
	// Drain. An open-loop pacer that fell behind still owes the records
	// due before the end: it sends them now, each carrying its intended
	// time, so the tail of a saturated run is measured rather than
	// dropped. Then producers deliver what they hold and consumers catch
	// up. All of it is bounded by --drain.
	drainCtx, cancel := context.WithTimeout(context.Background(), r.w.Drain)
	defer cancel()
	pacersDone := make(chan struct{})
	go func() { pacers.Wait(); close(pacersDone) }()
	select {
	case <-pacersDone:
	case <-drainCtx.Done():
	case <-ctx.Done():
	}
	if drainCtx.Err() != nil {
		stopProduce() // unblock a pacer waiting for buffer space
	}
	stopLoad()
	<-pacersDone
	for _, cl := range r.producers {
		_ = cl.Flush(drainCtx)
	}
	measuredTarget := func() bool {
		want := r.ackedMeasured.Load()
		for g := range r.consumedMeasuredByGr {
			if r.consumedMeasuredByGr[g].Load() < want {
				return false
			}
		}
		return true
	}
	for !measuredTarget() && drainCtx.Err() == nil && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	r.pubLat.Finish(time.Now())
	r.e2eLat.Finish(time.Now())
	if r.opt.Progress != nil && r.opt.Overwrite {
		fmt.Fprintln(r.opt.Progress)
	}

	measured := stopAt.Sub(r.warmEnd).Seconds()
	if !started || measured <= 0 {
		measured = math.NaN()
	}
	res := &result.Kafka{
		Schema: result.SchemaVersion, Kind: result.KindKafka, Label: r.opt.Label,
		Workload: r.w, TargetRate: r.w.Rate,
		PublishRate: float64(r.ackedInWindow.Load()) / measured,
		ConsumeRate: float64(r.consumedInWindow.Load()) / measured,
		Published:   r.ackedMeasured.Load(),
		Errors:      r.errCount.Load(),
		PeakBacklog: peakBacklog, FinalBacklog: r.backlog(),
		DurationS: measured, WarmupS: r.w.Warmup.Seconds(),
		Windows: windows, Processes: procs,
	}
	for g := range r.consumedMeasuredByGr {
		res.Consumed += r.consumedMeasuredByGr[g].Load()
	}
	res.PublishMBps = res.PublishRate * float64(r.size) / 1e6
	res.ConsumeMBps = res.ConsumeRate * float64(r.size) / 1e6
	r.errMu.Lock()
	if len(r.errKinds) > 0 {
		res.ErrorKinds = make(map[string]int64, len(r.errKinds))
		for k, v := range r.errKinds {
			res.ErrorKinds[k] = v
		}
	}
	r.errMu.Unlock()
	res.PublishLatency = latency(r.pubLat)
	res.E2ELatency = latency(r.e2eLat)
	for i := range res.Windows {
		if i < len(res.PublishLatency.WindowP99) {
			res.Windows[i].PublishP99 = res.PublishLatency.WindowP99[i]
		}
		if i < len(res.E2ELatency.WindowP99) {
			res.Windows[i].E2EP99 = res.E2ELatency.WindowP99[i]
		}
	}
	if err := counts.fill(res, measured); err != nil {
		r.countError("gateway metrics", err)
	}
	var requests int64
	if c := res.CountedRequests(); c != nil {
		requests = c.Total
	}
	for i := range res.Processes {
		res.Processes[i].SetTraffic(measured, res.PublishMBps+res.ConsumeMBps, requests)
	}
	r.judge(res, due)
	if math.IsNaN(measured) {
		res.DurationS, res.PublishRate, res.ConsumeRate, res.PublishMBps, res.ConsumeMBps = 0, 0, 0, 0, 0
	}
	return res
}

func latency(rec *stats.Recorder) result.Latency {
	l := rec.Snapshot()
	if l.WindowP99 == nil {
		l.WindowP99 = rec.WindowP99()
	}
	if l.Curve == nil {
		l.Curve = rec.Curve()
	}
	return l
}

// judge decides whether the run counts: every group read every measured
// record (the backlog returned to zero), consumers kept up with producers
// during measurement, and nothing failed.
func (r *run) judge(res *result.Kafka, due int64) {
	var problems []string
	if missing := due - res.Published - r.errMeasured.Load(); due > 0 && missing > 0 {
		problems = append(problems, fmt.Sprintf("%d of the %d records due during measurement were never acknowledged: the system (or the generator) fell too far behind to catch up within --drain", missing, due))
	}
	if res.DurationS <= 0 || math.IsNaN(res.DurationS) {
		problems = append(problems, "the run stopped before measurement began")
	}
	if res.Published == 0 {
		problems = append(problems, "no record was acknowledged during measurement")
	}
	if r.groups > 0 {
		want := int64(r.groups) * res.Published
		if res.Consumed < want {
			problems = append(problems, fmt.Sprintf("consumers read %d of the %d measured records (%d groups × %d) before the drain timeout: the backlog did not return to zero", res.Consumed, want, r.groups, res.Published))
		}
		if res.PublishRate > 0 && res.ConsumeRate < 0.95*float64(r.groups)*res.PublishRate {
			problems = append(problems, fmt.Sprintf("consume rate %.0f/s did not keep up with %d groups × publish rate %.0f/s", res.ConsumeRate, r.groups, res.PublishRate))
		}
		if res.FinalBacklog > 0 {
			problems = append(problems, fmt.Sprintf("%d acknowledged records were never consumed", res.FinalBacklog))
		}
	}
	if res.Errors > 0 {
		msg := fmt.Sprintf("%d errors", res.Errors)
		if first := r.firstErr.Load(); first != nil {
			msg += " (first: " + *first + ")"
		}
		problems = append(problems, msg)
	}
	res.Problems = problems
	res.Valid = len(problems) == 0
}

// backlog is the number of acknowledged records not yet read, summed over
// groups.
func (r *run) backlog() int64 {
	if r.groups == 0 {
		return 0
	}
	b := int64(r.groups)*r.acked.Load() - r.consumed.Load()
	return max(b, 0)
}

// pace sends records on the schedule (open loop) or as fast as the client
// accepts (sched == nil). Latency is always measured from the intended
// time: when the client's buffer is full, Produce blocks, the pacer falls
// behind, and the records it then sends late carry their earlier intended
// times.
func (r *run) pace(ctx, produceCtx context.Context, cl *kgo.Client, sched *stats.Schedule, pay *payloads) {
	for i := int64(0); ; i++ {
		var intended time.Time
		if sched != nil {
			intended = sched.Intended(i)
			if !intended.Before(r.end) {
				return
			}
			if d := time.Until(intended); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		} else {
			intended = time.Now()
			if !intended.Before(r.end) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		rec := r.newRecord(pay.next(), intended)
		r.sent.Add(1)
		cl.Produce(produceCtx, rec, r.onAck)
	}
}

// benchRecord is a record with its one header and the header's value in
// the same allocation: at hundreds of thousands of records a second the
// harness must not spend its core on garbage.
type benchRecord struct {
	kgo.Record
	hdr   [1]kgo.RecordHeader
	stamp [16]byte // intended send time (Unix ns), run id
}

func (r *run) newRecord(value []byte, intended time.Time) *kgo.Record {
	b := &benchRecord{}
	binary.BigEndian.PutUint64(b.stamp[:8], uint64(intended.UnixNano()))
	binary.BigEndian.PutUint64(b.stamp[8:], r.runID)
	b.hdr[0] = kgo.RecordHeader{Key: header, Value: b.stamp[:]}
	b.Value, b.Headers = value, b.hdr[:]
	return &b.Record
}

// onAck is every record's promise: one method value for all records, the
// intended time read back from the record's own header.
func (r *run) onAck(rec *kgo.Record, err error) {
	now := time.Now()
	intended, _ := r.intended(rec)
	measured := r.inMeasurement(intended)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			r.countError("produce", err)
			if measured {
				r.errMeasured.Add(1)
			}
		}
		return
	}
	r.acked.Add(1)
	if r.measuring.Load() {
		r.ackedInWindow.Add(1)
	}
	if measured {
		r.ackedMeasured.Add(1)
		r.pubLat.Record(now.Sub(intended))
	}
}

// countError files err under a bounded set of kinds.
func (r *run) countError(op string, err error) {
	kind := op + ": "
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		kind += ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout):
		kind += "record delivery timeout"
	case errors.Is(err, kgo.ErrRecordRetries):
		kind += "record retries exhausted"
	case errors.Is(err, context.DeadlineExceeded):
		kind += "timeout"
	default:
		kind += "other"
	}
	r.errCount.Add(1)
	msg := op + ": " + err.Error()
	r.firstErr.CompareAndSwap(nil, &msg)
	r.errMu.Lock()
	if _, ok := r.errKinds[kind]; ok || len(r.errKinds) < 32 {
		r.errKinds[kind]++
	}
	r.errMu.Unlock()
}

func (r *run) progress(now time.Time, pubRate, consRate float64) {
	if r.opt.Progress == nil {
		return
	}
	var phase string
	if now.Before(r.warmEnd) {
		phase = fmt.Sprintf("warm-up %3.0f/%.0fs", now.Sub(r.t0).Seconds(), r.w.Warmup.Seconds())
	} else {
		phase = fmt.Sprintf("measure %3.0f/%.0fs", min(now.Sub(r.warmEnd), r.w.Duration).Seconds(), r.w.Duration.Seconds())
	}
	target := "max"
	if r.w.Rate > 0 {
		target = fmt.Sprintf("%.0f", r.w.Rate)
	}
	line := fmt.Sprintf("%s  publish %7.0f/s (target %s)  consume %7.0f/s  backlog %6d  errors %d",
		phase, pubRate, target, consRate, r.backlog(), r.errCount.Load())
	if r.measuring.Load() {
		p, e := r.pubLat.Snapshot(), r.e2eLat.Snapshot()
		line += fmt.Sprintf("  p99 publish %.2f ms e2e %.2f ms", p.P99, e.P99)
	}
	if r.opt.Overwrite {
		fmt.Fprintf(r.opt.Progress, "\r\033[K%s", line)
	} else if sec := int(now.Sub(r.t0).Seconds() + 0.5); sec%5 == 0 {
		// Logs and pipes get a line every 5 s, not every second.
		fmt.Fprintln(r.opt.Progress, line)
	}
}

// countBetween is how many of the times start + i·interval (i >= 0) fall in
// [from, to).
func countBetween(start time.Time, interval time.Duration, from, to time.Time) int64 {
	first := func(t time.Time) int64 { // the first i with start + i·interval >= t
		if !t.After(start) {
			return 0
		}
		d := t.Sub(start)
		return int64((d + interval - 1) / interval)
	}
	return max(first(to)-first(from), 0)
}
