package proxy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// traceLog records filter calls, for requests from one client id only.
type traceLog struct {
	mu     sync.Mutex
	events []string
}

func (l *traceLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *traceLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

const traceClient = "tracer-client"

func traced(h filter.Header) bool { return h.ClientID != nil && *h.ClientID == traceClient }

// tracer logs every request and response it sees.
type tracer struct {
	name string
	keys []int16
	log  *traceLog
}

func (f *tracer) Name() string { return f.name }
func (f *tracer) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(f.keys...), Responses: filter.Keys(f.keys...)}
}

func (f *tracer) OnRequest(_ *filter.Context, req *filter.Request) error {
	if traced(req.Header) {
		f.log.add(fmt.Sprintf("%s:req:%s", f.name, kmsg.NameForKey(req.Header.Key)))
	}
	return nil
}

func (f *tracer) OnResponse(_ *filter.Context, resp *filter.Response) error {
	if traced(resp.Header) {
		f.log.add(fmt.Sprintf("%s:resp:%s", f.name, kmsg.NameForKey(resp.Header.Key)))
	}
	return nil
}

// refuseCreateTopics answers CreateTopics itself with POLICY_VIOLATION.
type refuseCreateTopics struct{ log *traceLog }

func (*refuseCreateTopics) Name() string { return "refuse-create-topics" }
func (*refuseCreateTopics) Interest() filter.Interest {
	k := filter.Keys(int16(kmsg.CreateTopics))
	return filter.Interest{Requests: k, Responses: k}
}

func (f *refuseCreateTopics) OnRequest(_ *filter.Context, req *filter.Request) error {
	if traced(req.Header) {
		f.log.add("refuse:req:CreateTopics")
	}
	in := req.Body.(*kmsg.CreateTopicsRequest)
	resp := in.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range in.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode = kerr.PolicyViolation.Code
		rt.ErrorMessage = kmsg.StringPtr("topics are created by the platform team")
		resp.Topics = append(resp.Topics, rt)
	}
	req.Respond(resp)
	return nil
}

// OnResponse must never run: the filter that answers does not see its own
// answer.
func (f *refuseCreateTopics) OnResponse(_ *filter.Context, resp *filter.Response) error {
	if traced(resp.Header) {
		f.log.add("refuse:resp:CreateTopics")
	}
	return nil
}

// TestFilterChainOrder checks the chain's contract: requests in order,
// responses in reverse, a short-circuit hides the request from later
// filters and its answer from itself and later filters, and the broker
// never sees a short-circuited request.
func TestFilterChainOrder(t *testing.T) {
	t.Parallel()
	log := &traceLog{}
	keys := []int16{int16(kmsg.Metadata), int16(kmsg.CreateTopics)}
	g := startGateway(t, func(o *Options) {
		o.Filters = []filter.Filter{
			&tracer{name: "A", keys: keys, log: log},
			&tracer{name: "B", keys: keys, log: log},
			&refuseCreateTopics{log: log},
			&tracer{name: "C", keys: keys, log: log},
		}
	})
	var created atomic.Int32
	g.broker.ControlKey(int16(kmsg.CreateTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		created.Add(1)
		return nil, nil, false
	})

	c := dialRaw(t, g.addr)
	send := func(req kmsg.Request, corr int32) kmsg.Response {
		c.write(requestFrame(req, corr, traceClient))
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		c.recv(corr, resp)
		return resp
	}

	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	send(meta, 1)
	want := []string{"A:req:Metadata", "B:req:Metadata", "C:req:Metadata", "C:resp:Metadata", "B:resp:Metadata", "A:resp:Metadata"}
	if got := log.take(); !slices.Equal(got, want) {
		t.Errorf("Metadata through the chain:\n got %v\nwant %v", got, want)
	}

	for _, v := range []int16{2, 5, 7} { // classic and flexible
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = v
		ct.TimeoutMillis = 1000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = "forbidden"
		rt.NumPartitions, rt.ReplicationFactor = 1, 1
		ct.Topics = append(ct.Topics, rt)
		resp := send(ct, int32(10+v)).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
			t.Errorf("CreateTopics v%d: %+v, want POLICY_VIOLATION", v, resp.Topics)
		}
		want := []string{"A:req:CreateTopics", "B:req:CreateTopics", "refuse:req:CreateTopics", "B:resp:CreateTopics", "A:resp:CreateTopics"}
		if got := log.take(); !slices.Equal(got, want) {
			t.Errorf("CreateTopics v%d through the chain:\n got %v\nwant %v", v, got, want)
		}
	}
	// The connection still relays in order after local answers.
	send(meta, 20)
	log.take()
	if n := created.Load(); n != 0 {
		t.Errorf("the broker saw %d CreateTopics requests, want 0", n)
	}
}

