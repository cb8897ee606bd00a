package report

import (
	"fmt"
	"strings"

	"github.com/straitgw/strait/internal/bench/result"
)

// writeKafkaRequests writes the lines that size each process by Kafka
// requests: the requests of the measurement by API, as the gateway and the
// clients counted them, each watched process's CPU per request, and, when
// the run was split by API, per Produce and per Fetch.
func writeKafkaRequests(b *strings.Builder, r *result.Kafka) {
	counted := r.CountedRequests()
	if counted == nil {
		return
	}
	b.WriteString("\n")
	if r.GatewayRequests != nil {
		fmt.Fprintf(b, "Kafka requests, counted by the gateway (%s): %s\n", r.GatewayMetrics, requestsLine(r.GatewayRequests))
	}
	if r.ClientRequests != nil {
		fmt.Fprintf(b, "Kafka requests, counted by the clients: %s\n", requestsLine(r.ClientRequests))
	}
	var parts []string
	for _, p := range r.Processes {
		if p.CPUMicrosPerRequest > 0 {
			parts = append(parts, fmt.Sprintf("%s (pid %d) %s µs", processName(p), p.PID, num(p.CPUMicrosPerRequest)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "CPU per Kafka request (by the %s's count): %s\n", r.RequestsCountedBy, strings.Join(parts, ", "))
	}
	parts = parts[:0]
	for _, p := range r.Processes {
		if p.CPUMicrosPerProduce > 0 {
			fetch := "–"
			if p.CPUMicrosPerFetch > 0 {
				fetch = num(p.CPUMicrosPerFetch) + " µs"
			}
			parts = append(parts, fmt.Sprintf("%s (pid %d) %s µs per Produce, %s per Fetch", processName(p), p.PID, num(p.CPUMicrosPerProduce), fetch))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "CPU by API (Fetch derived): %s\n", strings.Join(parts, "; "))
	}
	for _, n := range r.SplitNotes {
		fmt.Fprintf(b, "  - %s\n", n)
	}
}

// requestsLine is a count of requests in one line: the total, the rate,
// and Produce, Fetch and the rest.
func requestsLine(q *result.Requests) string {
	produce, fetch := q.API(result.APIProduce), q.API(result.APIFetch)
	return fmt.Sprintf("%d (%s/s): Produce %d, Fetch %d, others %d", q.Total, num(q.PerSecond), produce, fetch, q.Total-produce-fetch)
}

// kafkaRequestMetrics are a watched process's figures per Kafka request,
// for the layer and comparison tables: its CPU per request, and per
// Produce and per Fetch when the run was split by API.
func kafkaRequestMetrics(p result.Process) []Metric {
	name := processName(p)
	var out []Metric
	if p.CPUMicrosPerRequest > 0 {
		out = append(out, Metric{name + " CPU per request", "µs", p.CPUMicrosPerRequest})
	}
	if p.CPUMicrosPerProduce > 0 {
		out = append(out, Metric{name + " CPU per Produce", "µs", p.CPUMicrosPerProduce})
	}
	if p.CPUMicrosPerFetch > 0 {
		out = append(out, Metric{name + " CPU per Fetch, derived", "µs", p.CPUMicrosPerFetch})
	}
	return out
}
