package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/testkit"
)

// countingBroker answers every whole request with an ApiVersions response
// and counts the connections it has open, so a test sees when the gateway
// lets a broker connection go.
func countingBroker(t *testing.T, open *atomic.Int32) string {
	t.Helper()
	return stubBroker(t, func(c net.Conn) {
		open.Add(1)
		defer open.Add(-1)
		r := bufio.NewReader(c)
		for {
			var hdr [12]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			size := int(binary.BigEndian.Uint32(hdr[:]))
			version := int16(binary.BigEndian.Uint16(hdr[6:]))
			if _, err := r.Discard(size - 8); err != nil {
				return
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = version
			resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
				{ApiKey: int16(kmsg.ApiVersions), MaxVersion: 3},
				{ApiKey: int16(kmsg.Metadata), MaxVersion: 9},
			}
			out := encodeResponse(nil, int32(binary.BigEndian.Uint32(hdr[8:])), int16(kmsg.ApiVersions), resp)
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

// metadataFrame is a Metadata v4 request naming topics of about n bytes in
// all; no filter wants Metadata requests, so its body is relayed.
func metadataFrame(n int) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4
	for i := 0; i < n; i += 100 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(fmt.Sprintf("%097d", i))
		req.Topics = append(req.Topics, mt)
	}
	return requestFrame(req, 9, "stall")
}

// TestStalledFrameIsClosed: a client that sends a frame's size and part of
// the frame, then nothing, is disconnected after frame_read_timeout (not
// idle_timeout, which is off here) with its broker connection, counted as
// frame_timeout and logged with how much of the frame arrived, whichever
// way the gateway was reading the frame. A connection that sends a frame
// slowly but within the timeout, and then idles, is left alone.
func TestStalledFrameIsClosed(t *testing.T) {
	t.Parallel()
	// Long enough that the keeper's two writes, 1/10 of it apart, stay
	// within it on a machine loaded by the race detector and other
	// packages' tests (at 500 ms they once did not).
	const timeout = 1500 * time.Millisecond
	var open atomic.Int32
	logs := &testkit.SyncBuffer{}
	g := startGatewayTo(t, []string{countingBroker(t, &open)}, func(o *Options) {
		o.SkipBrokerDiscovery = true
		o.FrameReadTimeout = timeout
		o.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})

	// The keeper sends its first request in two parts, within the
	// timeout, then idles past it: neither must cost it the connection.
	keeper := dialRaw(t, g.addr)
	first := requestFrame(apiVersionsV3("keeper"), 1, "keeper")
	keeper.write(first[:10])
	time.Sleep(timeout / 10)
	keeper.write(first[10:])
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	keeper.recv(1, resp)
	time.Sleep(3 * timeout)
	keeperCorr := int32(2)
	keeper.roundTrip(apiVersionsV3("keeper"), keeperCorr)
	pollUntil(t, 5*time.Second, func() bool { return open.Load() == 1 },
		func() string { return fmt.Sprintf("broker connections open: %d, want 1", open.Load()) })

	// Past the gateway's 128-byte header peek, so the body is read whole
	// for the ApiVersions filter to decode.
	apiVersions := requestFrame(apiVersionsV3(strings.Repeat("s", 300)), 9, "stall")
	small, large := metadataFrame(2000), metadataFrame(300<<10)
	for _, tc := range []struct {
		name string
		sent []byte // all the client sends: a size and part of a frame
	}{
		{"in the request header", apiVersions[:8]},
		{"in a decoded body", apiVersions[:len(apiVersions)-3]},
		{"in a relayed body", small[:len(small)/2]},
		{"in a spliced body", large[:len(large)/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.errCounts()
			beforeTimeouts := g.errCount(errFrameTimeout)
			c := dialRaw(t, g.addr)
			c.write(tc.sent)
			pollUntil(t, 5*time.Second, func() bool { return open.Load() == 2 },
				func() string { return fmt.Sprintf("broker connections open: %d, want 2", open.Load()) })
			c.expectClosed() // fails the test if still open after 5 s
			g.waitErr(t, errFrameTimeout, beforeTimeouts+1)
			for k, n := range g.errCounts() {
				if k != errFrameTimeout && n != before[k] {
					t.Errorf("errors{kind=%q} went from %v to %v", k, before[k], n)
				}
			}
			pollUntil(t, 5*time.Second, func() bool { return open.Load() == 1 },
				func() string { return fmt.Sprintf("broker connections open: %d, want 1 (the keeper's)", open.Load()) })
			want := fmt.Sprintf("received_bytes=%d frame_bytes=%d frame_read_timeout=%s", len(tc.sent)-4,
				binary.BigEndian.Uint32(tc.sent), timeout)
			pollUntil(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), want) },
				func() string { return fmt.Sprintf("log lacks %q:\n%s", want, logs) })
			keeperCorr++
			keeper.roundTrip(apiVersionsV3("keeper"), keeperCorr)
		})
	}
	if !strings.Contains(logs.String(), "frame_read_timeout") || !strings.Contains(logs.String(), "client=127.0.0.1:") {
		t.Errorf("the warning should name the client and the setting to change:\n%s", logs)
	}
}

// TestStalledFrameIsClosedTLS: the same over a TLS client connection.
func TestStalledFrameIsClosedTLS(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	ca := testkit.NewCA(t)
	var open atomic.Int32
	g := startGatewayTo(t, []string{countingBroker(t, &open)}, func(o *Options) {
		o.SkipBrokerDiscovery = true
		o.FrameReadTimeout = timeout
		o.TLS = ca.ServerTLS(t)
	})
	dialTLS := func() *rawConn {
		c := dialRaw(t, g.addr)
		tc := tls.Client(c.Conn, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		tc.SetDeadline(time.Time{})
		return &rawConn{t: t, Conn: tc}
	}
	keeper := dialTLS()
	keeper.roundTrip(apiVersionsV3("keeper"), 1)

	c := dialTLS()
	frame := requestFrame(apiVersionsV3("stall"), 2, "stall")
	c.write(frame[:len(frame)-3])
	c.expectClosed() // fails the test if still open after 5 s
	g.waitErr(t, errFrameTimeout, 1)
	pollUntil(t, 5*time.Second, func() bool { return open.Load() == 1 },
		func() string { return fmt.Sprintf("broker connections open: %d, want 1 (the keeper's)", open.Load()) })
	keeper.roundTrip(apiVersionsV3("keeper"), 2)
}
