package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeExactly reads topic from the start through the gateway until it
// has want records, then checks each key arrived once with its value, and
// that the partitions hold no more than want records.
func consumeExactly(t *testing.T, ctx context.Context, g *gateway, topic string, want map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]int{}
	n := 0
	for n < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", n, len(want))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			n++
			k := string(r.Key)
			got[k]++
			if v, ok := want[k]; !ok {
				t.Errorf("unexpected record %q", k)
			} else if v != string(r.Value) {
				t.Errorf("record %s: value %q, want %q", k, r.Value, v)
			}
		})
	}
	for k, c := range got {
		if c != 1 {
			t.Errorf("record %s arrived %d times", k, c)
		}
	}
	// No duplicates stored past what was read: the log end offsets add up.
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for p := int32(0); p < 3; p++ {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p
		lp.Timestamp = -1 // latest
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	resp, err := lo.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			end += rp.Offset
		}
	}
	if end != int64(len(want)) {
		t.Errorf("partitions hold %d records, want %d", end, len(want))
	}
}

// TestProduceWhileLeadersMove produces continuously through the gateway
// while partition leaders move between brokers: every record lands once.
func TestProduceWhileLeadersMove(t *testing.T) {
	t.Parallel()
	const topic = "moving"
	g := startGateway(t, nil, kfake.SeedTopics(3, topic))
	ctx := testCtx(t, 45*time.Second)
	var log byteLog
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.Dialer(log.dialer()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Count produce requests that reach a broker no longer leading one of
	// their partitions: the moves must really have hit the client.
	var stale atomic.Int32
	g.broker.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		for _, rt := range kreq.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				if g.broker.LeaderFor(topic, rp.Partition) != g.broker.CurrentNode() {
					stale.Add(1)
				}
			}
		}
		return nil, nil, false
	})

	stop := make(chan struct{})
	moved := make(chan int, 1)
	go func() {
		n := 0
		defer func() { moved <- n }()
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			p := int32(n % 3)
			to := (g.broker.LeaderFor(topic, p) + 1) % 3
			if err := g.broker.MoveTopicPartition(topic, p, to); err != nil {
				t.Errorf("move %s/%d: %v", topic, p, err)
				return
			}
			n++
		}
	}()

	want := map[string]string{}
	var mu sync.Mutex
	var perr error
	const rounds, perRound = 20, 50
	for r := 0; r < rounds; r++ {
		// Besides the mover's, one move per round between flushes, so
		// that every round starts with a stale leader for some partition.
		p := int32(r % 3)
		if err := g.broker.MoveTopicPartition(topic, p, (g.broker.LeaderFor(topic, p)+1)%3); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perRound; i++ {
			k := fmt.Sprintf("k%d-%d", r, i)
			v := fmt.Sprintf("value of %s", k)
			want[k] = v
			cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-moved
	if stale.Load() == 0 {
		t.Error("no produce request ever reached a former leader; the moves tested nothing")
	}
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}
	consumeExactly(t, ctx, g, topic, want)
	gw := g.gatewayAddrs()
	for _, d := range log.dials() {
		if !gw[d] {
			t.Errorf("client dialed %s, not a gateway address", d)
		}
	}
}

// killableListener tracks the connections it accepted so a test can drop
// them all at once, as a crashing broker would.
type killableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *killableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *killableListener) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// TestBrokerGoesAwayAndComesBack removes a broker (closing its listener and
// every connection to it), keeps producing, then brings the node back on a
// new port: clients through the gateway carry on and the gateway follows
// the node to its new address.
func TestBrokerGoesAwayAndComesBack(t *testing.T) {
	t.Parallel()
	const topic = "bounce"
	var lmu sync.Mutex
	listeners := map[string]*killableListener{}
	g := startGateway(t, nil, kfake.SeedTopics(3, topic), kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		kl := &killableListener{Listener: ln}
		lmu.Lock()
		listeners[ln.Addr().String()] = kl
		lmu.Unlock()
		return kl, nil
	}))
	ctx := testCtx(t, 45*time.Second)
	var log byteLog
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.Dialer(log.dialer()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	want := map[string]string{}
	produce := func(phase string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("%s-%d", phase, i)
			want[k] = "v-" + k
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(want[k])}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", k, err)
			}
		}
	}
	produce("before", 60)

	const victim = 1
	oldAddr := g.broker.ListenAddrs()[victim] // brokers are listed in node order at start
	if err := g.broker.RemoveNode(victim); err != nil {
		t.Fatal(err)
	}
	lmu.Lock()
	listeners[oldAddr].kill()
	lmu.Unlock()
	produce("away", 60)

	id, port, err := g.broker.AddNode(victim, 0)
	if err != nil || id != victim {
		t.Fatalf("AddNode: %d, %v", id, err)
	}
	newAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if newAddr == oldAddr {
		t.Fatalf("node came back on its old address %s; the test wants a move", oldAddr)
	}
	// Make sure the returned node leads something.
	for p := int32(0); p < 3; p++ {
		if err := g.broker.MoveTopicPartition(topic, p, []int32{0, victim, 2}[p]); err != nil {
			t.Fatal(err)
		}
	}
	produce("back", 60)
	consumeExactly(t, ctx, g, topic, want)

	g.vc.mu.Lock()
	up := g.vc.upstream[victim]
	g.vc.mu.Unlock()
	if up != newAddr {
		t.Errorf("gateway sends node %d to %s, want its new address %s", victim, up, newAddr)
	}
	gw := g.gatewayAddrs()
	for _, d := range log.dials() {
		if !gw[d] {
			t.Errorf("client dialed %s, not a gateway address", d)
		}
	}
}
