// Command passthrough measures what the gateway costs on the plain relay
// path: flat-out produce and consume of 1 KiB records with franz-go, direct
// to a development cluster and through `strait run`, alternating in one run,
// plus the gateway's own CPU time per MB relayed (from /proc).
//
// It starts both as subprocesses of a built strait binary:
//
//	go build -o bin/strait ./cmd/strait && go run ./bench/passthrough -strait bin/strait
//
// The cluster runs in blackhole-produce and synthetic-fetch mode, so the
// broker neither stores nor grows: what is measured is the client, the
// relay, and the broker's request handling. Load is bounded by -duration
// per phase and -rounds.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/bench/internal/stack"
	"github.com/straitgw/strait/internal/bench/procstat"
	"github.com/straitgw/strait/internal/bench/promscrape"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	strait := flag.String("strait", "bin/strait", "path to a built strait binary")
	duration := flag.Duration("duration", 10*time.Second, "length of each measured phase")
	rounds := flag.Int("rounds", 3, "direct/gateway rounds, alternating")
	size := flag.Int("size", 1024, "record value size in bytes")
	partitions := flag.Int("partitions", 10, "partitions of the benchmark topic")
	brokerPort := flag.Int("broker-port", 29092, "first broker port")
	gatewayPort := flag.Int("gateway-port", 29192, "gateway bootstrap port")
	flag.Parse()
	if err := run(*strait, *duration, *rounds, *size, *partitions, *brokerPort, *gatewayPort); err != nil {
		fmt.Fprintln(os.Stderr, "passthrough:", err)
		os.Exit(1)
	}
}

type result struct {
	bytes   int64
	records int64
	elapsed time.Duration
}

func (r result) mbps() float64 { return float64(r.bytes) / 1e6 / r.elapsed.Seconds() }

func run(strait string, d time.Duration, rounds, size, partitions, brokerPort, gatewayPort int) error {
	st, err := stack.Start(strait, brokerPort, gatewayPort,
		"--blackhole", "--synthetic-fetch", strconv.Itoa(size), "--partitions", strconv.Itoa(partitions))
	if err != nil {
		return err
	}
	defer st.Stop()
	direct, gw, admin := st.Direct, st.Gateway, st.Admin
	topic := "bench"
	if err := createTopic(direct, topic, partitions); err != nil {
		return err
	}
	payload := make([]byte, 64<<20)
	rand.Read(payload)

	fmt.Printf("# %d x %s per phase, %d B records, %d partitions, acks=all, no compression, GOMAXPROCS=%d, %s\n",
		rounds, d, size, partitions, runtime.GOMAXPROCS(0), cpuModel())
	var sums [2][2]float64 // [direct|gateway][produce|consume]
	var gwCPU time.Duration
	var gwBytes float64
	for r := 0; r < rounds; r++ {
		for i, addr := range []string{direct, gw} {
			for j, phase := range []string{"produce", "consume"} {
				cpu0 := procCPU(st.GatewayPID())
				b0 := relayedBytes(admin)
				var res result
				var err error
				if phase == "produce" {
					res, err = produce(addr, topic, payload, size, d)
				} else {
					res, err = consume(addr, topic, d)
				}
				if err != nil {
					return fmt.Errorf("%s via %s: %w", phase, addr, err)
				}
				name := "direct"
				if i == 1 {
					name = "gateway"
					cpu := procCPU(st.GatewayPID()) - cpu0
					rel := relayedBytes(admin) - b0
					gwCPU += cpu
					gwBytes += rel
					fmt.Printf("round %d %-7s %-7s %8.1f MB/s %9.0f rec/s  gateway CPU %.3f ms/MB\n", r+1, name, phase,
						res.mbps(), float64(res.records)/res.elapsed.Seconds(), float64(cpu.Microseconds())/1e3/(rel/1e6))
				} else {
					fmt.Printf("round %d %-7s %-7s %8.1f MB/s %9.0f rec/s\n", r+1, name, phase, res.mbps(), float64(res.records)/res.elapsed.Seconds())
				}
				sums[i][j] += res.mbps()
			}
		}
	}
	n := float64(rounds)
	fmt.Printf("\n| phase | direct MB/s | through gateway MB/s | ratio |\n|---|---|---|---|\n")
	for j, phase := range []string{"produce", "consume"} {
		fmt.Printf("| %s | %.0f | %.0f | %.2f |\n", phase, sums[0][j]/n, sums[1][j]/n, sums[1][j]/sums[0][j])
	}
	fmt.Printf("\ngateway CPU: %.3f ms per MB relayed (%.1f s CPU for %.0f MB, both directions, from /proc and strait_kafka_bytes_total)\n",
		float64(gwCPU.Microseconds())/1e3/(gwBytes/1e6), gwCPU.Seconds(), gwBytes/1e6)
	return nil
}

func produce(addr, topic string, payload []byte, size int, d time.Duration) (result, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var acked, errs atomic.Int64
	var firstErr atomic.Value
	cb := func(r *kgo.Record, err error) {
		if err != nil {
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err)
			return
		}
		acked.Add(1)
	}
	// Warm up: metadata, connections, producer id.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: payload[:size]}).FirstErr(); err != nil {
		return result{}, err
	}
	start := time.Now()
	end := start.Add(d)
	var i int
	for time.Now().Before(end) {
		for k := 0; k < 256; k++ {
			// Distinct values without allocating: a sliding window over
			// 64 MiB of random bytes.
			off := (i * 7919) % (len(payload) - size)
			cl.Produce(ctx, &kgo.Record{Value: payload[off : off+size]}, cb)
			i++
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return result{}, err
	}
	el := time.Since(start)
	if errs.Load() > 0 {
		return result{}, fmt.Errorf("%d produce errors, first: %v", errs.Load(), firstErr.Load())
	}
	return result{bytes: acked.Load() * int64(size), records: acked.Load(), elapsed: el}, nil
}

func consume(addr, topic string, d time.Duration) (result, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var res result
	// The first poll includes connection setup; count from there.
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return res, err
	}
	start := time.Now()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			res.bytes += int64(len(r.Value))
			res.records++
		})
	}
	res.elapsed = time.Since(start)
	return res, nil
}

func createTopic(addr, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions = int32(partitions)
	t.ReplicationFactor = 1
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if c := resp.Topics[0].ErrorCode; c != 0 && c != 36 { // 36: already exists
		return fmt.Errorf("create topic: error code %d", c)
	}
	return nil
}

// procCPU is the user+system CPU time of pid (0 if it cannot be read).
func procCPU(pid int) time.Duration {
	sample, _ := procstat.Read(pid)
	return sample.CPU
}

// relayedBytes sums strait_kafka_bytes_total from the gateway's metrics.
func relayedBytes(admin string) float64 {
	sums, err := promscrape.Fetch(context.Background(), "http://"+admin+"/metrics", "strait_kafka_bytes_total", "")
	if err != nil {
		return 0
	}
	return sums[""]
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			return strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
		}
	}
	return runtime.GOARCH
}
