package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	fr := http2.NewFramer(nc, nc)
	io.WriteString(nc, http2.ClientPreface)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	fr.WriteWindowUpdate(0, 1<<30)
	go io.Copy(io.Discard, nc) // the answers, read and dropped
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	body := []byte(referenceBody)
	open := func(from, to int) {
		prov.arrived.Add(to - from)
		for i := from; i < to; i++ {
			hb.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
				{Name: ":path", Value: "/v1/chat/completions"}, {Name: ":authority", Value: "gateway"},
				{Name: "content-type", Value: "application/json"}, {Name: "authorization", Value: "Bearer " + testKey},
				{Name: "content-length", Value: strconv.Itoa(len(body))}} {
				enc.WriteField(f)
			}
			id := uint32(2*i + 1)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
			fr.WriteData(id, true, body)
		}
		prov.arrived.Wait()
	}
	memInUse := func() (uint64, uint64) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, ms.StackInuse
	}
	open(0, first)
	heap0, stack0 := memInUse()
	open(first, n)
	heap1, stack1 := memInUse()
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
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			body := []byte(referenceBody)
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
				{Name: ":path", Value: "/v1/chat/completions"}, {Name: ":authority", Value: "gateway"},
				{Name: "content-type", Value: "application/json"}, {Name: "authorization", Value: "Bearer " + testKey},
				{Name: "content-length", Value: strconv.Itoa(len(body))}} {
				f.Sensitive = true // never indexed: the same bytes every time
				enc.WriteField(f)
			}
			block := append([]byte(nil), hb.Bytes()...)
			var out bytes.Buffer
			wfr := http2.NewFramer(&out, nil)
			out.WriteString(http2.ClientPreface)
			wfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
			wfr.WriteWindowUpdate(0, 1<<31-1-65535)
			if _, err := nc.Write(out.Bytes()); err != nil {
				b.Fatal(err)
			}
			const depth = 64
			credits := make(chan struct{}, depth)
			for range depth {
				credits <- struct{}{}
			}
			done := make(chan error, 1)
			go func() {
				rfr := http2.NewFramer(nil, nc)
				rfr.SetMaxReadFrameSize(1 << 20)
				for ended := 0; ended < b.N; {
					f, err := rfr.ReadFrame()
					if err != nil {
						done <- err
						return
					}
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if !f.IsAck() {
							nc.Write([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0})
						}
					case *http2.GoAwayFrame, *http2.RSTStreamFrame:
						done <- errors.New("the server reset a request")
						return
					}
					if f.Header().StreamID != 0 && f.Header().Flags.Has(http2.FlagDataEndStream) {
						ended++
						credits <- struct{}{}
					}
				}
				done <- nil
			}()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			id := uint32(1)
			for sent := 0; sent < b.N; {
				<-credits
				k := 1
				for ; k < depth && len(credits) > 0; k++ {
					<-credits
				}
				k = min(k, b.N-sent)
				out.Reset()
				for range k {
					wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
					wfr.WriteData(id, true, body)
					id += 2
				}
				sent += k
				if _, err := nc.Write(out.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
