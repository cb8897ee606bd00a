package promscrape

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const page = `# HELP strait_kafka_requests_total Requests received from clients, by API key.
# TYPE strait_kafka_requests_total counter
strait_kafka_requests_total{api="Fetch",virtual_cluster="a"} 25226
strait_kafka_requests_total{api="Produce",virtual_cluster="a"} 35988
strait_kafka_requests_total{api="Produce",virtual_cluster="b, \"quoted\" {x}"} 12 1700000000000
strait_kafka_requests_total{virtual_cluster="a",api="Metadata",} 37
strait_kafka_requests_total_created{api="Produce",virtual_cluster="a"} 1.7e9
strait_kafka_requests_totally{api="Produce"} 5
strait_kafka_responses_total{api="Produce",virtual_cluster="a"} 35987
`

func TestParseSumsByLabel(t *testing.T) {
	got, err := Parse(strings.NewReader(page), "strait_kafka_requests_total", "api")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"Fetch": 25226, "Produce": 36000, "Metadata": 37}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Label values with escapes, commas and braces are read whole.
	byVC, err := Parse(strings.NewReader(page), "strait_kafka_requests_total", "virtual_cluster")
	if err != nil {
		t.Fatal(err)
	}
	if byVC[`b, "quoted" {x}`] != 12 || byVC["a"] != 25226+35988+37 {
		t.Errorf("by virtual cluster: %v", byVC)
	}
}

func TestParseWithoutTheMetric(t *testing.T) {
	for _, p := range []string{"", "# HELP strait_kafka_requests_total x\n# TYPE strait_kafka_requests_total counter\n", "go_goroutines 12\nstrait_kafka_requests_total_created 5\n"} {
		if _, err := Parse(strings.NewReader(p), "strait_kafka_requests_total", "api"); !errors.Is(err, ErrNoMetric) {
			t.Errorf("page %q: %v, want ErrNoMetric", p, err)
		}
	}
}

func TestParseRefusesABadSampleLine(t *testing.T) {
	for _, line := range []string{
		`strait_kafka_requests_total{api="Produce"} many`,
		`strait_kafka_requests_total{api="Produce} 1`,
		`strait_kafka_requests_total{api=Produce} 1`,
		`strait_kafka_requests_total{api="Produce"`,
		`strait_kafka_requests_total{api="Produce"} 1 2 3`,
		`strait_kafka_requests_total`,
	} {
		_, err := Parse(strings.NewReader("go_goroutines 1\n"+line+"\n"), "strait_kafka_requests_total", "api")
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v, want an error naming line 2", line, err)
		}
	}
}

func TestIncrease(t *testing.T) {
	got, err := Increase(map[string]float64{"Produce": 100, "Fetch": 50}, map[string]float64{"Produce": 160, "Fetch": 50, "Metadata": 3})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "map[Fetch:0 Metadata:3 Produce:60]" {
		t.Errorf("got %v", got)
	}
	// A gateway restarted between the scrapes: its counters start again
	// from 0, and the increase is unknown.
	_, err = Increase(map[string]float64{"Produce": 100, "Fetch": 50}, map[string]float64{"Produce": 20})
	if err == nil || !strings.Contains(err.Error(), "reset") || !strings.Contains(err.Error(), `"Produce" went from 100 to 20`) || !strings.Contains(err.Error(), `"Fetch" went from 50 to nothing`) {
		t.Errorf("a reset counter: %v", err)
	}
}

// TestFetchFromAGatewayRegistry reads what client_golang serves, as the
// gateway's admin listener does.
func TestFetchFromAGatewayRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strait_kafka_requests_total", Help: "h"}, []string{"virtual_cluster", "api"})
	reg.MustRegister(vec)
	vec.WithLabelValues("a", "Produce").Add(7)
	vec.WithLabelValues("b", "Produce").Add(3)
	vec.WithLabelValues("a", "Fetch").Add(2)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	got, err := Fetch(context.Background(), srv.URL+"/metrics", "strait_kafka_requests_total", "api")
	if err != nil {
		t.Fatal(err)
	}
	if got["Produce"] != 10 || got["Fetch"] != 2 {
		t.Errorf("got %v", got)
	}
	if _, err := Fetch(context.Background(), srv.URL+"/metrics", "strait_kafka_bytes_total", "api"); !errors.Is(err, ErrNoMetric) {
		t.Errorf("a metric the page lacks: %v", err)
	}
	if _, err := Fetch(context.Background(), srv.URL+"/nothing", "strait_kafka_requests_total", "api"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a page that is not there: %v", err)
	}
	closed := httptest.NewServer(mux)
	closed.Close()
	if _, err := Fetch(context.Background(), closed.URL+"/metrics", "strait_kafka_requests_total", "api"); err == nil || !strings.Contains(err.Error(), closed.URL) {
		t.Errorf("nothing listening: %v, want an error naming the URL", err)
	}
}

func TestCheckURL(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:9190/metrics", "ftp://127.0.0.1/metrics", "http:///metrics", "/metrics", "http://[::1"} {
		if err := CheckURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"http://127.0.0.1:9190/metrics", "https://gw.example:9190/metrics"} {
		if err := CheckURL(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// FuzzParse feeds Parse arbitrary pages: it returns sums or an error,
// never panics.
func FuzzParse(f *testing.F) {
	f.Add(page)
	f.Add(`strait_kafka_requests_total{api="a\\",b="\n"} 1e3`)
	f.Add(`strait_kafka_requests_total{`)
	f.Fuzz(func(t *testing.T, p string) {
		sums, err := Parse(strings.NewReader(p), "strait_kafka_requests_total", "api")
		if err == nil && len(sums) == 0 {
			t.Errorf("no error and no sums for %q", p)
		}
	})
}
