package h2server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitgw/strait/internal/h2sched"
	"github.com/straitgw/strait/internal/testkit"
	"github.com/straitgw/strait/internal/writebatch"
)

// The servers compared, each set up as the gateway sets it up: x/net's
// through net/http with h2sched's scheduler, and this package's; both on
// a writebatch listener.
var benchServers = []struct {
	name  string
	serve func(b *testing.B, h http.Handler) string
}{
	{"x-net", serveXNet},
	{"strait", serveStrait},
}

func serveXNet(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols), MaxHeaderBytes: 64 << 10,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 10000}}
	srv.Protocols.SetUnencryptedHTTP2(true)
	if err := http2.ConfigureServer(srv, &http2.Server{MaxConcurrentStreams: 10000, NewWriteScheduler: h2sched.New}); err != nil {
		b.Fatal(err)
	}
	go srv.Serve(writebatch.Listener{Listener: ln})
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func serveStrait(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{Handler: h, MaxConcurrentStreams: 10000}
	l := s.Listen(writebatch.Listener{Listener: ln})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	b.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// jsonHandler reads a JSON request and answers a small JSON body with
// its length, as the gateway answers a JSON request.
var jsonAnswer = []byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)

func jsonHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(jsonAnswer)))
	w.Write(jsonAnswer)
}

var jsonRequest = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"The capital of France?"}],"max_tokens":64}`)

// BenchmarkServe sends small JSON requests over h2c, 32 at a time, to
// each server, and reports the CPU the whole process (x/net's client
// included, the same for both) spends per request as cpu-µs/op. With
// "waiting", 1,000 other requests stay in flight on the connection
// meanwhile, as a gateway's requests wait on their providers.
func BenchmarkServe(b *testing.B) {
	for _, waiting := range []int{0, 1000} {
		for _, srv := range benchServers {
			b.Run(srv.name+"/waiting="+strconv.Itoa(waiting), func(b *testing.B) {
				release := make(chan struct{})
				var inside atomic.Int32
				addr := srv.serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/wait" {
						inside.Add(1)
						<-release
						return
					}
					jsonHandler(w, r)
				}))
				c := h2cClient()
				var held sync.WaitGroup
				for range waiting {
					held.Go(func() {
						req, _ := http.NewRequest("GET", "http://"+addr+"/wait", nil)
						if resp, err := c.Do(req); err == nil {
							resp.Body.Close()
						}
					})
				}
				for inside.Load() < int32(waiting) {
					time.Sleep(time.Millisecond)
				}
				b.Cleanup(func() {
					close(release)
					held.Wait()
				})
				b.SetParallelism(32 / runtime.GOMAXPROCS(0))
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := testkit.ProcessCPU()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", bytes.NewReader(jsonRequest))
						req.ContentLength = int64(len(jsonRequest))
						req.Header.Set("Content-Type", "application/json")
						resp, err := c.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(testkit.ProcessCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
			})
		}
	}
}

// BenchmarkInFlightMemory opens 9,000 requests on one connection whose
// handlers wait, as the gateway's wait on their providers, and reports
// the memory (heap and goroutine stacks) the server holds per request in
// flight: "json" has written nothing yet, "stream" has sent its headers
// and a first event. The client writes frames by hand and keeps no state
// per request, so what is measured is the server's.
func BenchmarkInFlightMemory(b *testing.B) {
	const n = 9000
	for _, stream := range []bool{false, true} {
		for _, srv := range benchServers {
			name := srv.name + "/json"
			if stream {
				name = srv.name + "/stream"
			}
			b.Run(name, func(b *testing.B) {
				var heap, stack float64
				for range b.N {
					heap, stack = inFlightMemory(b, srv.serve, n, stream)
				}
				b.ReportMetric(heap+stack, "B/in-flight")
				b.ReportMetric(heap, "heap-B/in-flight")
				b.ReportMetric(stack, "stack-B/in-flight")
			})
		}
	}
}

func inFlightMemory(b *testing.B, serve func(*testing.B, http.Handler) string, n int, stream bool) (heap, stack float64) {
	release := make(chan struct{})
	var inside atomic.Int32
	var wg sync.WaitGroup
	addr := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
			w.(http.Flusher).Flush()
		}
		inside.Add(1)
		<-release
		w.Write(jsonAnswer)
	}))
	h := testkit.DialH2CHold(b, addr, testkit.H2CRequest{Authority: addr, Path: "/v1/chat/completions",
		Authorization: "Bearer sk-test", Body: jsonRequest})
	defer h.Close()
	open := func(from, to int) {
		h.Open(to - from)
		for inside.Load() < int32(to) {
			time.Sleep(time.Millisecond)
		}
	}
	// What the connection itself holds is in both measurements; the
	// difference is the last 6,000 requests'.
	open(0, n/3)
	heap0, stack0 := testkit.MemInUse()
	open(n/3, n)
	heap1, stack1 := testkit.MemInUse()
	close(release)
	wg.Wait()
	k := float64(n - n/3)
	return (float64(heap1) - float64(heap0)) / k, (float64(stack1) - float64(stack0)) / k
}

// BenchmarkServeRaw is BenchmarkServe with a client that writes its
// frames by hand and parses only frame headers, so that nearly all the
// CPU reported per request (cpu-µs/op) is the server's: 64 requests are
// kept in flight on one connection, each a HEADERS and a DATA frame.
func BenchmarkServeRaw(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			addr := srv.serve(b, http.HandlerFunc(jsonHandler))
			testkit.BenchH2CPipeline(b, addr, testkit.H2CRequest{Authority: addr, Path: "/v1/chat/completions",
				Authorization: "Bearer sk-test", Body: jsonRequest})
		})
	}
}
