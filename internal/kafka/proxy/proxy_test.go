package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// freePortBlock finds a base port with n+1 consecutive free ports.
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+n > 65000 {
			continue
		}
		ok := true
		var ls []net.Listener
		for i := 0; i <= n; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port block")
	return 0
}

type testEnv struct {
	broker *kfake.Cluster
	vc     *VirtualCluster
	addr   string
}

func startEnv(t *testing.T, kopts ...kfake.Opt) *testEnv {
	t.Helper()
	kopts = append([]kfake.Opt{kfake.NumBrokers(3), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3)}, kopts...)
	b, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	base := freePortBlock(t, 10)
	lvl := slog.LevelWarn
	if testing.Verbose() {
		lvl = slog.LevelDebug
	}
	vc, err := New(Options{
		Name:          "test",
		Listen:        fmt.Sprintf("127.0.0.1:%d", base),
		NodePortStart: base + 1,
		NodePortEnd:   base + 10,
		Target:        Target{Bootstrap: b.ListenAddrs()},
		Log:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		vc.Shutdown(ctx)
	})
	return &testEnv{broker: b, vc: vc, addr: vc.Addr().String()}
}

func TestProduceConsumeThroughProxy(t *testing.T) {
	env := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.DefaultProduceTopic("t1"),
		kgo.ConsumeTopics("t1"), kgo.ConsumerGroup("g1"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 200
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Repeat("v", i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("got %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Errorf("fetch %s/%d: %v", t2, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			i, _ := strconv.Atoi(string(r.Key))
			if string(r.Value) != strings.Repeat("v", i) {
				t.Errorf("record %d: value corrupted", i)
			}
			got[string(r.Key)] = true
		})
	}
	// Metadata seen by the client names only gateway addresses.
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		for _, up := range env.broker.ListenAddrs() {
			if addr == up {
				t.Errorf("client learned upstream address %s", addr)
			}
		}
	}
}
