package llmload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// failFirst answers its first n requests with status, then as firstOK's
// probe answer does.
func failFirst(n int64, status int, seen *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if seen.Add(1) <= n {
			http.Error(w, "injected fault", status)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: [DONE]\n\nevent: message_stop\ndata: {}\n\n")
	}
}

// A first request answered 5xx or 429 (a provider's bad moment, a mock
// injecting faults) is asked again before the run gives up; the run then
// goes ahead, and the probes are not counted in its results.
func TestProbeAsksAgainAfterAnAnswerThatMayPass(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		for _, h2c := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d h2c=%v", status, h2c), func(t *testing.T) {
				var seen atomic.Int64
				h := failFirst(2, status, &seen)
				var w Workload
				if h2c {
					w = h2cRun(h2cServer(t, h, nil))
				} else {
					srv := httptest.NewServer(h)
					t.Cleanup(srv.Close)
					w = shortRun(srv.URL)
				}
				res, err := Run(context.Background(), w, Options{})
				if err != nil {
					t.Fatalf("the run stopped at the probe: %v", err)
				}
				if res.OK != 50 || res.Errors != 0 {
					t.Errorf("ok %d errors %d, want the 50 requests of the run answered and the three probes uncounted", res.OK, res.Errors)
				}
				warm := int64(w.Rate * w.Warmup.Seconds())
				if got := seen.Load(); got != 3+warm+50 {
					t.Errorf("the server saw %d requests, want 3 probes, %d in the warm-up and 50", got, warm)
				}
			})
		}
	}
}

func TestProbeGivesUpAfterItsTries(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(failFirst(1<<30, http.StatusBadGateway, &seen))
	t.Cleanup(srv.Close)
	_, err := Run(context.Background(), shortRun(srv.URL), Options{})
	if err == nil || !strings.Contains(err.Error(), "HTTP 502: injected fault") {
		t.Fatalf("error %v, want the last probe's status and body", err)
	}
	if got := seen.Load(); got != probeTries {
		t.Errorf("the server saw %d requests, want %d probes", got, probeTries)
	}
}

// A refusal that asking again cannot change (a wrong key, an unknown
// model) stops the run at once.
func TestProbeDoesNotAskAgainAfterAClientError(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(failFirst(1<<30, http.StatusUnauthorized, &seen))
	t.Cleanup(srv.Close)
	_, err := Run(context.Background(), shortRun(srv.URL), Options{})
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("error %v, want the 401", err)
	}
	if got := seen.Load(); got != 1 {
		t.Errorf("the server saw %d requests, want one", got)
	}
}
