//go:build !race

// The race detector changes what escapes to the heap, so allocation bounds
// do not hold under it: this test is built without it only (go test
// without -race runs it).

package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// TestHotPathAllocations: an allowed Produce or Fetch, its decisions
// remembered, is checked without allocating.
func TestHotPathAllocations(t *testing.T) {
	f := newFilter(t, benchRules()...)
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := testCtx(t, "alice")
	for _, req := range []kmsg.Request{benchProduce(5, 1<<10), benchFetch(5)} {
		key, version := req.Key(), req.GetVersion()
		fr := new(filter.Request) // the proxy's, not the filter's
		run := func() {
			*fr = filter.Request{Header: filter.Header{Key: key, Version: version, CorrelationID: 1}, Body: req}
			if _, err := ch.OnRequest(c, ch.RequestMask(key, version), fr); err != nil || !fr.Untouched() {
				t.Fatalf("%T not allowed as it is: %v", req, err)
			}
		}
		run()
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Errorf("%T: %v allocations per request, want 0", req, n)
		}
	}
}

// TestPassRequestAllocations: letting an allowed Produce or Fetch through
// unread allocates nothing once the connection has decided its topics.
func TestPassRequestAllocations(t *testing.T) {
	f := newFilter(t, benchRules()...)
	c, _ := testCtx(t, "alice")
	produce, fetch := benchProduce(1, 1<<10), benchFetch(5)
	pb, fb := produce.AppendTo(nil), fetch.AppendTo(nil)
	hp := filter.Header{Key: wire.KeyProduce, Version: produce.Version}
	hf := filter.Header{Key: wire.KeyFetch, Version: fetch.Version}
	if !f.PassRequest(c, hp, pb[:64], false) || !f.PassRequest(c, hf, fb, true) {
		t.Fatal("allowed requests were not passed")
	}
	if n := testing.AllocsPerRun(100, func() {
		f.PassRequest(c, hp, pb[:64], false)
		f.PassRequest(c, hf, fb, true)
	}); n != 0 {
		t.Errorf("%v allocations per Produce and Fetch passed, want 0", n)
	}
}
