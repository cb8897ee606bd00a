package llmload

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/bench/procstat"
	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/bench/stats"
	"github.com/straitgw/strait/internal/llm/h1client"
	"github.com/straitgw/strait/internal/llm/sse"
	"github.com/straitgw/strait/internal/rawsock"
)

// Options are how a run reports, as opposed to what it does (Workload).
type Options struct {
	Label     string
	Progress  io.Writer
	Overwrite bool
	WatchPIDs []int
	Args      []string
}

// Run runs the workload and returns its result. It fails only for bad
// settings or when the target cannot be reached at all (checked with one
// request before the schedule starts); failures during the run are
// counted in the result.
func Run(ctx context.Context, w Workload, opt Options) (*result.LLM, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	r := &run{w: w, opt: opt, errKinds: map[string]int64{}, statuses: map[string]int64{}}
	r.path, r.body = requestFor(w)
	if w.H2C {
		h, err := newH2Client(r)
		if err != nil {
			return nil, err
		}
		r.h2 = h
	} else {
		r.clients = newClients(w)
	}
	defer r.closeIdle()
	if err := r.probe(ctx); err != nil {
		return nil, err
	}
	// The generator watches itself too, so that its own CPU per request
	// is reported beside that of the processes it measures (where it
	// cannot, as off Linux, it reports only those).
	self := os.Getpid()
	selfAdded := !slices.Contains(opt.WatchPIDs, self)
	pids := opt.WatchPIDs
	if selfAdded {
		pids = append(slices.Clone(pids), self)
	}
	watch, err := procstat.NewWatch(pids)
	if err != nil && selfAdded {
		watch, selfAdded = nil, false
		if len(opt.WatchPIDs) > 0 {
			watch, err = procstat.NewWatch(opt.WatchPIDs)
		} else {
			err = nil
		}
	}
	if err != nil {
		return nil, err
	}
	res := r.drive(ctx, watch)
	for i, p := range res.Processes {
		if p.PID == self {
			g := p
			g.Name += " (generator)"
			res.Generator = &g
			if selfAdded {
				res.Processes = slices.Delete(res.Processes, i, i+1)
			}
			break
		}
	}
	if len(res.Processes) == 0 {
		res.Processes = nil
	}
	res.Meta = result.CollectMeta(opt.Args)
	res.Meta.Start = r.start
	return res, ctx.Err()
}

type run struct {
	w       Workload
	opt     Options
	clients []*http.Client // HTTP/1.1 and https
	h2      *h2Client      // h2c
	path    string
	body    []byte

	start, warmEnd, end time.Time
	lat, first          *stats.Recorder

	due, sent, ok, errs atomic.Int64 // measured requests only
	inflight, peak      atomic.Int64
	okAll, sentAll      atomic.Int64 // every request, for progress
	mu                  sync.Mutex
	errKinds, statuses  map[string]int64
}

// newClients returns the HTTP/1.1 (or, over https, ALPN's choice) client:
// over http://, the gateway's own HTTP/1.1 client (h1client), which costs
// the generator about a third less CPU per request than net/http's, whose
// two goroutines per connection hand each request over through channels;
// over https://, net/http's, which may pick HTTP/2.
func newClients(w Workload) []*http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if u, err := url.Parse(w.URL); err == nil && u.Scheme == "http" && u.Host != "" {
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		return []*http.Client{{Transport: h1client.New(h1client.Options{
			Addr: addr, Dial: dialer.DialContext, MaxConns: w.MaxInflight,
		})}}
	}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConns:        w.MaxInflight,
		MaxIdleConnsPerHost: w.MaxInflight,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   strings.HasPrefix(w.URL, "https:"),
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: w.Insecure},
	}
	return []*http.Client{{Transport: tr}}
}

func (r *run) closeIdle() {
	if r.h2 != nil {
		r.h2.close()
	}
	for _, c := range r.clients {
		c.CloseIdleConnections()
	}
}