const (
	tenantPrefix  = "tenant-a."
	tenantCluster = "virtual-tenant-a"
)

// tenantTopics gives a client a view of its own topics under their short
// names: requests gain the tenant prefix, responses lose it, and topics
// of other tenants disappear. Metadata responses carry a virtual cluster
// id, so ApiVersions v5+ requests, which name the cluster the client
// believes it reached (KIP-1242), must carry the real one upstream.
type tenantTopics struct {
	realCluster atomic.Pointer[string]
}

func (*tenantTopics) Name() string { return "tenant-topics" }
func (*tenantTopics) Interest() filter.Interest {
	k := []filter.KeyRange{{Key: int16(kmsg.Metadata)}, {Key: int16(kmsg.Produce), MaxVersion: 12}}
	return filter.Interest{
		Requests:  append(k, filter.KeyRange{Key: int16(kmsg.ApiVersions), MinVersion: 5}),
		Responses: k,
	}
}

func (f *tenantTopics) OnRequest(_ *filter.Context, req *filter.Request) error {
	switch r := req.Body.(type) {
	case *kmsg.MetadataRequest:
		for i := range r.Topics {
			if r.Topics[i].Topic != nil {
				r.Topics[i].Topic = kmsg.StringPtr(tenantPrefix + *r.Topics[i].Topic)
			}
		}
	case *kmsg.ProduceRequest:
		for i := range r.Topics {
			r.Topics[i].Topic = tenantPrefix + r.Topics[i].Topic
		}
	case *kmsg.ApiVersionsRequest:
		if r.ClusterID != nil && *r.ClusterID == tenantCluster {
			r.ClusterID = f.realCluster.Load()
		}
	}
	return nil
}

func (f *tenantTopics) OnResponse(_ *filter.Context, resp *filter.Response) error {
	switch r := resp.Body.(type) {
	case *kmsg.MetadataResponse:
		if r.ClusterID != nil {
			f.realCluster.Store(r.ClusterID)
		}
		r.ClusterID = kmsg.StringPtr(tenantCluster)
		keep := r.Topics[:0]
		for _, t := range r.Topics {
			if t.Topic != nil && strings.HasPrefix(*t.Topic, tenantPrefix) {
				t.Topic = kmsg.StringPtr(strings.TrimPrefix(*t.Topic, tenantPrefix))
				keep = append(keep, t)
			}
		}
		r.Topics = keep
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			r.Topics[i].Topic = strings.TrimPrefix(r.Topics[i].Topic, tenantPrefix)
		}
	}
	return nil
}

// TestFilterRewritesRequestsAndResponses produces with a real client
// through a filter that renames topics both ways.
func TestFilterRewritesRequestsAndResponses(t *testing.T) {
	t.Parallel()
	g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{&tenantTopics{}} },
		kfake.SeedTopics(2, tenantPrefix+"orders", "tenant-b.secrets"))
	ctx := testCtx(t, 20*time.Second)
	// Produce v13 names topics by id only; this filter renames by name.
	vers := kversion.Stable()
	vers.SetMaxKeyVersion(int16(kmsg.Produce), 12)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.MaxVersions(vers), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("order-%d", i))}).FirstErr(); err != nil {
			t.Fatalf("produce through the renaming filter: %v", err)
		}
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if meta.ClusterID == nil || *meta.ClusterID != tenantCluster {
		t.Errorf("cluster id %v, want the filter's", meta.ClusterID)
	}
	var names []string
	for _, mt := range meta.Topics {
		names = append(names, *mt.Topic)
	}
	if !slices.Equal(names, []string{"orders"}) {
		t.Errorf("client sees topics %v, want [orders]", names)
	}

	// Upstream, the records are in the tenant's real topic.
	direct, err := kgo.NewClient(kgo.SeedBrokers(g.broker.ListenAddrs()...), kgo.ConsumeTopics(tenantPrefix+"orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	got := map[string]bool{}
	for len(got) < 20 {
		fs := direct.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("found %d of 20 records in %s", len(got), tenantPrefix+"orders")
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
}

// hideGroups answers ListGroups itself from a request of its own sent
// upstream, leaving out groups whose names start with "hidden-".
type hideGroups struct{}

func (hideGroups) Name() string { return "hide-groups" }
func (hideGroups) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(int16(kmsg.ListGroups))}
}

