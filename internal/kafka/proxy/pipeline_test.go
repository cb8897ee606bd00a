package proxy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// TestPipelinedMixWithAcksZero writes 50 requests in one go, without
// waiting for any answer: Metadata, ApiVersions (never a flexible response
// header), acks=0 Produce of flexible and classic versions (no answer at
// all), and acks=1 Produce with transactional ids, one longer than the
// proxy's first look at the frame. Exactly the answered requests must come
// back, in order, and the acks=0 records must land.
func TestPipelinedMixWithAcksZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		filters []filter.Filter
	}{
		{"relayed as bytes", nil},
		{"decoded by a filter", []filter.Filter{passThrough{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testPipelinedMix(t, tc.filters)
		})
	}
}

// passThrough decodes requests and responses of the keys the pipelining
// test uses and changes nothing.
type passThrough struct{}

func (passThrough) Name() string { return "pass-through" }
func (passThrough) Interest() filter.Interest {
	k := filter.Keys(int16(kmsg.Produce), int16(kmsg.Metadata), int16(kmsg.ApiVersions))
	return filter.Interest{Requests: k, Responses: k}
}
func (passThrough) OnRequest(*filter.Context, *filter.Request) error   { return nil }
func (passThrough) OnResponse(*filter.Context, *filter.Response) error { return nil }

func testPipelinedMix(t *testing.T, filters []filter.Filter) {
	const topic = "pipe"
	g := startGateway(t, func(o *Options) { o.Filters = filters }, kfake.SeedTopics(1, topic))
	leader := g.broker.LeaderFor(topic, 0)

	type sent struct {
		corr int32
		resp kmsg.Response // nil: no answer expected
	}
	var (
		buf      bytes.Buffer
		plan     []sent
		acks0    = map[string]bool{}
		longTxn  = strings.Repeat("t", 300)
		shortTxn = "txn"
	)
	for i := 0; i < 50; i++ {
		corr := int32(1000 + i)
		var req kmsg.Request
		switch i % 5 {
		case 0:
			m := kmsg.NewPtrMetadataRequest()
			m.Version = []int16{1, 4, 9, 12}[i/5%4]
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			m.Topics = append(m.Topics, mt)
			req = m
		case 1:
			a := kmsg.NewPtrApiVersionsRequest()
			a.Version = []int16{0, 1, 2, 3}[i/5%4]
			a.ClientSoftwareName, a.ClientSoftwareVersion = "pipe", "1"
			req = a
		case 2: // acks=0, flexible (compact nullable transactional id)
			v := fmt.Sprintf("acks0-flex-%d", i)
			acks0[v] = true
			req = produceRequest([]int16{9, 12}[i/5%2], 0, nil, topic, 0, v)
		case 3: // acks=0, classic encodings
			v := fmt.Sprintf("acks0-classic-%d", i)
			acks0[v] = true
			req = produceRequest(int16(3+i/5%6), 0, nil, topic, 0, v)
		case 4: // answered, with a transactional id to skip over
			txn := &shortTxn
			if i/5%2 == 1 {
				txn = &longTxn
			}
			req = produceRequest([]int16{3, 7, 9, 11}[i/5%4], 1, txn, topic, 0, fmt.Sprintf("txn-%d", i))
		}
		buf.Write(requestFrame(req, corr, "pipeliner"))
		s := sent{corr: corr}
		if p, ok := req.(*kmsg.ProduceRequest); !ok || p.Acks != 0 {
			s.resp = req.ResponseKind()
			s.resp.SetVersion(req.GetVersion())
		}
		plan = append(plan, s)
	}

	c := dialRaw(t, g.nodeAddr(leader))
	c.write(buf.Bytes())
	for _, s := range plan {
		if s.resp == nil {
			continue
		}
		c.recv(s.corr, s.resp)
		switch r := s.resp.(type) {
		case *kmsg.MetadataResponse:
			if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
				t.Errorf("corr %d: metadata %+v", s.corr, r.Topics)
			}
		case *kmsg.ApiVersionsResponse:
			if r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
				t.Errorf("corr %d: ApiVersions error %d, %d keys", s.corr, r.ErrorCode, len(r.ApiKeys))
			}
		case *kmsg.ProduceResponse:
			if len(r.Topics) != 1 || r.Topics[0].Topic != topic || len(r.Topics[0].Partitions) != 1 {
				t.Errorf("corr %d: produce response %+v", s.corr, r.Topics)
			}
		}
	}
	// Nothing else is on its way: the next answer is a sentinel's.
	sentinel := kmsg.NewPtrMetadataRequest()
	sentinel.Version = 1
	c.roundTrip(sentinel, 9999)

	// The acks=0 records are all there, once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 15*time.Second)
	seen := map[string]int{}
	for missing := len(acks0); missing > 0; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d acks=0 records never arrived; saw %v", missing, seen)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			seen[v]++
			if acks0[v] && seen[v] == 1 {
				missing--
			}
		})
	}
	for v, n := range seen {
		if acks0[v] && n != 1 {
			t.Errorf("record %s stored %d times", v, n)
		}
	}
}

// TestPipelinedLargeFrames pipelines produce requests of several megabytes
// (the proxy may hand such bodies to the kernel rather than copy them)
// between small requests: answers come back in order and every byte of the
// records lands as sent.
func TestPipelinedLargeFrames(t *testing.T) {
	t.Parallel()
	const topic = "large"
	g := startGateway(t, nil, kfake.SeedTopics(1, topic),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(8 << 20)}))
	leader := g.broker.LeaderFor(topic, 0)

	value := func(name string, n int) string {
		r := rand.New(rand.NewPCG(uint64(n), uint64(len(name))))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return name + string(b)
	}
	want := map[string]bool{}
	var frames bytes.Buffer
	var expect []kmsg.Response
	var corrs []int32
	add := func(req kmsg.Request, corr int32) {
		frames.Write(requestFrame(req, corr, "large"))
		if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			return
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		expect = append(expect, resp)
		corrs = append(corrs, corr)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	apiv := apiVersionsV3("large")
	for i, sz := range []int{3 << 20, 2 << 20, 1<<20 + 1, 1500 << 10} {
		v := value(fmt.Sprintf("big%d:", i), sz)
		want[v] = true
		acks := int16(1)
		if i == 1 {
			acks = 0
		}
		add(produceRequest([]int16{7, 9, 9, 11}[i], acks, nil, topic, 0, v), int32(10*i))
		if i%2 == 0 {
			add(meta, int32(10*i+1))
		} else {
			add(apiv, int32(10*i+1))
		}
	}

	c := dialRaw(t, g.nodeAddr(leader))
	werr := make(chan error, 1)
	go func() {
		c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, err := c.Write(frames.Bytes())
		werr <- err
	}()
	for i, resp := range expect {
		c.recv(corrs[i], resp)
		if p, ok := resp.(*kmsg.ProduceResponse); ok {
			if ec := p.Topics[0].Partitions[0].ErrorCode; ec != 0 {
				t.Errorf("corr %d: produce error %d", corrs[i], ec)
			}
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 20*time.Second)
	for got := 0; got < len(want); {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d large records", got, len(want))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if !want[string(r.Value)] {
				t.Errorf("record of %d bytes at offset %d is not one that was sent", len(r.Value), r.Offset)
			}
		})
	}
}
