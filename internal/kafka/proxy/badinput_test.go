package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// header builds a classic (v1) request header for a hand-made frame.
func header(key, version int16, corr int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	return append(b, clientID...)
}

// frameOf prefixes body with its size.
func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestBadClientInput sends input no Kafka client should: each must end
// only its own connection, be counted under the right error kind, and
// leave the gateway serving others.
func TestBadClientInput(t *testing.T) {
	t.Parallel()
	const maxFrame = 1 << 20
	g := startGateway(t, func(o *Options) { o.MaxFrame = maxFrame })
	keeper := dialRaw(t, g.addr)
	keeper.metadataWorks(1)
	keeperCorr := int32(1)

	flexProduce := func(txnIDLen uint32, frameSize int) []byte {
		b := header(0, 9, 5, "bad")
		b = append(b, 0) // no header tags
		b = binary.AppendUvarint(b, uint64(txnIDLen)+1)
		for len(b) < frameSize {
			b = append(b, 'x')
		}
		return frameOf(b)
	}

	for _, tc := range []struct {
		name  string
		input []byte
		kind  string
	}{
		{"frame over the limit", binary.BigEndian.AppendUint32(nil, maxFrame+1), errFrameTooLarge},
		{"negative frame size", []byte{0x80, 0, 0, 1, 0, 0, 0, 0}, errMalformed},
		{"frame of -1 bytes", []byte{0xff, 0xff, 0xff, 0xff}, errMalformed},
		{"frame too short for a header", frameOf([]byte{0, 3, 0, 1}), errMalformed},
		{"client id overruns the frame", frameOf(append(binary.BigEndian.AppendUint16(header(3, 1, 1, "")[:8], 300), "short"...)), errMalformed},
		{"negative client id length", frameOf(append(binary.BigEndian.AppendUint16(header(3, 1, 1, "")[:8], 0xfffe), "x"...)), errMalformed},
		{"flexible header with broken tags", frameOf(append(header(3, 9, 1, "c"), 0x05, 1)), errMalformed},
		{"unknown API key 200", frameOf(header(200, 0, 1, "c")), errUnknownAPI},
		{"unknown API key 127", frameOf(header(127, 0, 1, "c")), errUnknownAPI},
		{"negative API key", frameOf(header(-1, 0, 1, "c")), errUnknownAPI},
		{"Metadata v99", frameOf(append(header(3, 99, 1, "c"), 0, 0, 0, 0)), errUnknownAPI},
		{"Metadata one past kmsg", frameOf(append(header(3, kmsg.NewPtrMetadataRequest().MaxVersion()+1, 1, "c"), 0, 0)), errUnknownAPI},
		{"Produce without acks", frameOf(append(header(0, 3, 1, "c"), 0xff)), errMalformed},
		{"Produce transactional id longer than the frame", flexProduce(1<<20, 40000), errMalformed},
		{"Produce transactional id longer than Kafka allows", flexProduce(40000, 50000), errMalformed},
		{"undecodable ApiVersions body", frameOf(append(header(18, 3, 1, "c"), 0, 0x7f)), errMalformed},
		{"HTTP request", []byte("GET / HTTP/1.1\r\nHost: kafka\r\n\r\n"), errFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.errCounts()
			c := dialRaw(t, g.addr)
			c.write(tc.input)
			c.expectClosed()
			g.waitErr(t, tc.kind, before[tc.kind]+1)
			for k, n := range g.errCounts() {
				if k != tc.kind && n != before[k] {
					t.Errorf("errors{kind=%q} went from %v to %v", k, before[k], n)
				}
			}
			keeperCorr++
			keeper.metadataWorks(keeperCorr)
		})
	}

	t.Run("TLS ClientHello", func(t *testing.T) {
		before := g.errCount(errFrameTooLarge)
		c := dialRaw(t, g.addr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := tls.Client(c, &tls.Config{ServerName: "kafka", InsecureSkipVerify: true}).HandshakeContext(ctx)
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("TLS handshake against the plaintext port: %v, want the connection closed", err)
		}
		g.waitErr(t, errFrameTooLarge, before+1)
		keeperCorr++
		keeper.metadataWorks(keeperCorr)
	})

	// A client that goes away halfway through a frame is not sending
	// malformed frames, whether the gateway was reading the header (small
	// frame) or relaying the body (large one).
	for _, n := range []int{0, 200 << 10} {
		t.Run(fmt.Sprintf("client closes mid-frame (%d topics)", n), func(t *testing.T) {
			before := g.errCounts()
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 4
			for i := 0; i < n; i += 100 {
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(fmt.Sprintf("%097d", i))
				req.Topics = append(req.Topics, mt)
			}
			frame := requestFrame(req, 9, "c")
			c := dialRaw(t, g.addr)
			c.write(frame[:len(frame)-2])
			c.Close()
			g.waitErr(t, errClientIO, before[errClientIO]+1)
			for k, n := range g.errCounts() {
				if k != errClientIO && n != before[k] {
					t.Errorf("errors{kind=%q} went from %v to %v", k, before[k], n)
				}
			}
			keeperCorr++
			keeper.metadataWorks(keeperCorr)
		})
	}

	// Every bad connection went away; only the keeper is left.
	pollUntil(t, 5*time.Second, func() bool { return g.connsOpen() == 1 },
		func() string {
			return fmt.Sprintf("connections open: %v, want 1", g.connsOpen())
		})
}

// TestDeclaredFrameSizeIsNotAllocated: every connection's ApiVersions
// request is decoded, so its frame is read whole. A peer that declares a
// frame of nearly max_frame_bytes and sends only its header must not make
// the gateway allocate the size it declared.
func TestDeclaredFrameSizeIsNotAllocated(t *testing.T) {
	const declared = 96 << 20
	g := startGatewayTo(t, []string{fakeBroker(t, func(net.Conn, []byte) {})}, func(o *Options) {
		o.SkipBrokerDiscovery = true
		o.MaxFrame = 128 << 20
	})
	b := binary.BigEndian.AppendUint32(nil, declared)
	b = append(b, header(18, 2, 1, "c")...)
	b = append(b, make([]byte, 200)...) // past the gateway's header peek
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := dialRaw(t, g.addr)
	c.write(b)
	time.Sleep(200 * time.Millisecond) // let the gateway start reading the body
	c.Close()
	g.waitErr(t, errClientIO, 1)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > declared/4 {
		t.Errorf("a %d-byte frame declaring %d bytes made the process allocate %d bytes", len(b), declared, n)
	}
}
