package gateway

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/straitgw/strait/internal/testkit"
)

// BenchmarkH2CInFlightMemory is the gateway's memory per request in
// flight over h2c, on each HTTP/2 server: 3,000 requests are opened on one
// connection by a client that writes frames by hand and keeps nothing per
// request, then 6,000 more, all held by a provider in memory (as a
// provider that takes seconds holds them); the heap (after two
// collections, so the sync.Pools are empty) and goroutine stacks are read
// at 3,000 and 9,000 requests, and the difference over the 6,000 is
// reported. It is the gateway's own (handler, HTTP/2 server), without the
// provider connection's share.
//
//	go test ./internal/llm/gateway/ -run '^$' -bench H2CInFlightMemory -benchtime 2x
func BenchmarkH2CInFlightMemory(b *testing.B) {
	const first, n = 3000, 9000
	for _, srv := range h2Servers {
		b.Run(srv.name, func(b *testing.B) {
			var heap, stack float64
			for range b.N {
				heap, stack = h2cInFlight(b, srv.strait, first, n)
			}
			b.ReportMetric(heap+stack, "B/in-flight")
			b.ReportMetric(heap, "heap-B/in-flight")
			b.ReportMetric(stack, "stack-B/in-flight")
		})
	}
}

func h2cInFlight(b testing.TB, strait bool, first, n int) (heap, stack float64) {
	prov := &heldProvider{release: make(chan struct{}), body: []byte(openAIJSON("gpt-upstream"))}
	g := benchGateway(b, prov, slog.LevelWarn)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go g.Serve(ln, Listener{H2C: true, StraitH2C: strait})
	defer g.Shutdown(context.Background())
	h := testkit.DialH2CHold(b, ln.Addr().String(), testkit.H2CRequest{Authority: "gateway", Path: "/v1/chat/completions",
		Authorization: "Bearer " + testKey, Body: []byte(referenceBody)})
	defer h.Close()
	open := func(from, to int) {
		prov.arrived.Add(to - from)
		h.Open(to - from)
		prov.arrived.Wait()
	}
	open(0, first)
	heap0, stack0 := testkit.MemInUse()
	open(first, n)
	heap1, stack1 := testkit.MemInUse()
	close(prov.release)
	k := float64(n - first)
	return (float64(heap1) - float64(heap0)) / k, (float64(stack1) - float64(stack0)) / k
}

// BenchmarkH2CServe is the gateway's CPU per request over h2c, on each
// HTTP/2 server, with the provider in memory: a client that writes its
// frames by hand (and parses only frame headers) keeps 64 JSON requests
// in flight on one connection; cpu-µs/op is the process's CPU time per
// request, nearly all of it the gateway's.
//
//	go test ./internal/llm/gateway/ -run '^$' -bench H2CServe -benchtime 30000x
func BenchmarkH2CServe(b *testing.B) {
	for _, srv := range h2Servers {
		b.Run(srv.name, func(b *testing.B) {
			g := benchGateway(b, &memProvider{ctype: "application/json", body: []byte(openAIJSON("gpt-upstream"))}, slog.LevelWarn)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go g.Serve(ln, Listener{H2C: true, StraitH2C: srv.strait})
			defer g.Shutdown(context.Background())
			testkit.BenchH2CPipeline(b, ln.Addr().String(), testkit.H2CRequest{Authority: "gateway", Path: "/v1/chat/completions",
				Authorization: "Bearer " + testKey, Body: []byte(referenceBody)})
		})
	}
}
