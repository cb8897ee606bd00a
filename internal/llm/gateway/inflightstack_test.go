//go:build !race

// The race detector's instrumentation makes every frame larger, so the
// stacks measured here are not a gateway's: this test is built without it
// only (scripts/test runs it once without -race).

package gateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Requests waiting for their provider hold little stack, which at
// thousands of requests in flight is much of the gateway's memory:
//   - a fast-path request fits the stack its goroutine started with (at
//     most 4 KiB here): the frames under RoundTrip are kept small (see
//     attempt), where they used to take it to 8 KiB;
//   - a translated one may grow it once (translation is deeper than the
//     rest of the path), but no more: a 16 KiB frame to pre-grow the stack
//     once kept 19 KiB per request in flight.
func TestTranslatedRequestsInFlightHoldSmallStacks(t *testing.T) {
	const n = 1000
	start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	perRequest := func(model string, prov *heldProvider, g *Gateway) float64 {
		prov.arrived.Add(n)
		var done sync.WaitGroup
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range n {
			done.Add(1)
			go func() {
				defer done.Done()
				body := strings.Replace(referenceBody, `"alias-x"`, `"`+model+`"`, 1)
				req, _ := http.NewRequest("POST", "http://gateway/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("Content-Type", "application/json")
				g.ServeHTTP(&discard{h: http.Header{}}, req)
			}()
		}
		prov.arrived.Wait()
		runtime.ReadMemStats(&m1)
		metrics.Read(start)
		close(prov.release)
		done.Wait()
		return float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / n
	}
	fastProv := &heldProvider{release: make(chan struct{}), body: []byte(openAIJSON("gpt-4o"))}
	fast := perRequest("gpt-4o", fastProv, heldGateway(t, fastProv))
	fastStart := start[0].Value.Uint64()
	trProv := &heldProvider{release: make(chan struct{}), body: []byte(anthropicJSON("claude-x"))}
	translated := perRequest("claude-x", trProv, heldGateway(t, trProv))
	t.Logf("stack per request in flight: fast path %.1f KiB, translated %.1f KiB (goroutines start with %d B)", fast/1024, translated/1024, fastStart)
	if limit := float64(max(fastStart, 4096) + 512); fast > limit {
		t.Errorf("a fast-path request in flight holds %.1f KiB of stack, more than %d B (goroutines start with %d B): a frame under RoundTrip grew it", fast/1024, max(fastStart, 4096), fastStart)
	}
	if translated > 2*fast+512 {
		t.Errorf("a translated request in flight holds %.1f KiB of stack, a fast-path one %.1f KiB: translation left its stack grown more than once", translated/1024, fast/1024)
	}
}

// Over Strait's HTTP/1.1 server a request waiting for its provider holds
// its connection's goroutine, whose stack stays the size it started with:
// the server's frames and the gateway's fit, with the h2c upgrade's
// handler kept off the path of requests that do not ask to upgrade (its
// 512-byte frame took the stack past 4 KiB, to 8 KiB for the life of the
// connection).
func TestStraitHTTP1RequestsInFlightHoldSmallStacks(t *testing.T) {
	const n = 400
	for _, l := range []Listener{{StraitHTTP1: true}, {HTTP1: true, StraitHTTP1: true}} {
		prov := &heldProvider{release: make(chan struct{}), body: []byte(openAIJSON("gpt-4o"))}
		g := heldGateway(t, prov)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go g.Serve(ln, l)
		addr := ln.Addr().String()
		body := strings.Replace(referenceBody, `"alias-x"`, `"gpt-4o"`, 1)
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testKey +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		prov.arrived.Add(n)
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, req)
			conns[i] = c
		}
		arrived := make(chan struct{})
		go func() { prov.arrived.Wait(); close(arrived) }()
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatal("the requests did not all reach the provider")
		}
		runtime.ReadMemStats(&m1)
		start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
		metrics.Read(start)
		close(prov.release)
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(waitLimit))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
				t.Errorf("answer: %v", err)
			}
			c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		g.Shutdown(ctx)
		cancel()
		perRequest := float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / n
		t.Logf("listener %+v: stack per request in flight %.1f KiB (goroutines start with %d B)", l, perRequest/1024, start[0].Value.Uint64())
		if limit := float64(max(start[0].Value.Uint64(), 4096) + 512); perRequest > limit {
			t.Errorf("listener %+v: a request in flight holds %.1f KiB of stack, more than %.0f B (goroutines start with %d B): a frame on its path grew it", l, perRequest/1024, limit, start[0].Value.Uint64())
		}
	}
}

// heldGateway is a gateway, quiet, whose providers (both dialects) are
// prov.
func heldGateway(t *testing.T, prov *heldProvider) *Gateway {
	t.Helper()
	o := bothDialectsOptions()
	o.Log = slog.New(slog.DiscardHandler)
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	g.providers["an"].rt, g.providers["oa"].rt = prov, prov
	return g
}
