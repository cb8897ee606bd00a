package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdleClientIsClosed: a client that sends nothing for idle_timeout is
// let go (as a broker's connections.max.idle.ms would), with no error
// counted; a client that keeps sending stays connected past it.
func TestIdleClientIsClosed(t *testing.T) {
	const idle = 400 * time.Millisecond
	g := startGateway(t, func(o *Options) { o.IdleTimeout = idle })

	busy := dialRaw(t, g.addr)
	quiet := dialRaw(t, g.addr)
	busy.metadataWorks(1)
	quiet.metadataWorks(1)
	start := time.Now()
	for i := int32(2); time.Since(start) < 3*idle; i++ {
		busy.metadataWorks(i) // fails the test if the connection was closed
		time.Sleep(idle / 8)
	}
	quiet.expectClosed() // fails the test if still open after 5 s
	for kind, n := range g.errCounts() {
		if n != 0 {
			t.Errorf("idle close counted as error %s = %v", kind, n)
		}
	}
}

// connGoroutines counts the goroutines in this process that are running
// or parked inside a connection's relay (any method of conn).
func connGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "proxy.(*conn).") {
			count++
		}
	}
	return count
}

// trackedConns is the virtual cluster's open connections.
func trackedConns(v *VirtualCluster) []*conn {
	v.mu.Lock()
	defer v.mu.Unlock()
	var cs []*conn
	for c := range v.conns {
		cs = append(cs, c)
	}
	return cs
}

// waitConnGoroutines waits until connGoroutines reports want.
func waitConnGoroutines(t *testing.T, want int) {
	t.Helper()
	pollUntil(t, 5*time.Second, func() bool { return connGoroutines() == want }, func() string {
		return fmt.Sprintf("%d goroutines in connections, want %d", connGoroutines(), want)
	})
}

// TestIdleConnectionHasOneGoroutine: a connection with nothing to answer
// keeps one goroutine (its reader, parked on the client socket) once
// respondLinger has passed; its next request starts a responder again and
// is answered.
func TestIdleConnectionHasOneGoroutine(t *testing.T) {
	// Not parallel: it counts the goroutines of every connection in the
	// process.
	g := startGateway(t, func(o *Options) { o.respondLinger = 50 * time.Millisecond })
	c := dialRaw(t, g.addr)
	waitConnGoroutines(t, 1) // no request yet: no responder
	for i := int32(1); i <= 3; i++ {
		c.metadataWorks(i)
		waitConnGoroutines(t, 1)
		// Nor does it keep what only the responder used: the buffer
		// the Metadata answer was rewritten in, the queue's ring.
		for _, conn := range trackedConns(g.vc) {
			conn.qmu.Lock()
			off, buf := conn.respOff, conn.respBuf
			conn.qmu.Unlock()
			conn.inflight.mu.Lock()
			ring := conn.inflight.ring
			conn.inflight.mu.Unlock()
			if !off || buf != nil || ring != nil {
				t.Errorf("idle connection: responder off %v, holds a response buffer of %d bytes and a ring of %d entries", off, cap(buf), len(ring))
			}
		}
	}
	// Pipelined requests still come back in order.
	for i := int32(10); i < 20; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		c.send(req, i)
	}
	for i := int32(10); i < 20; i++ {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 9
		c.recv(i, resp)
	}
	waitConnGoroutines(t, 1)
	c.Close()
	waitConnGoroutines(t, 0)
}

// TestBrokerClosesIdleConnection: a broker that closes a connection while
// it is idle (as Kafka's connections.max.idle.ms does), whether the
// responder still waits on the broker socket then or has ended, is found
// out at the client's next request: the client's connection is closed
// cleanly and counted, as when the broker closes with a request in
// flight. Meanwhile the idle connection holds one goroutine.
func TestBrokerClosesIdleConnection(t *testing.T) {
	// Not parallel: it counts the goroutines of every connection in the
	// process.
	for _, tc := range []struct {
		name   string
		linger time.Duration
	}{
		{"while the responder waits on it", time.Minute},
		{"after the responder ended", 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closeNow := make(chan struct{})
			broker := fakeBroker(t, func(c net.Conn, frame []byte) {
				// Answer the first request (its correlation id and an
				// empty body), then close when told.
				c.Write(append([]byte{0, 0, 0, 4}, frame[4:8]...))
				<-closeNow
			})
			g := startGatewayTo(t, []string{broker}, func(o *Options) {
				o.SkipBrokerDiscovery = true
				o.respondLinger = tc.linger
			})
			c := dialRaw(t, g.addr)
			c.send(listGroupsV4(), 1)
			frame, err := c.readFrame()
			if err != nil || len(frame) != 4 || binary.BigEndian.Uint32(frame) != 1 {
				t.Fatalf("first answer: %x, %v", frame, err)
			}
			if tc.linger < time.Second {
				waitConnGoroutines(t, 1)
			}
			close(closeNow)
			// The responder, if it waits, meets the close and ends.
			waitConnGoroutines(t, 1)
			c.send(listGroupsV4(), 2)
			if err := c.expectClosed(); err != io.EOF {
				t.Errorf("client connection ended with %v, want a clean close (EOF)", err)
			}
			g.waitErr(t, errUpstreamClosed, 1)
			waitConnGoroutines(t, 0)
		})
	}
}