func (hideGroups) OnRequest(c *filter.Context, req *filter.Request) error {
	own := kmsg.NewPtrListGroupsRequest()
	kresp, err := c.Upstream.Send(c.Ctx, own)
	if err != nil {
		return fmt.Errorf("listing groups upstream: %w", err)
	}
	resp := kresp.(*kmsg.ListGroupsResponse)
	keep := resp.Groups[:0]
	for _, gr := range resp.Groups {
		if !strings.HasPrefix(gr.Group, "hidden-") {
			keep = append(keep, gr)
		}
	}
	resp.Groups = keep
	req.Respond(resp)
	return nil
}

// fetchTopics records the names of the topics Fetch v13+ requests name by
// id, resolved through the filter context.
type fetchTopics struct {
	mu    sync.Mutex
	names map[string]bool
	errs  []error
}

func (*fetchTopics) Name() string { return "fetch-topics" }
func (*fetchTopics) Interest() filter.Interest {
	return filter.Interest{Requests: []filter.KeyRange{{Key: int16(kmsg.Fetch), MinVersion: 13}}}
}

func (f *fetchTopics) OnRequest(c *filter.Context, req *filter.Request) error {
	for _, t := range req.Body.(*kmsg.FetchRequest).Topics {
		name, err := c.Topics.TopicName(c.Ctx, t.TopicID)
		f.mu.Lock()
		if err != nil {
			f.errs = append(f.errs, err)
		} else {
			f.names[name] = true
		}
		f.mu.Unlock()
	}
	return nil
}

func (f *fetchTopics) seen(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.names[name]
}

// TestFilterUpstreamAndTopicIDs covers a filter's own requests upstream and
// topic id resolution for Fetch v13+.
func TestFilterUpstreamAndTopicIDs(t *testing.T) {
	t.Parallel()
	ft := &fetchTopics{names: map[string]bool{}}
	g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{hideGroups{}, ft} },
		kfake.SeedTopics(1, "ids-first"))
	ctx := testCtx(t, 20*time.Second)

	t.Run("Upstream.Send", func(t *testing.T) {
		var listed atomic.Int32
		g.broker.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) {
			g.broker.KeepControl()
			listed.Add(1)
			return nil, nil, false
		})
		// Two groups exist upstream, made by committing offsets directly
		// (by topic name: before OffsetCommit v10).
		vers := kversion.Stable()
		vers.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
		direct, err := kgo.NewClient(kgo.SeedBrokers(g.broker.ListenAddrs()...), kgo.MaxVersions(vers))
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		for _, group := range []string{"visible-group", "hidden-group"} {
			oc := kmsg.NewPtrOffsetCommitRequest()
			oc.Group = group
			oc.Generation = -1
			ot := kmsg.NewOffsetCommitRequestTopic()
			ot.Topic = "ids-first"
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Offset = 0
			ot.Partitions = append(ot.Partitions, op)
			oc.Topics = append(oc.Topics, ot)
			resp, err := oc.RequestWith(ctx, direct)
			if err != nil {
				t.Fatal(err)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						t.Fatalf("committing for %s: %v", group, err)
					}
				}
			}
		}
		before := listed.Load()

		c := dialRaw(t, g.addr)
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 3
		resp := c.roundTrip(req, 5).(*kmsg.ListGroupsResponse)
		var groups []string
		for _, gr := range resp.Groups {
			groups = append(groups, gr.Group)
		}
		if !slices.Equal(groups, []string{"visible-group"}) {
			t.Errorf("client sees groups %v, want [visible-group]", groups)
		}
		if listed.Load() == before {
			t.Error("the filter's own ListGroups never reached the broker")
		}
	})

	t.Run("Topics.TopicName", func(t *testing.T) {
		consume := func(topic string) {
			t.Helper()
			cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.ConsumeTopics(topic), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			for n := 0; n == 0; {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("nothing consumed from %s", topic)
				}
				n = fs.NumRecords()
			}
		}
		consume("ids-first")
		// A topic born after the gateway cached the first one's id: the
		// resolver must look again on a miss.
		consume("ids-later")
		for _, name := range []string{"ids-first", "ids-later"} {
			if !ft.seen(name) {
				t.Errorf("the filter never resolved %s from a Fetch topic id", name)
			}
		}
		ft.mu.Lock()
		errs := ft.errs
		ft.mu.Unlock()
		if len(errs) != 0 {
			t.Errorf("resolution errors: %v", errs)
		}
		if _, err := g.vc.TopicName(ctx, [16]byte{1, 2, 3}); err == nil {
			t.Error("an unknown topic id resolved")
		}
	})
}

