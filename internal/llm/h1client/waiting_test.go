//go:build !race

// Under the race detector the socket is read through net.Conn (see
// writebatch), whose waiting read holds a buffer: this test is built
// without it only (scripts/test runs it once without -race).

package h1client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// A request waiting for its answer holds neither its request's buffer
// nor a read buffer: at 1,500 requests in flight on a gateway, 4 KiB
// each is 6 MB.
func TestAWaitingRequestHoldsNoBuffers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var got sync.WaitGroup
	release := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 512)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				got.Done()
				<-release
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	const n = 200
	tr := New(Options{Addr: ln.Addr().String(), MaxConns: n})
	body := strings.Repeat("x", 1000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got.Add(n)
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			resp, err := post(t, context.Background(), tr, "http://"+ln.Addr().String()+"/", body)
			if err != nil {
				t.Error(err)
				return
			}
			readAll(t, resp)
		}()
	}
	got.Wait()
	runtime.GC()
	runtime.GC() // and what pools held is gone too
	runtime.ReadMemStats(&after)
	close(release)
	done.Wait()
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes of heap per waiting request", per)
	// What is left is the request, the connection and its socket, about
	// 3 KiB; either buffer (4 KiB each) would take it past 6.
	if per > 6<<10 {
		t.Errorf("a waiting request holds %d bytes of heap, want under 6 KiB", per)
	}
}
