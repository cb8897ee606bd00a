package proxy

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// refused waits until a dial of addr is refused.
func refused(t *testing.T, addr string) {
	t.Helper()
	pollUntil(t, 5*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}, func() string { return "new connections to " + addr + " are still accepted" })
}

// TestGracefulShutdown calls Shutdown while a request is held at the
// broker: the client still gets its answer, idle connections close at
// once, nobody new gets in, and Shutdown returns nil after the drain.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	held, release := holdKey(t, g, kmsg.ListGroups)

	idle := dialRaw(t, g.addr)
	idle.metadataWorks(1)
	busy := dialRaw(t, g.nodeAddr(0))
	req, corr := listGroupsV4(), int32(77)
	busy.send(req, corr)
	waitHeld(t, held)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- g.vc.Shutdown(ctx)
	}()
	refused(t, g.addr)
	refused(t, g.nodeAddr(0))
	idle.expectClosed()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}

	release()
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	busy.recv(corr, resp)
	if resp.ErrorCode != 0 {
		t.Errorf("held ListGroups answered with error %d", resp.ErrorCode)
	}
	busy.expectClosed()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the last response")
	}
	if g.vc.Ready() {
		t.Error("a shut-down virtual cluster reports ready")
	}
}

// TestShutdownDrainTimeout gives Shutdown less time than the held request
// needs: it reports the timeout and closes the connection.
func TestShutdownDrainTimeout(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	held, release := holdKey(t, g, kmsg.ListGroups)
	defer release()

	busy := dialRaw(t, g.addr)
	busy.send(listGroupsV4(), 5)
	waitHeld(t, held)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := g.vc.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "drain timed out") {
		t.Errorf("Shutdown: %v, want a drain timeout", err)
	}
	if _, rerr := busy.readFrame(); rerr == nil {
		t.Error("the connection answered after the drain timed out")
	}
	busy.expectClosed()
}

// TestSendAfterShutdown: once shut down, a virtual cluster no longer talks
// to the cluster on filters' behalf (and leaves no client of its own
// behind).
func TestSendAfterShutdown(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.vc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.vc.Send(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("Send after Shutdown reached the cluster")
	}

	// The same when Shutdown comes before anything was ever sent.
	g2 := startGatewayTo(t, g.broker.ListenAddrs(), func(o *Options) { o.SkipBrokerDiscovery = true })
	if err := g2.vc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g2.vc.Send(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("Send after Shutdown reached the cluster")
	}
}

// askUpstream answers DescribeGroups only after a ListGroups request of its
// own comes back from the cluster.
type askUpstream struct{}

func (askUpstream) Name() string { return "ask-upstream" }
func (askUpstream) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(int16(kmsg.DescribeGroups))}
}

func (askUpstream) OnRequest(c *filter.Context, req *filter.Request) error {
	_, err := c.Upstream.Send(c.Ctx, kmsg.NewPtrListGroupsRequest())
	return err
}

// TestShutdownDrainTimeoutCancelsFilters: when the drain times out, a
// filter still waiting on a request of its own upstream is cancelled, so
// Shutdown returns instead of waiting for the cluster.
func TestShutdownDrainTimeoutCancelsFilters(t *testing.T) {
	t.Parallel()
	g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{askUpstream{}} })
	held, release := holdKey(t, g, kmsg.ListGroups)
	defer release()

	busy := dialRaw(t, g.addr)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"g"}
	busy.send(req, 3)
	waitHeld(t, held)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		done <- g.vc.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Shutdown reported a clean drain with a request stuck in a filter")
		}
	case <-time.After(5 * time.Second):
		release() // let Shutdown finish before the test ends
		<-done
		t.Fatal("Shutdown waited for a filter's upstream request long past its drain timeout")
	}
	busy.expectClosed()
}
