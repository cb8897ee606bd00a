package authz

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// benchRules are a realistic set: the example's template rules, a few
// teams by prefix, a deny, and a cluster rule, so that a decision not in
// the cache walks several rules.
func benchRules() []Rule {
	return []Rule{
		allow(list("*"), "topic", list("{principal}-*"), "ALL"),
		allow(list("*"), "group", list("{principal}-*"), "ALL"),
		allow(list("team-a-*"), "topic", list("team-a.*"), "READ", "WRITE"),
		allow(list("team-b-*"), "topic", list("team-b.*"), "READ", "WRITE"),
		allow(list("analytics"), "topic", list("*-events", "clicks"), "READ"),
		deny(list("*"), "topic", list("secret*"), "ALL"),
		allow(list("ops"), "cluster", nil, "ALL"),
	}
}

// benchProduce is a Produce v9 request of 50 partitions over topics
// topics of alice's, each partition's batch size bytes.
func benchProduce(topics, size int) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks = 9, -1
	records := make([]byte, size)
	for i := range topics {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = fmt.Sprintf("alice-topic-%d", i)
		for p := range 50 / topics {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p), records
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func benchFetch(topics int) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.SessionEpoch = 12, -1
	for i := range topics {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = fmt.Sprintf("alice-topic-%d", i)
		for p := range 50 / topics {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(p)
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// runHook measures what the proxy runs for an allowed request: the mask
// lookup, the filter's OnRequest, and the skimmer that keeps the response
// on the byte-copy path.
func runHook(b *testing.B, req kmsg.Request, bytes int) {
	f := newFilter(b, benchRules()...)
	ch, err := filter.NewChain(f)
	if err != nil {
		b.Fatal(err)
	}
	c, _ := testCtx(b, "alice")
	key, version := req.Key(), req.GetVersion()
	fr := filter.Request{Header: filter.Header{Key: key, Version: version, CorrelationID: 1}, Body: req}
	if _, err := ch.OnRequest(c, ch.RequestMask(key, version), &fr); err != nil || !fr.Untouched() {
		b.Fatalf("the benchmark request is not allowed as it is: %v", err)
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fr = filter.Request{Header: filter.Header{Key: key, Version: version, CorrelationID: 1}, Body: req}
		if _, err := ch.OnRequest(c, ch.RequestMask(key, version), &fr); err != nil {
			b.Fatal(err)
		}
		if m := ch.ResponseMask(key, version); ch.WantsResponse(m, ch.Len(), key, version, nil) {
			b.Fatal("an allowed request's response was wanted")
		}
	}
	b.StopTimer()
	if bytes > 0 {
		// Gateway CPU per MB/s of traffic through the hook, in ms: the
		// seconds of CPU per MB, times 1000.
		perMB := float64(b.Elapsed().Nanoseconds()) / float64(b.N) * (1 << 20) / float64(bytes) / 1e6
		b.ReportMetric(perMB, "cpu-ms/MB")
	}
}

// BenchmarkProduceHook: an allowed Produce of 50 partitions, over 1, 5 or
// 50 topics, with batches of 1 KiB and 16 KiB (the hook never reads them:
// the per-MB cost falls as batches grow).
func BenchmarkProduceHook(b *testing.B) {
	for _, topics := range []int{1, 5, 50} {
		for _, size := range []int{1 << 10, 16 << 10} {
			b.Run(fmt.Sprintf("topics=%d/batch=%dKiB", topics, size>>10), func(b *testing.B) {
				runHook(b, benchProduce(topics, size), 50*size)
			})
		}
	}
}

// BenchmarkFetchHook: an allowed Fetch of 50 partitions; the per-MB
// figure assumes its response carries 16 KiB per partition.
func BenchmarkFetchHook(b *testing.B) {
	for _, topics := range []int{1, 5, 50} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			runHook(b, benchFetch(topics), 50*16<<10)
		})
	}
}

// BenchmarkProduceHookRefused: a Produce of 50 partitions of which half
// (25 topics) are refused, answered and merged later: the slow path.
func BenchmarkProduceHookRefused(b *testing.B) {
	f := newFilter(b, benchRules()...)
	ch, err := filter.NewChain(f)
	if err != nil {
		b.Fatal(err)
	}
	c, _ := testCtx(b, "alice")
	c.Log = discardLog
	b.ReportAllocs()
	// The filter strips each request, so each run needs a new one: they
	// are built a thousand at a time, off the clock.
	var reqs []*kmsg.ProduceRequest
	for i := range b.N {
		if len(reqs) == 0 {
			b.StopTimer()
			for range min(1000, b.N-i) {
				req := benchProduce(50, 1<<10)
				for i := range 25 {
					req.Topics[i].Topic = fmt.Sprintf("bob-%d", i)
				}
				reqs = append(reqs, req)
			}
			b.StartTimer()
		}
		req := reqs[len(reqs)-1]
		reqs = reqs[:len(reqs)-1]
		fr := filter.Request{Header: filter.Header{Key: wire.KeyProduce, Version: 9, CorrelationID: 1}, Body: req}
		if _, err := ch.OnRequest(c, ch.RequestMask(wire.KeyProduce, 9), &fr); err != nil {
			b.Fatal(err)
		}
		f.refused.Take(c, 1)
	}
}

// BenchmarkDecision: one decision, cached and not.
func BenchmarkDecision(b *testing.B) {
	e := newEngine(compile(benchRules()), DefaultCacheSize)
	b.Run("cached", func(b *testing.B) {
		e.allowed("alice", resTopic, "alice-orders", opWrite)
		b.ReportAllocs()
		for range b.N {
			if !e.allowed("alice", resTopic, "alice-orders", opWrite) {
				b.Fatal("denied")
			}
		}
	})
	b.Run("uncached/static", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if !e.decide("analytics", resTopic, "click-events", opRead) {
				b.Fatal("denied")
			}
		}
	})
	b.Run("uncached/template", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if !e.decide("alice", resTopic, "alice-orders", opWrite) {
				b.Fatal("denied")
			}
		}
	})
}

var discardLog = slog.New(slog.DiscardHandler)

// BenchmarkPassRequest: what letting an allowed request through unread
// costs the filter (filter.RequestSkimmer), per request: a Produce of one
// topic (only its first bytes are read) and a Fetch of 5 topics.
func BenchmarkPassRequest(b *testing.B) {
	f := newFilter(b, benchRules()...)
	c, _ := testCtx(b, "alice")
	for _, req := range []kmsg.Request{benchProduce(1, 1<<10), benchFetch(5)} {
		body := req.AppendTo(nil)
		h := filter.Header{Key: req.Key(), Version: req.GetVersion()}
		b.Run(kmsg.NameForKey(req.Key()), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if !f.PassRequest(c, h, body, true) {
					b.Fatal("an allowed request was not passed")
				}
			}
		})
	}
}
