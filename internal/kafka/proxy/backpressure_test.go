package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// silentBroker reads frames and never answers, counting them.
func silentBroker(t *testing.T, frames *atomic.Int64) string {
	t.Helper()
	return stubBroker(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		var sz [4]byte
		for {
			if _, err := io.ReadFull(r, sz[:]); err != nil {
				return
			}
			if _, err := r.Discard(int(binary.BigEndian.Uint32(sz[:]))); err != nil {
				return
			}
			frames.Add(1)
		}
	})
}

// writeUntilBlocked pipelines frame until a write stalls for 500 ms, and
// returns how many went out; it gives up (failing) after max frames.
func writeUntilBlocked(t *testing.T, c net.Conn, frame []byte, max int) int {
	t.Helper()
	for i := 0; i < max; i++ {
		c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write(frame); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return i
			}
			t.Fatalf("write %d: %v", i, err)
		}
	}
	t.Fatalf("the gateway accepted %d requests without pushing back", max)
	return max
}

// TestSlowBrokerBoundsPipeline: a broker that stops answering gets at most
// max_inflight + 2 requests (the queue, the one the responder waits on, and
// the one forwarded while waiting for a queue slot); after that the
// gateway stops reading the client, whose writes then block, instead of
// buffering without bound.
func TestSlowBrokerBoundsPipeline(t *testing.T) {
	var got atomic.Int64
	const inflight = 16
	g := startGatewayTo(t, []string{silentBroker(t, &got)}, func(o *Options) {
		o.MaxInflight = inflight
		o.SkipBrokerDiscovery = true
		o.Target.RequestTimeout = time.Minute
	})
	c := dialRaw(t, g.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	topic := kmsg.NewMetadataRequestTopic()
	name := string(make([]byte, 1000)) // ~1 KiB frames fill the socket buffers sooner
	topic.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{topic}
	frame := requestFrame(req, 1, "slow-broker")
	sent := writeUntilBlocked(t, c, frame, 1_000_000)

	pollUntil(t, 10*time.Second, func() bool { return got.Load() >= inflight },
		func() string { return "the broker never received a full pipeline" })
	before := got.Load()
	time.Sleep(200 * time.Millisecond) // let anything still moving arrive
	after := got.Load()
	if after > inflight+2 || after != before {
		t.Fatalf("broker received %d requests (then %d), want at most %d: the pipeline is not bounded", before, after, inflight+2)
	}
	t.Logf("client got %d requests out before blocking; broker holds %d", sent, after)
}

// TestSlowClientBoundsMemory: a client that pipelines requests and never
// reads its responses is pushed back on: the gateway stops forwarding once
// its response side is blocked, and the broker sees no more requests.
func TestSlowClientBoundsMemory(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.MaxInflight = 16 })
	var seen atomic.Int64
	g.broker.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		seen.Add(1)
		return nil, nil, false
	})
	c := dialRaw(t, g.addr)
	frame := requestFrame(apiVersionsV3("never-reads"), 1, "slow-client")
	sent := writeUntilBlocked(t, c, frame, 1_000_000)
	// On a loaded machine a write can stall for a while only because the
	// gateway was not scheduled; so wait for the count to settle (it
	// must: the gateway stops reading), then check it stopped short of
	// what the client wrote (here about 5,000 of 100,000): the rest waits
	// in socket buffers, not in the gateway.
	var before, after int64
	for i := 0; ; i++ {
		before = seen.Load()
		time.Sleep(300 * time.Millisecond)
		if after = seen.Load(); after == before {
			break
		}
		if i == 30 {
			t.Fatalf("broker kept receiving requests (%d, then %d) from a client that reads nothing", before, after)
		}
	}
	if 4*after >= int64(sent) {
		t.Fatalf("broker received %d of the %d requests of a client that reads nothing: no push-back", after, sent)
	}
	t.Logf("client wrote %d requests before blocking; broker received %d", sent, after)
	// Reading unblocks everything: the connection is healthy, not wedged.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.CopyN(io.Discard, c, 1<<20); err != nil {
		t.Fatalf("reading the backlog: %v", err)
	}
}

// deafBroker accepts connections and never reads from them.
func deafBroker(t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return stubBroker(t, func(net.Conn) { <-stop })
}

// TestBrokerStopsReading: a broker that takes no bytes cannot wedge the
// request side, even for a first frame too big for the socket buffers
// (nothing is in flight yet, so no read deadline is running): the write
// deadline ends the connection as an upstream timeout.
func TestBrokerStopsReading(t *testing.T) {
	g := startGatewayTo(t, []string{deafBroker(t)}, func(o *Options) {
		o.SkipBrokerDiscovery = true
		o.Target.RequestTimeout = 500 * time.Millisecond
		o.MaxFrame = 64 << 20
	})
	c := dialRaw(t, g.addr)
	big := produceRequest(9, 1, nil, "t", 0, string(make([]byte, 32<<20)))
	go c.Write(requestFrame(big, 1, "big"))
	c.expectClosed()
	g.waitErr(t, errUpstreamTimeout, 1)
}