// requestFor builds the request path and body: a system prompt and a user
// message padded to about RequestBytes.
func requestFor(w Workload) (string, []byte) {
	const system = "You are a concise assistant. Answer in one short paragraph."
	pad := max(w.RequestBytes-200, 16)
	user := "Summarize the following note for a dispatcher: " + strings.Repeat("delivery window moved; ", pad/23+1)[:pad]
	var body any
	path := "/v1/chat/completions"
	if w.Dialect == Anthropic {
		path = "/v1/messages"
		body = map[string]any{"model": w.Model, "max_tokens": w.MaxTokens, "system": system, "stream": w.Stream,
			"messages": []any{map[string]any{"role": "user", "content": user}}}
	} else {
		m := map[string]any{"model": w.Model, "max_tokens": w.MaxTokens, "stream": w.Stream,
			"messages": []any{map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": user}}}
		if w.Stream {
			m["stream_options"] = map[string]any{"include_usage": true}
		}
		body = m
	}
	b, _ := json.Marshal(body)
	return path, b
}

func (r *run) newRequest(ctx context.Context) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.w.URL, "/")+r.path, bytes.NewReader(r.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.w.Dialect == Anthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
		if r.w.APIKey != "" {
			req.Header.Set("x-api-key", r.w.APIKey)
		}
	} else if r.w.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.w.APIKey)
	}
	if r.w.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	return req, nil
}

// probeTries bounds the probe requests: an answer that may pass (5xx,
// 429: a provider's bad moment, or a mock injecting faults) is asked again
// after probeRetryWait, up to this many requests in all.
const (
	probeTries     = 5
	probeRetryWait = 200 * time.Millisecond
)

// probe sends one request so that a wrong URL, a refused key or an
// unknown model is one clear error instead of a run full of failures. An
// answer that may pass on its own (5xx, 429) is tried again, so that a
// target injecting a share of failures can still be measured.
func (r *run) probe(ctx context.Context) error {
	var err error
	for try := 1; ; try++ {
		var retry bool
		retry, err = r.probeOnce(ctx)
		if !retry || try == probeTries {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeRetryWait):
		}
	}
	return err
}

// probeOnce sends the probe request and reports whether its failure, if
// any, may pass when asked again.
func (r *run) probeOnce(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.w.Timeout+5*time.Second)
	defer cancel()
	var o outcome
	if r.h2 != nil {
		ch := make(chan outcome, 1)
		r.h2.add(pending{probe: ch})
		r.h2.nextSlot()
	wait:
		for {
			r.h2.tick(time.Now())
			select {
			case o = <-ch:
				break wait
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(pollEvery):
			}
		}
	} else {
		o = r.do(ctx, r.clients[0])
	}
	if o.kind == "" {
		return false, nil
	}
	msg := o.detail
	if msg == "" {
		msg = o.kind
	}
	retry := o.status >= 500 || o.status == http.StatusTooManyRequests
	return retry, fmt.Errorf("the first request to %s%s failed: %s", strings.TrimRight(r.w.URL, "/"), r.path, msg)
}

// outcome is one request's result.
type outcome struct {
	status     int
	kind       string // "" for success, else the error kind
	detail     string
	firstEvent time.Time // streams: the first event
}

// do sends one request and reads the whole answer.
func (r *run) do(ctx context.Context, c *http.Client) outcome {
	req, err := r.newRequest(ctx)
	if err != nil {
		return outcome{kind: "request", detail: err.Error()}
	}
	resp, err := c.Do(req)
	if err != nil {
		return outcome{kind: transportKind(ctx, err), detail: err.Error()}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		o.kind = "http " + strconv.Itoa(resp.StatusCode)
		o.detail = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		return o
	}
	if !r.w.Stream {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			o.kind, o.detail = transportKind(ctx, err), err.Error()
		}
		return o
	}
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				o.kind, o.detail = "stream incomplete", "the stream ended without its final event"
			} else {
				o.kind, o.detail = transportKind(ctx, err), err.Error()
			}
			return o
		}
		if ev.Comment {
			continue
		}
		if o.firstEvent.IsZero() {
			o.firstEvent = time.Now()
		}
		switch {
		case r.w.Dialect == Anthropic && ev.Name == "message_stop":
			return o
		case r.w.Dialect == Anthropic && ev.Name == "error":
			o.kind, o.detail = "stream error", string(ev.Data)
			return o
		case r.w.Dialect == OpenAI && string(ev.Data) == "[DONE]":
			return o
		case r.w.Dialect == OpenAI && bytes.HasPrefix(ev.Data, []byte(`{"error"`)):
			o.kind, o.detail = "stream error", string(ev.Data)
			return o
		}
	}
}

func transportKind(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "connection reset"), strings.Contains(err.Error(), "broken pipe"), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	}
	return "transport"
}

