package h2sched_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitgw/strait/internal/h2sched"
)

// serve serves h over h2c with prior knowledge on a loopback port, with
// x/net's server and the scheduler newSched makes (nil: net/http's own).
func serve(t testing.TB, h http.Handler, newSched func() http2.WriteScheduler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 10000}}
	if newSched != nil {
		if err := http2.ConfigureServer(srv, &http2.Server{MaxConcurrentStreams: 10000, NewWriteScheduler: newSched}); err != nil {
			t.Fatal(err)
		}
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// client speaks h2c with prior knowledge over one connection.
func client() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 10000}}}
}

// body is n bytes that differ from one request to the next.
func body(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*31 + i*7)
	}
	return b
}

// TestManyStreamsUnderFlowControl sends answers larger than a stream's
// flow-control window on many streams of one connection at once, written
// in pieces with flushes and followed by trailers, and checks that every
// byte of every answer arrives in order with its headers and trailers.
func TestManyStreamsUnderFlowControl(t *testing.T) {
	const streams, size = 64, 300 << 10
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var seed int
		fmt.Sscan(r.URL.Query().Get("seed"), &seed)
		b := body(seed, size)
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Set("X-Seed", fmt.Sprint(seed))
		for len(b) > 0 {
			n := min(len(b), 1000+seed*97)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
		w.Header().Set("X-Sum", fmt.Sprintf("%x", sha256.Sum256(body(seed, size))))
	})
	base := serve(t, h, h2sched.New)
	c := client()
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			resp, err := c.Get(fmt.Sprintf("%s/?seed=%d", base, i))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			if resp.ProtoMajor != 2 {
				t.Errorf("stream %d: %s, want HTTP/2", i, resp.Proto)
			}
			if !bytes.Equal(got, body(i, size)) {
				t.Errorf("stream %d: the body differs (%d bytes, want %d)", i, len(got), size)
			}
			if h := resp.Header.Get("X-Seed"); h != fmt.Sprint(i) {
				t.Errorf("stream %d: X-Seed %q", i, h)
			}
			if s := resp.Trailer.Get("X-Sum"); s != fmt.Sprintf("%x", sha256.Sum256(got)) {
				t.Errorf("stream %d: trailer X-Sum %q does not match the body", i, s)
			}
		})
	}
	wg.Wait()
}

// TestResetWhileBlocked cancels requests whose answers wait on flow
// control (the client does not read them): the resets must go out, and the
// connection must go on serving.
func TestResetWhileBlocked(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := body(1, 256<<10)
		for r.Context().Err() == nil && len(b) > 0 {
			n := min(len(b), 16<<10)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	})
	base := serve(t, h, h2sched.New)
	c := client()
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/big", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
	}
	resp, err := c.Get(base + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, body(1, 256<<10)) {
		t.Fatalf("after the resets: %d bytes, err %v", len(got), err)
	}
}

// BenchmarkIdleStreams measures a request on a connection that holds
// other streams open with nothing to send, as a gateway's client
// connections do while providers think: with net/http's scheduler the cost
// of every frame grows with those streams, with h2sched it does not.
func BenchmarkIdleStreams(b *testing.B) {
	for _, idle := range []int{0, 1000, 5000} {
		for _, sched := range []struct {
			name string
			new  func() http2.WriteScheduler
		}{{"net-http", nil}, {"h2sched", h2sched.New}, {"random", http2.NewRandomWriteScheduler}} {
			b.Run(fmt.Sprintf("idle=%d/%s", idle, sched.name), func(b *testing.B) {
				release := make(chan struct{})
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/idle" {
						w.WriteHeader(http.StatusOK)
						w.(http.Flusher).Flush()
						<-release
						return
					}
					w.Write([]byte(`{"id":"x","choices":[{"message":{"content":"hello"}}]}`))
				})
				base := serve(b, h, sched.new)
				c := client()
				var held []*http.Response
				for range idle {
					resp, err := c.Get(base + "/idle")
					if err != nil {
						b.Fatal(err)
					}
					held = append(held, resp)
				}
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := c.Get(base + "/")
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
				b.StopTimer()
				// The machine may be shared: CPU time per request, client
				// and server together, says more than wall time.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
				close(release)
				for _, r := range held {
					r.Body.Close()
				}
			})
		}
	}
}

// TestExact: with the x/net this module uses, New is this package's
// scheduler, not the random fallback.
func TestExact(t *testing.T) {
	if reflect.TypeFor[http2.FrameWriteRequest]().NumField() == 0 {
		t.Skip("this x/net serves HTTP/2 through net/http's server and ignores the scheduler given it")
	}
	if !h2sched.Exact() {
		t.Fatal("x/net's FrameWriteRequest no longer has the stream field h2sched reads: New falls back to the random scheduler")
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
