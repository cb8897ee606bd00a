//go:build !race

// The race detector's instrumentation makes every frame larger: this test
// is built without it only (scripts/test runs it once without -race).

package h1server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
)

// A request waiting in its handler (for a provider, in the gateway) holds
// the connection's goroutine and little else: no read buffer, and a stack
// no larger than goroutines start with, reading the request having not
// grown it. At thousands of requests in flight this is most of the
// server's memory.
func TestAWaitingRequestHoldsLittle(t *testing.T) {
	const n = 400
	var arrived, done sync.WaitGroup
	release := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived.Done()
		<-release
		io.WriteString(w, "ok")
	})}
	addr := serve(t, s)
	body := strings.Repeat("x", 600)
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nUser-Agent: test\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	arrived.Add(n)
	for _, c := range conns {
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan struct{})
	go func() { arrived.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the requests did not all reach the handler")
	}
	runtime.ReadMemStats(&m1)
	start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(start)
	stack := float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / n
	heap := float64(int64(m1.HeapInuse)-int64(m0.HeapInuse)) / n
	close(release)
	for _, c := range conns {
		done.Add(1)
		go func() {
			defer done.Done()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 512)
			c.Read(buf)
		}()
	}
	done.Wait()
	t.Logf("per waiting request: stack %.0f B (goroutines start with %d B), heap %.0f B", stack, start[0].Value.Uint64(), heap)
	if limit := float64(max(start[0].Value.Uint64(), 4096) + 512); stack > limit {
		t.Errorf("a waiting request holds %.0f B of stack, more than %.0f: reading it grew the connection's goroutine", stack, limit)
	}
	if heap > 4<<10 {
		t.Errorf("a waiting request holds %.0f B of heap: a read buffer (4 KiB) or more is kept while it waits", heap)
	}
}
