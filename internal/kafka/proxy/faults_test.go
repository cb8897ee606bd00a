package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// listGroupsV4 is a request no client in these tests sends on its own, so
// a broker hook on its key sees only the test's.
func listGroupsV4() *kmsg.ListGroupsRequest {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 4
	return req
}

// holdKey makes the broker hold every request of key until release is
// closed (or the test ends); held receives once per held request.
func holdKey(t *testing.T, g *gateway, key kmsg.Key) (held chan struct{}, release func()) {
	t.Helper()
	held = make(chan struct{}, 16)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	g.broker.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		select {
		case held <- struct{}{}:
		default:
		}
		g.broker.SleepControl(func() { <-gate })
		return nil, nil, false
	})
	return held, release
}

func waitHeld(t *testing.T, held chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the broker never received the request to hold")
	}
}

// TestBrokerDoesNotAnswer holds a request at the broker past the target's
// request timeout: the gateway gives up on that connection only.
func TestBrokerDoesNotAnswer(t *testing.T) {
	t.Parallel()
	g := startGateway(t, func(o *Options) { o.Target.RequestTimeout = 300 * time.Millisecond })
	other := dialRaw(t, g.addr)
	other.metadataWorks(1)
	held, _ := holdKey(t, g, kmsg.ListGroups)

	c := dialRaw(t, g.addr)
	c.send(listGroupsV4(), 7)
	waitHeld(t, held)
	if err := c.expectClosed(); err == nil {
		t.Fatal("connection not closed")
	}
	g.waitErr(t, errUpstreamTimeout, 1)
	other.metadataWorks(2)
}

// TestBrokerClosesConnection has the broker drop the connection instead
// of answering: the client's connection is closed cleanly (EOF, not a
// reset) and counted.
func TestBrokerClosesConnection(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	g.broker.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, errors.New("broker goes away"), true
	})
	other := dialRaw(t, g.addr)
	other.metadataWorks(1)
	c := dialRaw(t, g.addr)
	c.send(listGroupsV4(), 7)
	if err := c.expectClosed(); err != io.EOF {
		t.Errorf("client connection ended with %v, want a clean close (EOF)", err)
	}
	g.waitErr(t, errUpstreamClosed, 1)
	other.metadataWorks(2)
}

// fakeBroker serves each connection with handle, which gets the first
// request frame (without its size).
func fakeBroker(t *testing.T, handle func(c net.Conn, frame []byte)) string {
	t.Helper()
	return stubBroker(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		var sz [4]byte
		if _, err := io.ReadFull(r, sz[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		handle(c, frame)
	})
}

// TestBrokerMisbehaves puts the gateway in front of brokers that break the
// protocol in various ways: each ends the client's connection, counted
// under its kind.
func TestBrokerMisbehaves(t *testing.T) {
	t.Parallel()
	corrOf := func(frame []byte) []byte { return frame[4:8] }
	for _, tc := range []struct {
		name   string
		handle func(c net.Conn, frame []byte)
		kind   string
		eof    bool // the client must see a clean close
		// timeout is the target's request timeout, if not the default.
		timeout time.Duration
	}{
		{"closes after reading a request", func(net.Conn, []byte) {}, errUpstreamClosed, true, 0},
		{"closes mid-response", func(c net.Conn, f []byte) {
			c.Write(append([]byte{0, 0, 0, 100}, corrOf(f)...))
		}, errUpstreamClosed, true, 0},
		{"stalls mid-response", func(c net.Conn, f []byte) {
			c.Write(append([]byte{0, 0, 0, 100}, corrOf(f)...))
			io.Copy(io.Discard, c)
		}, errUpstreamTimeout, true, 300 * time.Millisecond},
		{"wrong correlation id", func(c net.Conn, f []byte) {
			c.Write([]byte{0, 0, 0, 6, 0x7f, 0, 0, 0, 0, 0})
			io.Copy(io.Discard, c)
		}, errUpstreamProto, true, 0},
		{"frame over the limit", func(c net.Conn, f []byte) {
			c.Write(append([]byte{0x10, 0, 0, 0}, corrOf(f)...))
			io.Copy(io.Discard, c)
		}, errFrameTooLarge, true, 0},
		{"negative frame size", func(c net.Conn, f []byte) {
			c.Write(append([]byte{0xff, 0xff, 0xff, 0xfe}, corrOf(f)...))
			io.Copy(io.Discard, c)
		}, errUpstreamProto, true, 0},
		{"undecodable Metadata response", func(c net.Conn, f []byte) {
			c.Write(append(append([]byte{0, 0, 0, 7}, corrOf(f)...), 0xff, 0xff, 0xff))
			io.Copy(io.Discard, c)
		}, errUpstreamProto, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := startGatewayTo(t, []string{fakeBroker(t, tc.handle)}, func(o *Options) {
				o.SkipBrokerDiscovery = true
				o.MaxFrame = 1 << 20
				o.Target.RequestTimeout = tc.timeout
			})
			c := dialRaw(t, g.addr)
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 1
			c.send(req, 7)
			err := c.expectClosed()
			if tc.eof && err != io.EOF {
				t.Errorf("client connection ended with %v, want a clean close (EOF)", err)
			}
			g.waitErr(t, tc.kind, 1)
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		ln.Close()
		g := startGatewayTo(t, []string{dead}, func(o *Options) {
			o.SkipBrokerDiscovery = true
			o.Target.ConnectTimeout = time.Second
		})
		c := dialRaw(t, g.addr)
		c.expectClosed()
		g.waitErr(t, errUpstreamConnect, 1)
	})
}

// waitForCancel holds ListGroups requests until the connection's context
// ends, as a filter waiting on a request of its own upstream would.
type waitForCancel struct{ cancelled chan struct{} }

func (*waitForCancel) Name() string { return "wait-for-cancel" }
func (*waitForCancel) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(int16(kmsg.ListGroups))}
}
func (f *waitForCancel) OnRequest(c *filter.Context, _ *filter.Request) error {
	<-c.Ctx.Done()
	close(f.cancelled)
	return c.Ctx.Err()
}

// TestConnectionCloseCancelsFilterContext: when the response side ends the
// connection (here: the broker never answers), a filter blocked on the
// request side with the connection's context is released at once, so the
// connection's goroutines do not outlive it.
func TestConnectionCloseCancelsFilterContext(t *testing.T) {
	t.Parallel()
	f := &waitForCancel{cancelled: make(chan struct{})}
	broker := fakeBroker(t, func(c net.Conn, _ []byte) { io.Copy(io.Discard, c) })
	g := startGatewayTo(t, []string{broker}, func(o *Options) {
		o.SkipBrokerDiscovery = true
		o.Target.RequestTimeout = 200 * time.Millisecond
		o.Filters = []filter.Filter{f}
	})
	c := dialRaw(t, g.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	c.send(req, 1)            // forwarded; never answered
	c.send(listGroupsV4(), 2) // held by the filter
	g.waitErr(t, errUpstreamTimeout, 1)
	select {
	case <-f.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the filter's context was not cancelled when the connection closed")
	}
	pollUntil(t, 5*time.Second, func() bool { return g.connsOpen() == 0 },
		func() string { return fmt.Sprintf("connections open: %v, want 0", g.connsOpen()) })
}
