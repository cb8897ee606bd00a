package authz

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// build decodes a config block as the gateway does, through the filter
// registry: strictly, then Validate, then New.
func build(t *testing.T, src string) (*Filter, error) {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	f, err := registry.Build(TypeName, n.Content[0], registry.Env{})
	if err != nil {
		return nil, err
	}
	return f.(*Filter), nil
}

func TestRegistryBuild(t *testing.T) {
	f, err := build(t, `
rules:
  - effect: allow
    principals: ["*"]
    resource: topic
    names: ["{principal}-*"]
    operations: [ALL]
  - {effect: deny, principals: [mallory], resource: topic, names: ["*"], operations: [WRITE]}
allow_unknown_keys: [DescribeAcls, "43"]
cache_size: 100
`)
	if err != nil {
		t.Fatal(err)
	}
	if !f.allowUnknown[29] || !f.allowUnknown[43] || f.allowUnknown[30] {
		t.Errorf("allowed unknown keys: 29 %v, 43 %v, 30 %v", f.allowUnknown[29], f.allowUnknown[43], f.allowUnknown[30])
	}
	if f.engine.Load().cache.half != 50 {
		t.Errorf("cache half size %d, want 50", f.engine.Load().cache.half)
	}
	if !f.engine.Load().allowed("alice", resTopic, "alice-x", opRead) || f.engine.Load().allowed("mallory", resTopic, "mallory-x", opWrite) {
		t.Error("the rules were not applied as written")
	}
}

func TestRegistryErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{rules: [{effect: allow, principal: [a], resource: topic, names: [t], operations: [READ]}]}`, "rules[0].principal: unknown setting"},
		{`{rules: [{effect: allow, principals: a, resource: topic, names: [t], operations: [READ]}]}`, "rules[0].principals: must be a list"},
		{`{rules: []}`, "rules: is empty"},
		{`{rules: [{effect: allow, principals: [a], resource: topic, names: [t], operations: [READ]}], allow_unknown_keys: [Produce]}`,
			"allow_unknown_keys[0]: Produce is checked by the filter"},
		{`{rules: [{effect: allow, principals: [a], resource: topic, names: [t], operations: [READ]}], allow_unknown_keys: [ApiVersions]}`,
			"allow_unknown_keys[0]: ApiVersions is checked by the filter (or always allowed)"},
		{`{rules: [{effect: allow, principals: [a], resource: topic, names: [t], operations: [READ]}], allow_unknown_keys: [DescribeStuff]}`,
			`allow_unknown_keys[0]: "DescribeStuff" is not an API key`},
		{`{rules: [{effect: allow, principals: [a], resource: topic, names: [t], operations: [READ]}], allow_unknown_keys: ["999"]}`,
			"allow_unknown_keys[0]: 999 is not an API key Strait knows"},
	} {
		_, err := build(t, c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\nerror %v\nwant %q", c.src, err, c.want)
		}
	}
	var n yaml.Node
	if _, err := registry.Build(TypeName, &n, registry.Env{}); err == nil || !strings.Contains(err.Error(), "docs/security.md") {
		t.Errorf("missing config block: %v", err)
	}
}

func TestInterest(t *testing.T) {
	f, err := New(Config{Rules: aliceRules(), AllowUnknownKeys: []string{"DescribeAcls"}})
	if err != nil {
		t.Fatal(err)
	}
	in := f.Interest()
	has := func(rs []filter.KeyRange, k int16) bool {
		return slices.ContainsFunc(rs, func(r filter.KeyRange) bool { return r.Key == k })
	}
	for _, k := range []int16{wire.KeyApiVersions, wire.KeySASLHandshake, keySASLAuthenticate, keyGetTelemetrySubscriptions, keyPushTelemetry, 29} {
		if has(in.Requests, k) {
			t.Errorf("subscribes to %s requests, which it lets through", wire.KeyName(k))
		}
	}
	for k := int16(0); k < wire.MaxKeys; k++ {
		if !wire.KnownKey(k) || alwaysAllowed(k) || k == 29 {
			continue
		}
		if !has(in.Requests, k) {
			t.Errorf("does not see %s requests", wire.KeyName(k))
		}
		if _, checked := handlers[k]; checked != has(in.Responses, k) {
			t.Errorf("%s: checked %v, sees responses %v", wire.KeyName(k), checked, has(in.Responses, k))
		}
	}
	for _, r := range in.Requests {
		if r.MinVersion != 0 || r.MaxVersion != 0 {
			t.Errorf("%s: subscribes to versions %d..%d, not all", wire.KeyName(r.Key), r.MinVersion, r.MaxVersion)
		}
	}
}

// Each check was written for the versions Strait reads today; a newer
// franz-go that reads more makes this fail, so that the new versions are
// read and checked before the bound moves.
func TestHandlersCoverEveryVersion(t *testing.T) {
	for k, h := range handlers {
		if h.maxVersion != wire.MaxVersion(k) {
			t.Errorf("%s: checked up to v%d, Strait reads up to v%d", wire.KeyName(k), h.maxVersion, wire.MaxVersion(k))
		}
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	f := newFilter(t, allow(list("*"), "cluster", nil, "ALL"))
	c, logs := testCtx(t, "admin")
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = 3
	resp := send(t, f, c, req).mustAnswer().(*kmsg.DescribeACLsResponse)
	if resp.ErrorCode != codeClusterAuth || resp.ErrorMessage == nil || *resp.ErrorMessage != unknownMessage {
		t.Errorf("answer %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	if !strings.Contains(logs.String(), "api=DescribeACLs") || !strings.Contains(logs.String(), "allow_unknown_keys") {
		t.Errorf("log:\n%s", logs)
	}
	// ElectLeaders has a top-level error code from v1 only.
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version = 1
	if r := send(t, f, c, el).mustAnswer().(*kmsg.ElectLeadersResponse); r.ErrorCode != codeClusterAuth {
		t.Errorf("ElectLeaders v1: %d", r.ErrorCode)
	}
	el.Version = 0
	if err := sendErr(t, f, c, el); !strings.Contains(err.Error(), "cannot carry an error") {
		t.Errorf("ElectLeaders v0: %v", err)
	}
	// CreateAcls answers per creation only.
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Version = 3
	sendErr(t, f, c, ca)
}

func TestUnknownKeyAllowed(t *testing.T) {
	f, err := New(Config{Rules: aliceRules(), AllowUnknownKeys: []string{"describeacls"}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := testCtx(t, "")
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = 3
	x := send(t, f, c, req)
	if x.answered() != nil || x.fr.Body != req {
		t.Error("a listed key was not let through")
	}
}

func TestMetrics(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	c, _ := testCtx(t, "alice")
	vc := c.VirtualCluster
	send(t, f, c, produceOf(9, map[string][]int32{"alice-a": {0, 1}, "alice-b": {0}, "bob-x": {0}}))
	send(t, f, c, kmsg.NewPtrDescribeACLsRequest())
	if got := testutil.ToFloat64(decisionsTotal.WithLabelValues(vc, "allowed")); got != 2 {
		t.Errorf("allowed %v, want 2 (one per topic)", got)
	}
	if got := testutil.ToFloat64(decisionsTotal.WithLabelValues(vc, "denied")); got != 2 {
		t.Errorf("denied %v, want 2", got)
	}
}

// A body of another type than its key says is a bug in the proxy: the
// connection ends rather than the request passing unchecked.
func TestWrongBodyEndsTheConnection(t *testing.T) {
	f := newFilter(t, aliceRules()...)
	for key, h := range handlers {
		wrong := kmsg.Request(kmsg.NewPtrApiVersionsRequest())
		c, _ := testCtx(t, "alice")
		a := f.newCall(c, &filter.Request{Header: filter.Header{Key: key}, Body: wrong})
		if err := h.check(&a); err == nil || !strings.Contains(err.Error(), "decoded as") {
			t.Errorf("%s check: %v", wire.KeyName(key), err)
		}
		if resp, err := h.refuse(wrong, codeTopicAuth); err == nil && resp.Key() != key {
			t.Errorf("%s refuse: a %T", wire.KeyName(key), resp)
		}
	}
	// Through OnRequest, at a version newer than the filter reads, the
	// refusal's error ends the connection too.
	c, _ := testCtx(t, "alice")
	err := f.OnRequest(c, &filter.Request{Header: filter.Header{Key: wire.KeyProduce, Version: 99}, Body: kmsg.NewPtrApiVersionsRequest()})
	if err == nil {
		t.Error("a wrong body at a newer version passed")
	}
}

// TestReload: new rules decide the next request of a connection that took
// decisions under the old ones; a change to allow_unknown_keys is refused
// and leaves the old rules in force.
func TestReload(t *testing.T) {
	f := newFilter(t, allow(list("alice"), "topic", list("alice-*"), "ALL"))
	c, _ := testCtx(t, "alice")
	produce := func(topic string) bool {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks = 9, -1
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = topic
		pt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, 70)}}
		r.Topics = append(r.Topics, pt)
		return send(t, f, c, r).untouched()
	}
	if !produce("alice-a") || produce("shared-a") {
		t.Fatal("the first rules do not decide as written")
	}
	apply, err := f.PrepareReload(newFilter(t, allow(list("alice"), "topic", list("shared-*"), "ALL")))
	if err != nil {
		t.Fatalf("PrepareReload: %v", err)
	}
	if !produce("alice-a") {
		t.Error("preparing a reload changed the rules")
	}
	apply()
	if produce("alice-a") || !produce("shared-a") {
		t.Error("after the reload the connection still decides by the old rules")
	}
	withUnknown, err := New(Config{Rules: []Rule{allow(list("alice"), "topic", list("alice-*"), "ALL")}, AllowUnknownKeys: []string{"DescribeAcls"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.PrepareReload(withUnknown); err == nil || !strings.Contains(err.Error(), "allow_unknown_keys") {
		t.Errorf("a reload changing allow_unknown_keys: %v, want it refused", err)
	}
	if !produce("shared-a") {
		t.Error("a refused reload changed the rules")
	}
}
