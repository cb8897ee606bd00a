package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzConnection feeds arbitrary bytes to a client connection of a live
// gateway in front of kfake, split into two writes to mimic partial network
// reads. Invariants: the gateway never panics, the connection always ends
// (answered, or closed with a log line) within the deadline, and a fresh
// connection still gets its ApiVersions answered afterwards.
func FuzzConnection(f *testing.F) {
	fr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	apiv := kmsg.NewPtrApiVersionsRequest()
	apiv.Version = 3
	apiv.ClientSoftwareName = "fuzz"
	apiv.ClientSoftwareVersion = "1"
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	prod := kmsg.NewPtrProduceRequest()
	prod.Version = 9
	prod.Acks = 0
	for _, seed := range [][]byte{
		fr.AppendRequest(nil, apiv, 1),
		fr.AppendRequest(fr.AppendRequest(nil, meta, 2), apiv, 3),
		fr.AppendRequest(nil, prod, 4),
		append(fr.AppendRequest(nil, &kmsg.SASLHandshakeRequest{Mechanism: "PLAIN"}, 5), 0, 0, 0, 4, 0, 'a', 0, 'b'),
		{0, 0, 0, 4, 0, 18, 0, 0},
		{0xff, 0xff, 0xff, 0xff},
		[]byte("GET / HTTP/1.1\r\n\r\n"),
	} {
		f.Add(seed, uint16(len(seed)/2))
	}
	b, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	vc, err := New(Options{Name: "fuzz", Listen: "127.0.0.1:0", AdvertisedHost: "127.0.0.1",
		NodePortStart: 1, NodePortEnd: 1, MaxFrame: 1 << 20,
		Target:              Target{Bootstrap: b.ListenAddrs(), RequestTimeout: 2 * time.Second},
		SkipBrokerDiscovery: true})
	if err != nil {
		f.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		f.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		vc.Shutdown(ctx)
	}()
	addr := vc.Addr().String()
	probe := fr.AppendRequest(nil, &kmsg.ApiVersionsRequest{Version: 0}, 99)

	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		cut := min(int(split), len(data))
		c.Write(data[:cut])
		c.Write(data[cut:])
		c.(*net.TCPConn).CloseWrite()
		// Whatever the gateway answers, it must end the exchange: the
		// client half-closed, so the gateway finishes and closes (a reset
		// is a close too: the gateway closed with input left unread).
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("gateway neither answered nor closed: %v", err)
		}

		p, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		p.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := p.Write(probe); err != nil {
			t.Fatal(err)
		}
		var hdr [8]byte
		if _, err := io.ReadFull(p, hdr[:]); err != nil {
			t.Fatalf("gateway stopped answering after fuzz input: %v", err)
		}
		if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != 99 {
			t.Fatalf("probe answered with correlation id %d, want 99", corr)
		}
	})
}
