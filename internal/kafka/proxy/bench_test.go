package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filters/authz"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// echoBroker answers every frame with a canned response carrying the
// request's correlation id, allocating nothing per frame.
func echoBroker(tb testing.TB, resp func(version int16) []byte) string {
	tb.Helper()
	return stubBroker(tb, func(c net.Conn) {
		r := bufio.NewReaderSize(c, 64<<10)
		w := bufio.NewWriterSize(c, 64<<10)
		var hdr [12]byte
		for {
			if r.Buffered() == 0 {
				w.Flush()
			}
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			size := int(binary.BigEndian.Uint32(hdr[:]))
			version := int16(binary.BigEndian.Uint16(hdr[6:]))
			if _, err := r.Discard(size - 8); err != nil {
				return
			}
			out := resp(version)
			copy(out[4:8], hdr[8:12])
			w.Write(out)
		}
	})
}

func produceFrames(version int16, valueSize int) (req []byte, resp []byte) {
	batch := make([]byte, 61+valueSize) // an opaque batch-sized body
	pr := kmsg.NewPtrProduceRequest()
	pr.Version = version
	pr.Acks = 1
	pr.TimeoutMillis = 1000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = batch
	t.Partitions = append(t.Partitions, p)
	pr.Topics = append(pr.Topics, t)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	req = f.AppendRequest(nil, pr, 1)

	rs := kmsg.NewPtrProduceResponse()
	rs.Version = version
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "bench"
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
	rs.Topics = append(rs.Topics, rt)
	resp = encodeResponse(nil, 0, 0, rs)
	return req, resp
}

// BenchmarkRelayProduce measures one 1 KiB Produce round trip through the
// proxy (pipelined, 64 in flight) over loopback, against a broker stub.
// v9 is fully opaque to the filters; v11 is skimmed for KIP-951 addresses.
func BenchmarkRelayProduce(b *testing.B) { benchRelayProduce(b, nil) }

// lookingFilter subscribes to Produce and only looks, as the authorization
// filter does when every topic is allowed: the cost of a subscription.
type lookingFilter struct{}

func (lookingFilter) Name() string { return "looking" }
func (lookingFilter) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(wire.KeyProduce)}
}
func (lookingFilter) OnRequest(_ *filter.Context, req *filter.Request) error {
	req.Unchanged()
	return nil
}

// BenchmarkRelayProduceLooked is BenchmarkRelayProduce with a filter that
// subscribes to Produce and changes nothing.
func BenchmarkRelayProduceLooked(b *testing.B) {
	benchRelayProduce(b, []filter.Filter{lookingFilter{}})
}

// BenchmarkRelayProduceAuthorized is BenchmarkRelayProduce through the
// authorization filter, every topic allowed: it lets each request through
// unread (filter.RequestSkimmer).
func BenchmarkRelayProduceAuthorized(b *testing.B) {
	f, err := authz.New(authz.Config{Rules: []authz.Rule{
		{Effect: "allow", Principals: []string{"anonymous"}, Resource: "topic", Names: []string{"*"}, Operations: []string{"ALL"}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	benchRelayProduce(b, []filter.Filter{f})
}

func benchRelayProduce(b *testing.B, filters []filter.Filter) {
	for _, bc := range []struct {
		name    string
		version int16
		size    int
	}{{"v9-1KiB", 9, 1024}, {"v11-1KiB", 11, 1024}, {"v9-64KiB", 9, 64 << 10}, {"v9-256KiB", 9, 256 << 10}, {"v9-1MiB", 9, 1 << 20}, {"v9-4MiB", 9, 4 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			version := bc.version
			req, resp := produceFrames(version, bc.size)
			c := benchRelay(b, resp, filters)
			const window = 64
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
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.Write(req)
			}
			w.Flush()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRelayProduceCopy is BenchmarkRelayProduce with splice off, to
// compare the two ways of moving large bodies in one run.
func BenchmarkRelayProduceCopy(b *testing.B) {
	old := spliceMin
	spliceMin = math.MaxInt
	defer func() { spliceMin = old }()
	BenchmarkRelayProduce(b)
}

// BenchmarkRelayRoundTrip sends one small Produce at a time and waits for
// its answer, as a client with one record batch per request does at low
// load: what it measures is the relay's cost and latency per request
// (system calls, wakeups), not per byte. The CPU the whole process spends
// per request (client, gateway and broker stub together) is reported as
// cpu-µs/op.
func BenchmarkRelayRoundTrip(b *testing.B) {
	req, resp := produceFrames(9, 1024)
	c := benchRelay(b, resp, nil)
	got := make([]byte, len(resp))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// benchRelay starts a gateway with filters in front of a broker stub that
// answers every request with resp, and returns a client connection to it;
// both end with the benchmark.
func benchRelay(b *testing.B, resp []byte, filters []filter.Filter) net.Conn {
	up := echoBroker(b, func(int16) []byte { return resp })
	vc, err := New(Options{Name: "bench", Listen: "127.0.0.1:0", AdvertisedHost: "127.0.0.1",
		NodePortStart: 1, NodePortEnd: 2, Target: Target{Bootstrap: []string{up}}, SkipBrokerDiscovery: true, Filters: filters})
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
	c, err := net.Dial("tcp", vc.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