func (r *run) drive(ctx context.Context, watch *procstat.Watch) *result.LLM {
	r.start = time.Now().Add(20 * time.Millisecond)
	sched := newSchedule(r.start, r.w)
	r.warmEnd = r.start.Add(r.w.Warmup)
	r.end = r.warmEnd.Add(r.w.Duration)
	r.lat = stats.NewRecorder(r.w.Window)
	r.lat.Start(r.warmEnd)
	if r.w.Stream {
		r.first = stats.NewRecorder(r.w.Window)
		r.first.Start(r.warmEnd)
	}
	reqCtx, cancelReqs := context.WithCancel(ctx)
	defer cancelReqs()

	var wg sync.WaitGroup
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		r.schedule(reqCtx, sched, &wg)
	}()

	var watchErr error
	var watchOn bool
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	last, lastSent, lastOK := r.start, int64(0), int64(0)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-ticker.C:
			if !watchOn && watch != nil && !now.Before(r.warmEnd) {
				watchErr, watchOn = watch.Start(), true
			}
			r.lat.Tick(now)
			if r.first != nil {
				r.first.Tick(now)
			}
			s, o := r.sentAll.Load(), r.okAll.Load()
			secs := now.Sub(last).Seconds()
			r.progress(now, float64(s-lastSent)/secs, float64(o-lastOK)/secs)
			last, lastSent, lastOK = now, s, o
			if !now.Before(r.end) {
				break loop
			}
		}
	}
	var procs []result.Process
	if watch != nil && watchOn && watchErr == nil {
		procs, watchErr = watch.Stop()
	}
	measured := time.Since(r.warmEnd)
	if measured > r.w.Duration {
		measured = r.w.Duration
	}
	// Let the schedule's last requests start and every request finish
	// (each is bounded by the timeout).
	<-schedDone
	if r.h2 != nil {
		r.h2.close() // the schedule waited for the answers
	} else {
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(r.w.Timeout + 10*time.Second):
			cancelReqs()
			<-waited
		}
	}
	r.lat.Finish(time.Now())
	if r.first != nil {
		r.first.Finish(time.Now())
	}
	if r.opt.Progress != nil && r.opt.Overwrite {
		fmt.Fprintln(r.opt.Progress)
	}

	res := &result.LLM{
		Schema: result.SchemaVersion, Kind: result.KindLLM, Label: r.opt.Label, Workload: r.w,
		TargetRate: r.w.Rate, Due: r.due.Load(), Sent: r.sent.Load(), OK: r.ok.Load(), Errors: r.errs.Load(),
		PeakInflight: r.peak.Load(), DurationS: measured.Seconds(), WarmupS: r.w.Warmup.Seconds(),
		Latency: r.lat.Snapshot(), Processes: procs,
	}
	if res.DurationS > 0 {
		res.Throughput = float64(res.OK) / res.DurationS
	}
	if r.first != nil {
		f := r.first.Snapshot()
		res.FirstEvent = &f
	}
	r.mu.Lock()
	if len(r.errKinds) > 0 {
		res.ErrorKinds = r.errKinds
	}
	res.Statuses = r.statuses
	r.mu.Unlock()
	for i := range res.Processes {
		res.Processes[i].SetTraffic(res.DurationS, 0, res.OK)
	}
	var problems []string
	if ctx.Err() != nil {
		problems = append(problems, "interrupted before the end")
	}
	if res.Sent < res.Due {
		problems = append(problems, fmt.Sprintf("the generator fell behind: %d of %d due requests were not sent (raise --max-inflight, or run the generator on a machine of its own)", res.Due-res.Sent, res.Due))
	}
	if res.Errors > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d requests failed", res.Errors, res.Sent))
	}
	if watchErr != nil {
		problems = append(problems, "watching processes: "+watchErr.Error())
	}
	if res.Due == 0 {
		problems = append(problems, "no request was due during measurement")
	}
	res.Problems = problems
	res.Valid = len(problems) == 0
	return res
}

// schedule starts each request at its intended time. It never waits for
// an answer: a slow target shows as latency and requests in flight, not as
// a lower send rate. Over HTTP/1.1 each request runs on a goroutine of its
// own.
func (r *run) schedule(ctx context.Context, s schedule, wg *sync.WaitGroup) {
	if r.h2 != nil {
		r.scheduleH2(ctx, s)
		return
	}
	for i := int64(0); ; i++ {
		intended := s.Intended(i)
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
		if ctx.Err() != nil {
			return
		}
		if !r.admit(intended) {
			continue
		}
		p := pending{intended: intended, measured: !intended.Before(r.warmEnd)}
		r.countSent(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, r.w.Timeout)
			o := r.do(rctx, r.clients[0])
			cancel()
			r.deliver(p, o, time.Now())
		}()
	}
}

