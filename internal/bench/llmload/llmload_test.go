package llmload

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestScheduleRampsLinearlyThenHoldsTheRate(t *testing.T) {
	w := DefaultWorkload()
	w.RampFrom, w.Rate, w.Warmup = 500, 5000, 10*time.Second
	s := newSchedule(time.Unix(0, 0), w)
	// The ramp holds (500+5000)/2 × 10 = 27,500 requests.
	if got := s.rampCount(); got != 27500 {
		t.Fatalf("ramp holds %v requests, want 27500", got)
	}
	if got := s.at(27500); math.Abs(got-10) > 1e-9 {
		t.Errorf("request 27500 at %v s, want 10 (the end of the ramp)", got)
	}
	if got := s.at(27500 + 5000); math.Abs(got-11) > 1e-9 {
		t.Errorf("5,000 requests later at %v s, want 11", got)
	}
	// Early in the ramp the spacing is about 1/500 s, late about 1/5000 s.
	if d := s.at(2) - s.at(1); math.Abs(d-1.0/500) > 1e-4 {
		t.Errorf("early spacing %v, want about 0.002", d)
	}
	if d := s.at(27499) - s.at(27498); math.Abs(d-1.0/5000) > 1e-5 {
		t.Errorf("late spacing %v, want about 0.0002", d)
	}
	for i := int64(1); i < 40000; i++ {
		if s.at(i) <= s.at(i-1) {
			t.Fatalf("request %d is not after request %d", i, i-1)
		}
	}
	flat := newSchedule(time.Unix(0, 0), Workload{Rate: 100, Warmup: time.Second})
	if got := flat.at(150); math.Abs(got-1.5) > 1e-9 {
		t.Errorf("no ramp: request 150 at %v s, want 1.5", got)
	}
}

func shortRun(url string) Workload {
	w := DefaultWorkload()
	w.URL, w.Rate, w.Warmup, w.Duration, w.Window, w.Timeout = url, 50, 200*time.Millisecond, time.Second, 500*time.Millisecond, 5*time.Second
	return w
}

func TestSlowTargetShowsAsLatencyAndInflight(t *testing.T) {
	const delay = 300 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	w := shortRun(srv.URL)
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.Due != 50 || res.Sent != 50 || res.OK != 50 {
		t.Fatalf("valid %v %v; due %d sent %d ok %d, want 50 each", res.Valid, res.Problems, res.Due, res.Sent, res.OK)
	}
	if res.Latency.P50 < float64(delay.Milliseconds()) {
		t.Errorf("p50 %.1f ms, want at least the server's %v", res.Latency.P50, delay)
	}
	// 50 req/s × 0.3 s: about 15 in flight; the schedule never waited.
	if res.PeakInflight < 10 {
		t.Errorf("peak in flight %d, want about 15: the generator must not wait for answers", res.PeakInflight)
	}
}

func TestDueButUnsentIsCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	w := shortRun(srv.URL)
	w.MaxInflight = 1
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Due != 50 || res.Sent >= 20 || res.Valid {
		t.Fatalf("due %d sent %d valid %v: with one request in flight at a time and 200 ms answers, at most ~6 of 50 fit", res.Due, res.Sent, res.Valid)
	}
	if !strings.Contains(strings.Join(res.Problems, ";"), "generator fell behind") {
		t.Errorf("problems %v do not say the generator fell behind", res.Problems)
	}
}

func TestStreamCompletion(t *testing.T) {
	var cut atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		if strings.HasSuffix(r.URL.Path, "/messages") {
			fmt.Fprint(w, "event: message_start\ndata: {}\n\n")
			fl.Flush()
			time.Sleep(50 * time.Millisecond)
			if cut.Load() {
				return // no message_stop
			}
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n")
		fl.Flush()
		time.Sleep(50 * time.Millisecond)
		if cut.Load() {
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"upstream cut\"}}\n\n")
			return
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	for _, dialect := range []string{OpenAI, Anthropic} {
		w := shortRun(srv.URL)
		w.Dialect, w.Stream = dialect, true
		cut.Store(false)
		res, err := Run(context.Background(), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Valid || res.FirstEvent == nil || res.FirstEvent.P50 >= res.Latency.P50 || res.Latency.P50 < 50 {
			t.Errorf("%s complete streams: valid %v %v, first event %+v, latency p50 %v", dialect, res.Valid, res.Problems, res.FirstEvent, res.Latency.P50)
		}
		// The probe request must succeed, so cut streams only after it.
		go func() { time.Sleep(100 * time.Millisecond); cut.Store(true) }()
		res, err = Run(context.Background(), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := "stream incomplete"
		if dialect == OpenAI {
			want = "stream error"
		}
		if res.Valid || res.ErrorKinds[want] < 40 || res.OK != 0 {
			t.Errorf("%s cut streams: valid %v, ok %d, errors %v; want every measured request as %q", dialect, res.Valid, res.OK, res.ErrorKinds, want)
		}
	}
}

func TestUnreachableTargetIsOneError(t *testing.T) {
	w := shortRun("http://127.0.0.1:1")
	_, err := Run(context.Background(), w, Options{})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line saying the connection was refused", err)
	}
}

func TestValidateNamesFlags(t *testing.T) {
	w := DefaultWorkload()
	w.URL, w.Dialect, w.Rate = "ftp://x", "gemini", 0
	err := w.Validate()
	for _, f := range []string{"--url", "--dialect", "--rate"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

// TestGeneratorReportsItsOwnCPU: the generator measures itself, apart from
// the processes it was asked to watch, so that its own cost per request is
// known.
func TestGeneratorReportsItsOwnCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process CPU is read from /proc")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	res, err := Run(context.Background(), shortRun(srv.URL), Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Generator
	if g == nil {
		t.Fatal("no generator process in the result")
	}
	if g.PID != os.Getpid() || g.CPUSeconds <= 0 || g.CPUMicrosPerRequest <= 0 {
		t.Errorf("generator %+v: want this process with its CPU and CPU per request", *g)
	}
	if got, want := g.CPUMicrosPerRequest, g.CPUSeconds*1e6/float64(res.OK); math.Abs(got-want) > want*1e-9 {
		t.Errorf("CPU per request %.3f µs, want %.3f (CPU seconds over answers)", got, want)
	}
	if len(res.Processes) != 0 {
		t.Errorf("processes %+v: the generator belongs apart from the watched processes", res.Processes)
	}
}
