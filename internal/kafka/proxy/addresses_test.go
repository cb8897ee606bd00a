package proxy

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// checkGatewayBroker fails unless a broker address is the gateway's
// address for that node.
func checkGatewayBroker(t *testing.T, g *gateway, what string, id int32, host string, port int32) {
	t.Helper()
	wantPort := int32(g.vc.opts.NodePortStart) + id
	if host != "127.0.0.1" || port != wantPort {
		t.Errorf("%s: node %d at %s, want 127.0.0.1:%d", what, id, net.JoinHostPort(host, strconv.Itoa(int(port))), wantPort)
	}
}

// TestClientNeverSeesUpstreamAddresses runs a client workload through the
// gateway and checks every address it dialed and every byte it read.
func TestClientNeverSeesUpstreamAddresses(t *testing.T) {
	t.Parallel()
	const topic = "addr-topic"
	g := startGateway(t, nil, kfake.SeedTopics(3, topic))

	// Record the FindCoordinator versions the broker sees, to prove both
	// shapes of the request were exercised.
	var fcMu sync.Mutex
	var fcSeen []string
	g.broker.ControlKey(int16(kmsg.FindCoordinator), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		req := kreq.(*kmsg.FindCoordinatorRequest)
		fcMu.Lock()
		fcSeen = append(fcSeen, fmt.Sprintf("v%d/%d", req.Version, max(1, len(req.CoordinatorKeys))))
		fcMu.Unlock()
		return nil, nil, false
	})

	var log byteLog
	ctx := testCtx(t, 30*time.Second)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(g.addr),
		kgo.Dialer(log.dialer()),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeTopics(topic),
		kgo.ConsumerGroup("addr-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const perPartition = 10
	for p := int32(0); p < 3; p++ {
		for i := 0; i < perPartition; i++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to partition %d: %v", p, err)
			}
		}
	}
	got := 0
	for got < 3*perPartition {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", got, 3*perPartition)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	// Admin requests that carry addresses.
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 3 {
		t.Errorf("metadata lists %d brokers, want 3", len(meta.Brokers))
	}
	for _, b := range meta.Brokers {
		checkGatewayBroker(t, g, "Metadata", b.NodeID, b.Host, b.Port)
	}

	batched := kmsg.NewPtrFindCoordinatorRequest()
	batched.CoordinatorKeys = []string{"addr-group", "other-group-1", "other-group-2"}
	fc, err := batched.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Coordinators) != 3 {
		t.Errorf("batched FindCoordinator: %d coordinators, want 3", len(fc.Coordinators))
	}
	for _, c := range fc.Coordinators {
		if c.ErrorCode != 0 {
			t.Errorf("FindCoordinator %s: %v", c.Key, kerr.ErrorForCode(c.ErrorCode))
			continue
		}
		checkGatewayBroker(t, g, "FindCoordinator v4+ "+c.Key, c.NodeID, c.Host, c.Port)
		if want := g.broker.CoordinatorFor(c.Key); c.NodeID != want {
			t.Errorf("FindCoordinator %s: node %d, want %d", c.Key, c.NodeID, want)
		}
	}

	// A client capped at FindCoordinator v3 sends the single-key shape.
	vers := kversion.Stable()
	vers.SetMaxKeyVersion(int16(kmsg.FindCoordinator), 3)
	cl3, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.Dialer(log.dialer()), kgo.MaxVersions(vers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl3.Close()
	single := kmsg.NewPtrFindCoordinatorRequest()
	single.CoordinatorKey = "addr-group"
	fc3, err := single.RequestWith(ctx, cl3)
	if err != nil {
		t.Fatal(err)
	}
	if fc3.Version != 3 {
		t.Errorf("FindCoordinator answered at v%d, want v3", fc3.Version)
	}
	if err := kerr.ErrorForCode(fc3.ErrorCode); err != nil {
		t.Fatalf("FindCoordinator v3: %v", err)
	}
	checkGatewayBroker(t, g, "FindCoordinator v3", fc3.NodeID, fc3.Host, fc3.Port)

	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dc.Brokers) != 3 {
		t.Errorf("DescribeCluster lists %d brokers, want 3", len(dc.Brokers))
	}
	for _, b := range dc.Brokers {
		checkGatewayBroker(t, g, "DescribeCluster", b.NodeID, b.Host, b.Port)
	}

	fcMu.Lock()
	seen := append([]string(nil), fcSeen...)
	fcMu.Unlock()
	if !slices.Contains(seen, "v3/1") || !slices.ContainsFunc(seen, func(s string) bool {
		var v, n int
		fmt.Sscanf(s, "v%d/%d", &v, &n)
		return v >= 4 && n == 3
	}) {
		t.Errorf("broker saw FindCoordinator requests %v; want a v3 one and a batched v4+ one of 3 keys", seen)
	}

	// What the client dialed and read.
	gw := g.gatewayAddrs()
	dials := log.dials()
	if len(dials) < 4 {
		t.Errorf("client dialed only %v; expected the bootstrap and node ports", dials)
	}
	for _, d := range dials {
		if !gw[d] {
			t.Errorf("client dialed %s, which is not a gateway address", d)
		}
	}
	for _, up := range g.broker.ListenAddrs() {
		for _, pat := range addressPatterns(up) {
			if log.contains(pat) {
				t.Errorf("a response carried upstream address %s (%q)", up, pat)
			}
		}
	}
	// The search itself must be able to find an address: the gateway's
	// own node addresses are in the metadata the client read.
	if !log.contains(addressPatterns(g.nodeAddr(0))[0]) {
		t.Error("the byte search cannot find the gateway's node 0 address in what the client read")
	}
}

