package proxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// saslV0Broker speaks the SaslHandshake v0 flow: the handshake, then raw
// size-prefixed tokens (answered with raw "ok-N" frames) for the rounds
// the mechanism needs, then ordinary requests, answered as Metadata v0
// responses with the request's correlation id. tokens receives every raw
// token it reads.
func saslV0Broker(t *testing.T, rounds int, tokens chan<- string) string {
	t.Helper()
	return stubBroker(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		read := func() []byte {
			var sz [4]byte
			if _, err := io.ReadFull(r, sz[:]); err != nil {
				return nil
			}
			b := make([]byte, binary.BigEndian.Uint32(sz[:]))
			if _, err := io.ReadFull(r, b); err != nil {
				return nil
			}
			return b
		}
		writeFrame := func(b []byte) {
			c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
			c.Write(b)
		}
		hs := read()
		if hs == nil || binary.BigEndian.Uint16(hs) != 17 {
			return
		}
		resp := &kmsg.SASLHandshakeResponse{Version: 0, SupportedMechanisms: []string{"PLAIN", "SCRAM-SHA-256"}}
		writeFrame(resp.AppendTo(append([]byte(nil), hs[4:8]...)))
		for i := range rounds {
			tok := read()
			if tok == nil {
				return
			}
			tokens <- string(tok)
			writeFrame([]byte("ok-" + string(rune('1'+i))))
		}
		for {
			req := read()
			if req == nil {
				return
			}
			writeFrame((&kmsg.MetadataResponse{}).AppendTo(append([]byte(nil), req[4:8]...)))
		}
	})
}

func writeRaw(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
}

func readRaw(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return b
}

// TestSASLHandshakeV0RawTokens: after a SaslHandshake v0 (kafka-python
// 2.0.2 always uses it), the raw tokens of PLAIN (one round) and SCRAM (two
// rounds) and their raw answers pass through untouched, and ordinary
// framed requests work after them.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	for _, tc := range []struct {
		mechanism string
		tokens    []string
	}{
		{"PLAIN", []string{"\x00alice\x00secret"}},
		{"SCRAM-SHA-256", []string{"n,,n=alice,r=abc", "c=biws,r=abcdef,p=proof"}},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			got := make(chan string, 4)
			g := startGatewayTo(t, []string{saslV0Broker(t, len(tc.tokens), got)}, func(o *Options) { o.SkipBrokerDiscovery = true })
			c := dialRaw(t, g.addr)
			c.write(requestFrame(&kmsg.SASLHandshakeRequest{Version: 0, Mechanism: tc.mechanism}, 7, "kafka-python"))
			hs := readRaw(t, c)
			var resp kmsg.SASLHandshakeResponse
			if err := decodeResponse(hs, 7, &resp); err != nil || resp.ErrorCode != 0 {
				t.Fatalf("handshake answer: %v, error code %d", err, resp.ErrorCode)
			}
			for i, tok := range tc.tokens {
				writeRaw(t, c, []byte(tok))
				if b := readRaw(t, c); string(b) != "ok-"+string(rune('1'+i)) {
					t.Fatalf("raw answer %d = %q", i+1, b)
				}
				if b := <-got; b != tok {
					t.Fatalf("broker got token %q, want %q", b, tok)
				}
			}
			// Back to framed requests.
			c.send(kmsg.NewPtrMetadataRequest(), 8)
			if b := readRaw(t, c); binary.BigEndian.Uint32(b) != 8 {
				t.Fatalf("metadata after SASL answered with correlation id %d, want 8", binary.BigEndian.Uint32(b))
			}
		})
	}
}

// TestSASLHandshakeV0UnknownMechanism: a mechanism whose raw exchange
// Strait cannot follow ends the connection with a clear reason.
func TestSASLHandshakeV0UnknownMechanism(t *testing.T) {
	got := make(chan string, 4)
	g := startGatewayTo(t, []string{saslV0Broker(t, 1, got)}, func(o *Options) { o.SkipBrokerDiscovery = true })
	c := dialRaw(t, g.addr)
	c.write(requestFrame(&kmsg.SASLHandshakeRequest{Version: 0, Mechanism: "GSSAPI"}, 1, "kafka-python"))
	readRaw(t, c) // the broker's answer still arrives
	c.expectClosed()
	g.waitErr(t, errUnknownAPI, 1)
}

// watchHandshake subscribes to SaslHandshake requests and passes them on.
type watchHandshake struct{}

func (watchHandshake) Name() string { return "watch-handshake" }
func (watchHandshake) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(int16(kmsg.SASLHandshake))}
}
func (watchHandshake) OnRequest(*filter.Context, *filter.Request) error { return nil }

// TestSASLHandshakeV0RawTokensDecoded: the raw tokens after a SaslHandshake
// v0 are relayed when a filter decodes the handshake too (an
// authentication filter would), not parsed as request headers.
func TestSASLHandshakeV0RawTokensDecoded(t *testing.T) {
	got := make(chan string, 4)
	g := startGatewayTo(t, []string{saslV0Broker(t, 1, got)}, func(o *Options) {
		o.SkipBrokerDiscovery = true
		o.Filters = []filter.Filter{watchHandshake{}}
	})
	c := dialRaw(t, g.addr)
	c.write(requestFrame(&kmsg.SASLHandshakeRequest{Version: 0, Mechanism: "PLAIN"}, 7, "kafka-python"))
	var resp kmsg.SASLHandshakeResponse
	if err := decodeResponse(readRaw(t, c), 7, &resp); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("handshake answer: %v, error code %d", err, resp.ErrorCode)
	}
	tok := "\x00alice\x00secret"
	writeRaw(t, c, []byte(tok))
	if b := readRaw(t, c); string(b) != "ok-1" {
		t.Fatalf("raw answer = %q", b)
	}
	if b := <-got; b != tok {
		t.Fatalf("broker got token %q, want %q", b, tok)
	}
	c.send(kmsg.NewPtrMetadataRequest(), 8)
	if b := readRaw(t, c); binary.BigEndian.Uint32(b) != 8 {
		t.Fatalf("metadata after SASL answered with correlation id %d, want 8", binary.BigEndian.Uint32(b))
	}
}

// TestSASLHandshakeV0BadTokenSize: a raw token's size is checked like a
// frame's, and counted under the same kinds.
func TestSASLHandshakeV0BadTokenSize(t *testing.T) {
	for _, tc := range []struct {
		size []byte
		kind string
	}{
		{[]byte{0x7f, 0xff, 0xff, 0xff}, errFrameTooLarge},
		{[]byte{0xff, 0xff, 0xff, 0xfe}, errMalformed},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			got := make(chan string, 4)
			g := startGatewayTo(t, []string{saslV0Broker(t, 1, got)}, func(o *Options) { o.SkipBrokerDiscovery = true })
			c := dialRaw(t, g.addr)
			c.write(requestFrame(&kmsg.SASLHandshakeRequest{Version: 0, Mechanism: "PLAIN"}, 7, "kafka-python"))
			readRaw(t, c)
			c.write(tc.size)
			c.expectClosed()
			g.waitErr(t, tc.kind, 1)
		})
	}
}