// failing ends connections: with an error from OnRequest (DescribeGroups),
// by panicking in OnRequest (ListGroups) or OnResponse (DescribeCluster),
// or by replacing a request with one of another key (DescribeConfigs).
type failing struct{}

func (failing) Name() string { return "failing" }
func (failing) Interest() filter.Interest {
	return filter.Interest{
		Requests:  filter.Keys(int16(kmsg.DescribeGroups), int16(kmsg.ListGroups), int16(kmsg.DescribeConfigs)),
		Responses: filter.Keys(int16(kmsg.DescribeCluster)),
	}
}

func (failing) OnRequest(_ *filter.Context, req *filter.Request) error {
	switch req.Header.Key {
	case int16(kmsg.ListGroups):
		panic("filter bug on a request")
	case int16(kmsg.DescribeConfigs):
		req.Body = kmsg.NewPtrListGroupsRequest()
		return nil
	}
	return errors.New("no")
}

func (failing) OnResponse(*filter.Context, *filter.Response) error {
	panic("filter bug on a response")
}

// TestFilterErrorEndsConnection: a filter's error, panic or unusable
// request closes that connection only, counted as a filter error.
func TestFilterErrorEndsConnection(t *testing.T) {
	t.Parallel()
	g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{failing{}} })
	other := dialRaw(t, g.addr)
	other.metadataWorks(1)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g"}
	for i, req := range []kmsg.Request{dg, kmsg.NewPtrListGroupsRequest(), kmsg.NewPtrDescribeClusterRequest(), kmsg.NewPtrDescribeConfigsRequest()} {
		t.Run(kmsg.NameForKey(req.Key()), func(t *testing.T) {
			c := dialRaw(t, g.addr)
			c.send(req, 1)
			c.expectClosed()
			g.waitErr(t, errFilter, float64(i+1))
			other.metadataWorks(int32(2 + i))
		})
	}
}

// narrowMetadata replaces a Metadata request's body with a new request
// asking for one topic only, and checks that the response pairs with the
// replacement.
type narrowMetadata struct {
	mu      sync.Mutex
	paired  int
	wrongly int
}

func (*narrowMetadata) Name() string { return "narrow-metadata" }
func (*narrowMetadata) Interest() filter.Interest {
	k := filter.Keys(int16(kmsg.Metadata))
	return filter.Interest{Requests: k, Responses: k}
}

func (*narrowMetadata) OnRequest(_ *filter.Context, req *filter.Request) error {
	if !traced(req.Header) {
		return nil
	}
	in := req.Body.(*kmsg.MetadataRequest)
	out := kmsg.NewPtrMetadataRequest()
	out.Version = in.Version
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("narrow-only")
	out.Topics = append(out.Topics, mt)
	req.Body = out
	return nil
}

func (f *narrowMetadata) OnResponse(_ *filter.Context, resp *filter.Response) error {
	if !traced(resp.Header) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := resp.Request.(*kmsg.MetadataRequest); ok && len(r.Topics) == 1 && *r.Topics[0].Topic == "narrow-only" {
		f.paired++
	} else {
		f.wrongly++
	}
	return nil
}

// TestFilterReplacesRequestBody: what Body holds after the chain is what
// goes upstream, and what the response is paired with.
func TestFilterReplacesRequestBody(t *testing.T) {
	t.Parallel()
	f := &narrowMetadata{}
	g := startGateway(t, func(o *Options) { o.Filters = []filter.Filter{f} },
		kfake.SeedTopics(1, "narrow-only", "narrow-other"))
	c := dialRaw(t, g.addr)
	for i, v := range []int16{1, 9, 12} { // classic and flexible
		req := kmsg.NewPtrMetadataRequest() // all topics
		req.Version = v
		c.write(requestFrame(req, int32(i), traceClient))
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = v
		c.recv(int32(i), resp)
		var names []string
		for _, mt := range resp.Topics {
			names = append(names, *mt.Topic)
		}
		if !slices.Equal(names, []string{"narrow-only"}) {
			t.Errorf("Metadata v%d: topics %v, want the replacement's [narrow-only]", v, names)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paired != 3 || f.wrongly != 0 {
		t.Errorf("responses paired with the replacement request %d times and with another %d times, want 3 and 0", f.paired, f.wrongly)
	}
}