// TestNodeEndpointsRewritten sends Produce and Fetch for a partition to a
// broker that does not lead it: the NOT_LEADER answer carries KIP-951
// NodeEndpoints, which must name the gateway.
func TestNodeEndpointsRewritten(t *testing.T) {
	t.Parallel()
	const topic = "kip951"
	g := startGateway(t, nil, kfake.SeedTopics(1, topic))
	leader := g.broker.LeaderFor(topic, 0)
	follower := (leader + 1) % 3

	c := dialRaw(t, g.nodeAddr(follower))
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	meta := c.roundTrip(mreq, 1).(*kmsg.MetadataResponse)
	if len(meta.Topics) != 1 || meta.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata for %s: %+v", topic, meta.Topics)
	}
	topicID := meta.Topics[0].TopicID

	upstream := g.broker.ListenAddrs()
	checkEndpoints := func(t *testing.T, what string, ids []int32, hosts []string, ports []int32) {
		t.Helper()
		if len(ids) == 0 {
			t.Fatalf("%s: NOT_LEADER response carries no NodeEndpoints", what)
		}
		sawLeader := false
		for i := range ids {
			checkGatewayBroker(t, g, what, ids[i], hosts[i], ports[i])
			for _, up := range upstream {
				if net.JoinHostPort(hosts[i], strconv.Itoa(int(ports[i]))) == up {
					t.Errorf("%s: upstream address %s leaked", what, up)
				}
			}
			sawLeader = sawLeader || ids[i] == leader
		}
		if !sawLeader {
			t.Errorf("%s: NodeEndpoints %v do not include the leader %d", what, ids, leader)
		}
	}

	corr := int32(10)
	for _, v := range []int16{10, 11, 12, 13} {
		t.Run(fmt.Sprintf("Produce_v%d", v), func(t *testing.T) {
			req := produceRequest(v, -1, nil, topic, 0, "not-here")
			if v >= 13 {
				req.Topics[0].Topic = ""
				req.Topics[0].TopicID = topicID
			}
			corr++
			resp := c.roundTrip(req, corr).(*kmsg.ProduceResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("produce response: %+v", resp.Topics)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("produce to follower: error %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(p.ErrorCode))
			}
			if p.CurrentLeader.LeaderID != leader {
				t.Errorf("current leader %d, want %d", p.CurrentLeader.LeaderID, leader)
			}
			var ids, ports []int32
			var hosts []string
			for _, b := range resp.Brokers {
				ids, hosts, ports = append(ids, b.NodeID), append(hosts, b.Host), append(ports, b.Port)
			}
			checkEndpoints(t, "Produce", ids, hosts, ports)
		})
	}
	for _, v := range []int16{16, 17, 18} {
		t.Run(fmt.Sprintf("Fetch_v%d", v), func(t *testing.T) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = v
			req.ReplicaID = -1
			req.MaxWaitMillis = 0
			req.MinBytes = 1
			req.MaxBytes = 1 << 20
			req.SessionID = 0
			req.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.TopicID = topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = 0
			rp.CurrentLeaderEpoch = -1
			rp.LogStartOffset = -1
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			corr++
			resp := c.roundTrip(req, corr).(*kmsg.FetchResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("fetch response: %+v", resp.Topics)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("fetch from follower: error %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(p.ErrorCode))
			}
			var ids, ports []int32
			var hosts []string
			for _, b := range resp.Brokers {
				ids, hosts, ports = append(ids, b.NodeID), append(hosts, b.Host), append(ports, b.Port)
			}
			checkEndpoints(t, "Fetch", ids, hosts, ports)
		})
	}
}

// TestAdvertiseRejectsHugeNodeID: a node id near MaxInt32 is outside the
// node ports; on a 32-bit platform start+id must not wrap around into
// range (or to a negative port).
func TestAdvertiseRejectsHugeNodeID(t *testing.T) {
	v, err := New(Options{Name: "t", Listen: "127.0.0.1:19092", Target: Target{Bootstrap: []string{"127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{math.MaxInt32, math.MaxInt32 - 100, 1000} {
		if _, _, err := v.Advertise(id, "broker", 9092); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("Advertise(%d) = %v, want an out-of-range error", id, err)
		}
	}
}