// scheduleH2 is schedule for h2c, where the same goroutine drives the
// connections: at each wake it hands every request due to a connection
// and runs the client's tick. It sleeps pollEvery while anything is in
// flight, else until the next request is due; once the schedule is over
// it returns when every answer is in, or the last request has had its
// timeout and ten seconds more.
func (r *run) scheduleH2(ctx context.Context, s schedule) {
	h := r.h2
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	i := int64(0)
	intended := s.Intended(0)
	scheduling := intended.Before(r.end)
	var deadline time.Time
	for {
		now := time.Now()
		added := false
		for scheduling && !intended.After(now) {
			if r.admit(intended) {
				h.add(pending{intended: intended, measured: !intended.Before(r.warmEnd)})
				added = true
			}
			i++
			if intended = s.Intended(i); !intended.Before(r.end) {
				scheduling = false
				deadline = now.Add(r.w.Timeout + 10*time.Second)
			}
		}
		if added {
			h.nextSlot()
		}
		h.tick(now)
		if !scheduling && (r.inflight.Load() == 0 || now.After(deadline)) {
			return
		}
		wake := now.Add(pollEvery)
		if scheduling && intended.After(wake) && !h.busy() {
			wake = intended
		}
		if d := time.Until(wake); d <= pollEvery {
			// A short sleep, often: the cheap way (see rawsock.Sleep).
			rawsock.Sleep(d)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		timer.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// admit counts a request due and reports whether it may be sent: not if
// --max-inflight requests are outstanding.
func (r *run) admit(intended time.Time) bool {
	if !intended.Before(r.warmEnd) {
		r.due.Add(1)
	}
	if r.inflight.Load() >= int64(r.w.MaxInflight) {
		return false // due but not sent: the result says so
	}
	n := r.inflight.Add(1)
	for p := r.peak.Load(); n > p && !r.peak.CompareAndSwap(p, n); p = r.peak.Load() {
	}
	return true
}

// countSent counts a request as sent.
func (r *run) countSent(p pending) {
	if p.probe != nil {
		return
	}
	if p.measured {
		r.sent.Add(1)
	}
	r.sentAll.Add(1)
}

// deliver takes a request's outcome, at the time it was complete.
func (r *run) deliver(p pending, o outcome, done time.Time) {
	if p.probe != nil {
		p.probe <- o
		return
	}
	r.account(o, p.intended, done, p.measured)
	r.inflight.Add(-1)
}

func (r *run) account(o outcome, intended, done time.Time, measured bool) {
	if o.kind == "" {
		r.okAll.Add(1)
	}
	if !measured {
		return
	}
	r.mu.Lock()
	if o.status == http.StatusOK {
		r.statuses["200"]++
	} else if o.status != 0 {
		r.statuses[strconv.Itoa(o.status)]++
	}
	if o.kind != "" {
		r.errKinds[o.kind]++
	}
	r.mu.Unlock()
	if o.kind != "" {
		r.errs.Add(1)
		return
	}
	r.ok.Add(1)
	r.lat.Record(done.Sub(intended))
	if r.first != nil && !o.firstEvent.IsZero() {
		r.first.Record(o.firstEvent.Sub(intended))
	}
}

func (r *run) progress(now time.Time, sentRate, okRate float64) {
	if r.opt.Progress == nil {
		return
	}
	phase := fmt.Sprintf("warm-up %3.0f/%.0fs", now.Sub(r.start).Seconds(), r.w.Warmup.Seconds())
	if !now.Before(r.warmEnd) {
		phase = fmt.Sprintf("measure %3.0f/%.0fs", min(now.Sub(r.warmEnd), r.w.Duration).Seconds(), r.w.Duration.Seconds())
	}
	line := fmt.Sprintf("%s  sent %6.0f/s  ok %6.0f/s  in flight %6d  errors %d", phase, sentRate, okRate, r.inflight.Load(), r.errs.Load())
	if r.opt.Overwrite {
		fmt.Fprintf(r.opt.Progress, "\r\033[K%s", line)
	} else if sec := int(now.Sub(r.start).Seconds() + 0.5); sec%5 == 0 {
		fmt.Fprintln(r.opt.Progress, line)
	}
}
