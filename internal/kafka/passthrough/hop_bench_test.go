package passthrough_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/passthrough"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/testkit"
)

// produceFrames is a Produce v9 request of one batch of size bytes and its
// answer, as whole frames.
func produceFrames(size int) (req, resp []byte) {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, size)
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	req = kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, r, 1)
	rs := kmsg.NewPtrProduceResponse()
	rs.Version = 9
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "bench"
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
	rs.Topics = append(rs.Topics, rt)
	body := rs.AppendTo(nil)
	resp = binary.BigEndian.AppendUint32(nil, uint32(4+1+len(body)))
	resp = binary.BigEndian.AppendUint32(resp, 1)
	resp = append(resp, 0) // flexible response header: no tags
	resp = append(resp, body...)
	return req, resp
}

// sinkBroker answers every frame with resp, over TLS when tc is set.
func sinkBroker(tb testing.TB, tc *tls.Config, resp []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if tc != nil {
				c = tls.Server(c, tc)
			}
			go func() {
				defer c.Close()
				r := bufio.NewReaderSize(c, 256<<10)
				w := bufio.NewWriterSize(c, 64<<10)
				var sz [4]byte
				for {
					if r.Buffered() == 0 && w.Buffered() > 0 {
						w.Flush()
					}
					if _, err := io.ReadFull(r, sz[:]); err != nil {
						return
					}
					if _, err := r.Discard(int(binary.BigEndian.Uint32(sz[:]))); err != nil {
						return
					}
					w.Write(resp)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pump sends b.N pipelined requests on c (64 in flight) and reads their
// answers, reporting the process's CPU per MB sent.
func pump(b *testing.B, c net.Conn, req, resp []byte) {
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(c, 64<<10)
		for i := 0; i < b.N; i++ {
			if _, err := r.Discard(len(resp)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	w := bufio.NewWriterSize(c, 64<<10)
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		w.Write(req)
	}
	w.Flush()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	used := cpuTime() - cpu
	b.ReportMetric(float64(used.Milliseconds())/(float64(b.N)*float64(len(req))/(1<<20)), "cpu-ms/MB")
}

// BenchmarkHops is the seed's "proxy hop" row on this machine: 64 KiB
// Produce requests, pipelined, from a client to a broker stub, directly and
// through each kind of hop Strait offers. cpu-ms/MB is the whole process
// (client, hop and stub); a hop's own cost is its row minus the direct row
// of the same transport, measured in one run.
func BenchmarkHops(b *testing.B) {
	req, resp := produceFrames(64 << 10)
	ca := testkit.NewCA(b)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.IssueServer(b, "kafka.test", "*.kafka.test")}, MinVersion: tls.VersionTLS12}
	clientTLS := func(name string) *tls.Config { return &tls.Config{RootCAs: ca.Pool, ServerName: name} }
	plainBroker := sinkBroker(b, nil, resp)
	tlsBroker := sinkBroker(b, serverTLS, resp)
	dial := func(addr string, tc *tls.Config) net.Conn {
		var c net.Conn
		var err error
		if tc != nil {
			c, err = tls.Dial("tcp", addr, tc)
		} else {
			c, err = net.Dial("tcp", addr)
		}
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	startProxy := func(b *testing.B, broker string, front, back *tls.Config) string {
		vc, err := proxy.New(proxy.Options{Name: "bench", Listen: "127.0.0.1:0", AdvertisedHost: "127.0.0.1", Log: slog.New(slog.DiscardHandler),
			NodePortStart: 1, NodePortEnd: 2, TLS: front, SkipBrokerDiscovery: true,
			Target: proxy.Target{Bootstrap: []string{broker}, TLS: back}})
		if err != nil {
			b.Fatal(err)
		}
		if err := vc.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			vc.Shutdown(ctx)
		})
		return vc.Addr().String()
	}
	b.Run("direct-plaintext", func(b *testing.B) { pump(b, dial(plainBroker, nil), req, resp) })
	b.Run("proxy-plaintext", func(b *testing.B) {
		pump(b, dial(startProxy(b, plainBroker, nil, nil), nil), req, resp)
	})
	b.Run("direct-tls", func(b *testing.B) { pump(b, dial(tlsBroker, clientTLS("broker-0.kafka.test")), req, resp) })
	b.Run("tls-passthrough-sni", func(b *testing.B) {
		l, err := passthrough.Listen(passthrough.Options{Name: "bench", Listen: "127.0.0.1:0",
			Routes: map[string]string{"broker-0.kafka.test": tlsBroker}, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Shutdown(context.Background()) })
		pump(b, dial(l.Addr().String(), clientTLS("broker-0.kafka.test")), req, resp)
	})
	b.Run("tls-termination", func(b *testing.B) {
		addr := startProxy(b, tlsBroker, serverTLS, clientTLS("broker-0.kafka.test"))
		pump(b, dial(addr, clientTLS("kafka.test")), req, resp)
	})
}
