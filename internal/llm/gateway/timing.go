package gateway

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// Stage is one step of a request inside the gateway. Each request's time
// in each stage is recorded in strait_llm_stage_seconds{stage} and, on
// request, returned in the X-Strait-Trace header or trailer.
type Stage uint8

// The stages, in the order a request meets them.
const (
	// StageReceive reads the request body from the client.
	StageReceive Stage = iota
	// StageParse scans the body for model and stream.
	StageParse
	// StageRoute picks the route.
	StageRoute
	// StagePrepare splices the model or translates the body, and builds
	// the provider request.
	StagePrepare
	// StageSend hands the request to the provider: getting a pooled
	// connection (or dialling one) and writing the request.
	StageSend
	// StageResponseReceive reads the provider's response body; this is
	// mostly waiting for the provider, and is not counted as overhead.
	StageResponseReceive
	// StageResponseParse frames events (streams) or reads usage (JSON).
	StageResponseParse
	// StageTranslate converts the response or each event to the client's
	// dialect (on the fast path: hands the bytes on unchanged).
	StageTranslate
	// StageResponseSend writes and flushes the response to the client.
	StageResponseSend
	numStages
)

var stageNames = [numStages]string{
	"receive", "parse", "route", "prepare", "send",
	"response_receive", "response_parse", "translate", "response_send",
}

func (s Stage) String() string {
	if s < numStages {
		return stageNames[s]
	}
	return "stage(" + strconv.Itoa(int(s)) + ")"
}

// Response headers and trailers the gateway adds.
const (
	// OverheadHeader is the time spent inside the gateway, in
	// microseconds, up to the moment the response headers were sent: for a
	// JSON response all of it but writing the body, for a stream the
	// overhead until its first byte.
	OverheadHeader = "X-Strait-Overhead-Us"
	// OverheadTrailer is a stream's whole overhead, in microseconds, sent
	// as a trailer when the stream ends.
	OverheadTrailer = "X-Strait-Overhead-Total-Us"
	// TraceHeader, sent by a client with the value 1, asks for the time in
	// each stage. It comes back as a header on JSON responses and as a
	// trailer on streams, in Server-Timing syntax (durations in
	// milliseconds): "receive;dur=0.004, parse;dur=0.001, …,
	// upstream;dur=12.5, overhead;dur=0.061, total;dur=18.2".
	TraceHeader = "X-Strait-Trace"
	// TargetHeader names the route target that answered (or whose
	// failure is the answer).
	TargetHeader = "X-Strait-Target"
	// AttemptsHeader is how many attempts the request took, the one
	// that answered included.
	AttemptsHeader = "X-Strait-Attempts"
)

// clock is the time since the request arrived.
func (x *exchange) clock() time.Duration { return time.Since(x.start) }

// lap adds the time since the last mark to stage s and moves the mark.
func (x *exchange) lap(s Stage) {
	now := x.clock()
	x.stages[s] += now - x.mark
	x.reached |= 1 << s
	x.mark = now
}

// add adds d to stage s without moving the mark.
func (x *exchange) add(s Stage, d time.Duration) {
	x.stages[s] += d
	x.reached |= 1 << s
}

// blocked is the time spent waiting on the provider so far.
func (x *exchange) blocked() time.Duration { return x.upstreamWait + x.recvWait }

// overhead is the time inside the gateway until now (a clock reading).
func (x *exchange) overhead(now time.Duration) time.Duration {
	return max(now-x.blocked(), 0)
}

func micros(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
}

// traceValue formats the stages reached so far.
func (x *exchange) traceValue(now time.Duration) string {
	b := make([]byte, 0, 256)
	entry := func(name string, d time.Duration) {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, name...)
		b = append(b, ";dur="...)
		b = strconv.AppendFloat(b, float64(d)/float64(time.Millisecond), 'f', 4, 64)
	}
	for s := range numStages {
		if x.reached&(1<<s) != 0 {
			entry(stageNames[s], x.stages[s])
		}
		if s == StageSend && x.upstreamWait > 0 {
			entry("upstream", x.upstreamWait)
		}
	}
	entry("overhead", x.overhead(now))
	entry("total", now)
	return string(b)
}

// respWriter wraps the client's ResponseWriter to remember the status,
// count body bytes and time every write and flush (StageResponseSend).
type respWriter struct {
	rw      http.ResponseWriter
	start   time.Time // the exchange's, for one-read clock readings
	status  int
	written int64
	sendDur time.Duration
	err     error
}

func (w *respWriter) Header() http.Header { return w.rw.Header() }

func (w *respWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.rw.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	t := time.Since(w.start)
	n, err := w.rw.Write(b)
	w.sendDur += time.Since(w.start) - t
	w.written += int64(n)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// FlushError flushes to the client; sse.Writer calls it after each event.
func (w *respWriter) FlushError() error {
	t := time.Since(w.start)
	var err error
	switch f := w.rw.(type) {
	case interface{ FlushError() error }:
		err = f.FlushError()
	case http.Flusher:
		f.Flush()
	default:
		err = http.NewResponseController(w.rw).Flush()
	}
	w.sendDur += time.Since(w.start) - t
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.rw }

// timedBody reads the provider's response body, adding the time blocked in
// each read to the exchange's provider wait, and stops the response
// timeout at the first byte.
type timedBody struct {
	r io.Reader
	x *exchange
}

func (b *timedBody) Read(p []byte) (int, error) {
	t := b.x.clock()
	n, err := b.r.Read(p)
	b.x.recvWait += b.x.clock() - t
	if !b.x.firstByte && (n > 0 || err != nil) {
		b.x.gotFirstByte()
	}
	return n, err
}
