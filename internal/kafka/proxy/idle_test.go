package proxy

import (
	"testing"
	"time"
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
