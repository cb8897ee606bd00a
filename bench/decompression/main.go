// Command decompression measures what compressed batches cost the gateway
// in memory: it starts a one-broker development cluster (blackhole produce)
// and `strait run` with record encryption on secure-* in front of it, sends
// -n Produce requests at once, each one gzip batch that decompresses to
// -size bytes, and prints each partition's error code and the gateway's
// resident memory before, at its peak, and -after later (from /proc).
//
//	go build -o bin/strait ./cmd/strait && go run ./bench/decompression -strait bin/strait
//	go run ./bench/decompression -strait bin/strait -mode dense   # ratio about 36, within the limits
//
// -mode bomb sends zeros (ratio about 1000: refused by
// max_compression_ratio); -mode dense sends data that compresses about 36
// times, which the limits let through, so the decompression budget bounds
// it. Everything listens on 127.0.0.1, and the run ends after one round.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	strait := flag.String("strait", "bin/strait", "the strait binary")
	n := flag.Int("n", 16, "Produce requests sent at once, each its own connection")
	size := flag.Int("size", 64<<20-4096, "bytes each batch decompresses to")
	mode := flag.String("mode", "bomb", "bomb (zeros, ratio about 1000) or dense (ratio about 36)")
	after := flag.Duration("after", 10*time.Second, "how long after the requests to read the gateway's memory again")
	flag.Parse()
	if err := run(*strait, *n, *size, *mode, *after); err != nil {
		fmt.Fprintln(os.Stderr, "decompression:", err)
		os.Exit(1)
	}
}

func run(strait string, n, size int, mode string, after time.Duration) error {
	if mode != "bomb" && mode != "dense" {
		return fmt.Errorf("-mode %q: want bomb or dense", mode)
	}
	dir, err := os.MkdirTemp("", "strait-decompression-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	brokerAddr, gwAddr, adminAddr := ports[0], ports[1], ports[2]
	vault := filepath.Join(dir, "vault")
	if out, err := exec.Command(strait, "keys", "create", "--vault", vault, "bench-kek").CombinedOutput(); err != nil {
		return fmt.Errorf("strait keys create: %v: %s", err, out)
	}
	_, gwPort, _ := net.SplitHostPort(gwAddr)
	cfg := fmt.Sprintf(`log: {level: warn}
admin: {listen: %q}
clusters:
  local: {bootstrap_servers: [%q]}
virtual_clusters:
  - name: bench
    cluster: local
    listen: %q
    node_ports: {start: %s1, end: %s9}
    filters:
      - type: record-encryption
        config:
          kms: {type: vault, path: %q}
          topics: ["secure-*"]
          kek: bench-kek
`, adminAddr, brokerAddr, gwAddr, gwPort[:len(gwPort)-1], gwPort[:len(gwPort)-1], vault)
	// The node ports are gwPort's first digits followed by 1..9: pick a
	// gateway port ending in 0 so that they do not collide with it.
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	broker := exec.Command(strait, "broker", "--brokers", "1", "--partitions", "1", "--listen", brokerAddr, "--blackhole")
	if err := broker.Start(); err != nil {
		return err
	}
	defer stop(broker)
	if err := waitListening(brokerAddr); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	var gwErr bytes.Buffer
	gw := exec.Command(strait, "run", "-c", cfgPath)
	gw.Stderr = &gwErr
	if err := gw.Start(); err != nil {
		return err
	}
	defer stop(gw)
	if err := waitListening(gwAddr); err != nil {
		return fmt.Errorf("gateway: %w: %s", err, gwErr.String())
	}

	batch, ratio := gzipBatch(size, mode)
	fmt.Printf("batch: %d bytes on the wire, %d decompressed (ratio %.0f), %d at once\n", len(batch), size, ratio, n)
	fmt.Printf("gateway idle:        %s\n", memory(gw.Process.Pid))
	codes, took, err := produceAll(gwAddr, batch, n)
	if err != nil {
		return err
	}
	fmt.Printf("answers in %s:  %v\n", took.Round(time.Millisecond), codes)
	fmt.Printf("gateway just after:  %s\n", memory(gw.Process.Pid))
	time.Sleep(after)
	fmt.Printf("gateway %s after:  %s\n", after, memory(gw.Process.Pid))
	return nil
}

// gzipBatch is one magic-2 record batch holding one record of size bytes,
// gzip-compressed, and its compression ratio.
func gzipBatch(size int, mode string) ([]byte, float64) {
	value := make([]byte, size)
	if mode == "dense" {
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < len(value); i += 4096 {
			for j := i; j < min(i+100, len(value)); j++ {
				value[j] = byte(r.IntN(256))
			}
		}
	}
	kr := kmsg.Record{Value: value}
	kr.Length = int32(len(kr.AppendTo(nil)) - 1)
	raw := kr.AppendTo(nil)
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 1, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: zb.Bytes()}
	batch := b.AppendTo(nil)
	binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	return batch, float64(len(raw)) / float64(zb.Len())
}

// produceAll sends the batch to partition 0 of an encrypted topic in n
// Produce requests at once, each on its own client, and counts the answers.
func produceAll(addr string, batch []byte, n int) (map[string]int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "secure-decompression"
	meta, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, 0, err
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mreq.AllowAutoTopicCreation = true
	leader := int32(-1)
	var topicID [16]byte
	for leader < 0 {
		mresp, err := mreq.RequestWith(ctx, meta)
		if err != nil {
			meta.Close()
			return nil, 0, fmt.Errorf("metadata: %w", err)
		}
		if len(mresp.Topics) == 1 && len(mresp.Topics[0].Partitions) > 0 && mresp.Topics[0].Partitions[0].ErrorCode == 0 {
			leader, topicID = mresp.Topics[0].Partitions[0].Leader, mresp.Topics[0].TopicID
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	meta.Close()

	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			what := "ok"
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(time.Minute))
			if err == nil {
				defer cl.Close()
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = -1, 60000
				t := kmsg.NewProduceRequestTopic()
				t.Topic, t.TopicID = topic, topicID
				p := kmsg.NewProduceRequestTopicPartition()
				p.Records = batch
				t.Partitions = append(t.Partitions, p)
				req.Topics = append(req.Topics, t)
				var resp kmsg.Response
				if resp, err = cl.Broker(int(leader)).Request(ctx, req); err == nil {
					if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
						what = kerr.ErrorForCode(code).Error()
					}
				}
			}
			if err != nil {
				what = "error: " + err.Error()
			}
			mu.Lock()
			codes[what]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return codes, time.Since(start), nil
}

// memory reads a process's resident memory and its peak from /proc.
func memory(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var rss, hwm string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "VmRSS:":
			rss = f[1]
		case len(f) >= 2 && f[0] == "VmHWM:":
			hwm = f[1]
		}
	}
	return fmt.Sprintf("RSS %s kB (peak so far %s kB)", rss, hwm)
}

// freePorts returns n loopback addresses free now, the second ending in 0
// (the gateway's, whose node ports are its prefix followed by 1..9).
func freePorts(n int) ([]string, error) {
	var out []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		a := l.Addr().String()
		if len(out) == 1 && !strings.HasSuffix(a, "0") {
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

func waitListening(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stop(c *exec.Cmd) {
	_ = c.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}
