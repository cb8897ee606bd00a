package kafkaload

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/devbroker"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

// startGateway starts a gateway with no filters in front of broker, with
// its request counters served at the returned metrics URL, as `strait
// run`'s admin listener serves them.
func startGateway(t *testing.T, broker []string) (bootstrap, metricsURL string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	base := testkit.PortBlock(t, 4)
	vc, err := proxy.New(proxy.Options{
		Name: "bench", Listen: testkit.Addr(base), NodePortStart: base + 1, NodePortEnd: base + 3,
		Target:  proxy.Target{Bootstrap: broker},
		Metrics: telemetry.NewKafkaMetrics(reg),
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		vc.Shutdown(ctx)
	})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return vc.Addr().String(), srv.URL + "/metrics"
}

// TestGatewayCountsAgreeWithTheClients runs the generator through a real
// gateway in front of kfake, reading the gateway's counters: both counts
// see Produce and Fetch, the gateway's (read just outside the clients'
// window) at least as many as the clients wrote and not many more, and
// the watched process (this one, which holds the gateway) is sized by the
// gateway's count.
func TestGatewayCountsAgreeWithTheClients(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	bootstrap, metrics := startGateway(t, c.Addrs())
	w := shortWorkload([]string{bootstrap})
	res, err := Run(context.Background(), w, Options{Label: "t", GatewayMetrics: metrics, WatchPIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Fatalf("run not valid: %v", res.Problems)
	}
	gw, cl := res.GatewayRequests, res.ClientRequests
	if gw == nil || cl == nil {
		t.Fatalf("counts: gateway %+v, clients %+v", gw, cl)
	}
	for _, api := range []string{result.APIProduce, result.APIFetch} {
		g, c := gw.API(api), cl.API(api)
		if c <= 0 || g < c || g > c+max(5, c/10) {
			t.Errorf("%s: the gateway counted %d, the clients wrote %d; want both above 0 and the gateway's within [clients, clients + 10%%]", api, g, c)
		}
	}
	// Each Produce carries at least one record, and at 500 records/s
	// with no linger there are many Produce requests.
	if p := cl.API(result.APIProduce); p > res.Published+int64(w.Rate) || p < res.Published/20 {
		t.Errorf("%d Produce requests for %d records", p, res.Published)
	}
	if res.RequestsCountedBy != result.CountedByGateway || res.GatewayMetrics != metrics {
		t.Errorf("counted by %q from %q", res.RequestsCountedBy, res.GatewayMetrics)
	}
	if len(res.Processes) != 1 || res.Processes[0].CPUMicrosPerRequest <= 0 {
		t.Errorf("processes %+v, want CPU per request", res.Processes)
	}
	if want := res.Processes[0].CPUSeconds * 1e6 / float64(gw.Total); res.Processes[0].CPUMicrosPerRequest != want {
		t.Errorf("CPU per request %v, want %v (by the gateway's count)", res.Processes[0].CPUMicrosPerRequest, want)
	}
}

// TestClientsCountRequestsWithoutTheGateway: without the gateway's page
// the run still counts requests, its clients' own, and says so.
func TestClientsCountRequestsWithoutTheGateway(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	w := shortWorkload(c.Addrs())
	res, err := Run(context.Background(), w, Options{Label: "t", WatchPIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GatewayRequests != nil || res.RequestsCountedBy != result.CountedByClient || res.ClientRequests.API(result.APIProduce) == 0 || res.ClientRequests.API(result.APIFetch) == 0 {
		t.Errorf("counted by %q: clients %+v, gateway %+v", res.RequestsCountedBy, res.ClientRequests, res.GatewayRequests)
	}
	if res.Processes[0].CPUMicrosPerRequest <= 0 {
		t.Errorf("no CPU per request: %+v", res.Processes[0])
	}
}

// TestGatewayMetricsErrorsAreClear: a page that is not a gateway's, or
// nothing at the URL, fails the run before it starts, naming the flag.
func TestGatewayMetricsErrorsAreClear(t *testing.T) {
	c := startBroker(t, devbroker.Options{})
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "go_goroutines 12\n")
	}))
	defer other.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct{ url, want string }{
		{other.URL + "/metrics", "has no strait_kafka_requests_total"},
		{closed.URL + "/metrics", "connection refused"},
		{"127.0.0.1:9190/metrics", "not a URL"},
	} {
		w := shortWorkload(c.Addrs())
		_, err := Run(context.Background(), w, Options{GatewayMetrics: tc.url, SetupTimeout: 10 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "--gateway-metrics") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about --gateway-metrics saying %q", tc.url, err, tc.want)
		}
	}
}
