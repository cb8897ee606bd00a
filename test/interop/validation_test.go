package interop

// Real clients with their own schema-registry serializers produce through a
// gateway running the record-validation filter of examples/validation.yaml,
// against a development registry (internal/devregistry, what `strait
// registry` serves). Each client registers its schemas with its own registry
// client, sends what its serializer makes (which must land, byte for byte)
// and a set of records the filter must refuse, and reports what it was told
// of each. The tests check every refused record came back as the client's
// own error for INVALID_RECORD, with the gateway's message wherever the
// client shows it, and that the broker holds exactly the valid records.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
	_ "github.com/straitgw/strait/internal/kafka/filters/validation" // registers record-validation
)

// The schemas every client registers. Each format has the schema of its
// orders topic (an Order: id and amount, both required) and an "other"
// schema, registered under another subject, that the client uses to make a
// record whose schema id the topic's subject does not know.
const (
	orderAvro       = `{"type":"record","name":"Order","namespace":"strait.interop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`
	otherAvro       = `{"type":"record","name":"OrderRef","namespace":"strait.interop","fields":[{"name":"id","type":"string"}]}`
	orderJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object",` +
		`"properties":{"id":{"type":"string"},"amount":{"type":"integer"}},"required":["id","amount"],"additionalProperties":false}`
	otherJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"OrderRef","type":"object",` +
		`"properties":{"id":{"type":"string"}},"required":["id"]}`
	orderProto = `syntax = "proto3";
package strait.interop;

message Order {
  string id = 1;
  int64 amount = 2;
}

message Refund {
  string order_id = 1;
  int64 cents = 2;
}
`
	otherProto = `syntax = "proto3";
package strait.interop.other;

message OrderRef {
  string id = 1;
}
`
)

// Registry schema types, as the REST API and the scripts name them.
const (
	fmtAvro     = "AVRO"
	fmtJSON     = "JSON"
	fmtProtobuf = "PROTOBUF"
)

// Payloads the scripts send as they are, or behind a valid prefix.
var (
	// badBodies follow a valid prefix (and, for Protobuf, the message
	// index [0]) but do not decode or validate: an Avro string whose
	// length runs past the end, a JSON order of the wrong shape, a
	// Protobuf field whose length runs past the end.
	badBodies = map[string][]byte{
		fmtAvro:     {0x50, 'a', 'b'},
		fmtJSON:     []byte(`{"id":5}`),
		fmtProtobuf: {0x0a, 0x10, 'a'},
	}
	// unknownID is a schema id the registry never handed out.
	unknownID = 987654321
	// noPrefix is a JSON order without the wire-format prefix.
	noPrefix      = `{"id":"o-plain","amount":1}`
	eventValid    = `{"event":"signup","user":42}`
	eventBroken   = `{"event":"signup",`
	orderValues   = []map[string]any{{"id": "o-1", "amount": 12}, {"id": "o-2", "amount": 3400}}
	otherValue    = map[string]any{"id": "o-ref"}
	refundValue   = map[string]any{"order_id": "o-1", "cents": 5}
	protoFiles    = map[string]string{"order.proto": orderProto, "order_ref.proto": otherProto}
	protoMessages = map[string]string{"order.proto": "strait.interop.Order", "order_ref.proto": "strait.interop.other.OrderRef"}
)

// valFormat is what a script is told about one format.
type valFormat struct {
	Topic       string `json:"topic"`
	Schema      string `json:"schema"`
	OtherSchema string `json:"other_schema"`
	// OtherSubject is where the other schema is registered: not the
	// topic's subject.
	OtherSubject string           `json:"other_subject"`
	Values       []map[string]any `json:"values"`
	OtherValue   map[string]any   `json:"other_value"`
	BadBody      []byte           `json:"bad_body"`
	// Descriptor and OtherDescriptor are the compiled Protobuf files
	// (serialized FileDescriptorProto), for clients that need message
	// classes rather than .proto text; Message and OtherMessage name the
	// message of each.
	Descriptor      []byte `json:"descriptor,omitempty"`
	OtherDescriptor []byte `json:"other_descriptor,omitempty"`
	Message         string `json:"message,omitempty"`
	OtherMessage    string `json:"other_message,omitempty"`
	// SecondMessage is the second message of the Protobuf file (message
	// indexes [1]), and SecondValue one of it.
	SecondMessage string         `json:"second_message,omitempty"`
	SecondValue   map[string]any `json:"second_value,omitempty"`
}

// valSpec is what a validation script is told to do; it reads it from the
// JSON file named by its one argument.
type valSpec struct {
	Bootstrap   string               `json:"bootstrap"`
	Registry    string               `json:"registry"`
	Formats     map[string]valFormat `json:"formats"`
	UnknownID   int                  `json:"unknown_id"`
	NoPrefix    string               `json:"no_prefix"`
	EventsTopic string               `json:"events_topic"`
	EventValid  string               `json:"event_valid"`
	EventBroken string               `json:"event_broken"`
}

// valResult is what a client reported of one record: the value it sent (or
// meant to, when its serializer failed) and the error it was given, "" if
// none.
type valResult struct {
	Case  string `json:"case"`
	Topic string `json:"topic"`
	Value []byte `json:"value"`
	Error string `json:"error"`
}

type valReport struct {
	Client  string      `json:"client"`
	Results []valResult `json:"results"`
}

// valWant is what should become of each record of a case: land, or come
// back with an error matching client (what the client says), while the
// gateway logs reason for it. None of the clients here shows the gateway's
// reason (see docs/validation-clients.md), so it is looked for in the
// gateway's log, where an operator finds it; TestValidationFranzGo's
// raw-produce checks it is in the Produce answer too.
type valWant struct {
	land   bool
	client *regexp.Regexp
	reason *regexp.Regexp
}

// Cases every client runs, per format F: F/valid (the serializer's own
// records), F/other-subject (a schema id registered, but not under the
// topic's subject), F/unknown-id, F/mismatch (a valid prefix, a payload
// that does not fit); for Protobuf, where the client can, also
// PROTOBUF/second-message (a record of the file's second message, message
// indexes [1]); and no-prefix (on the JSON topic), events/valid and
// events/broken.
const (
	caseValid        = "valid"
	caseOtherSubject = "other-subject"
	caseUnknownID    = "unknown-id"
	caseMismatch     = "mismatch"
)

// mismatchReasons are the filter's reasons for each format's bad body.
var mismatchReasons = map[string]string{
	fmtAvro:     `field \\?"id\\?": string of 40 bytes but only 2 bytes left`,
	fmtJSON:     `missing property 'amount'`,
	fmtProtobuf: `field \\?"id\\?": malformed string: unexpected end of data`,
}

// refused is the expectation of a refused record of case c: client is what
// the client says; the gateway's reason is the one for c, about topic.
func refused(client *regexp.Regexp, c, topic string) valWant {
	format, kind, _ := strings.Cut(c, "/")
	q := regexp.QuoteMeta(topic)
	var reason string
	switch {
	case kind == caseOtherSubject:
		reason = `schema id \d+ is not registered for subject ` + q + `-value`
	case kind == caseUnknownID:
		reason = fmt.Sprintf(`schema id %d is not registered`, unknownID)
	case kind == caseMismatch:
		reason = mismatchReasons[format]
	case c == "no-prefix":
		reason = `payload does not carry a schema id: first byte is 0x7b, want 0x00`
	case c == "events/broken":
		reason = `invalid JSON at byte 18: unexpected end of input in an object, want a key`
	case kind == "second-message":
		// 01 01: a count of -1.
		reason = `malformed protobuf message indexes: negative count -1`
	default:
		// No indexes: the message's first tag read as a count, the
		// next bytes as indexes.
		reason = `malformed protobuf message indexes: index \d+ is -\d+`
	}
	return valWant{client: client, reason: regexp.MustCompile(`value: ` + reason + ` \(topic ` + q + `, record 0 of the batch, rules\[\d\] \((orders|events)\*\)\)`)}
}

// valPlan is one client's run: the spec it is given and the topics it
// writes to.
type valPlan struct {
	spec   valSpec
	topics []string
}

// planValidation makes a client's spec: one orders topic per format (each
// topic has its own subject), one events topic, each with one partition so
// that what lands is in the order it was sent.
func planValidation(t *testing.T, e *env, regURL, client string, formats ...string) valPlan {
	t.Helper()
	n := time.Now().UnixNano() % 1e9
	p := valPlan{spec: valSpec{
		Bootstrap:   e.addr,
		Registry:    regURL,
		Formats:     map[string]valFormat{},
		UnknownID:   unknownID,
		NoPrefix:    noPrefix,
		EventsTopic: fmt.Sprintf("events-%s-%d", client, n),
		EventValid:  eventValid,
		EventBroken: eventBroken,
	}}
	for _, f := range formats {
		topic := fmt.Sprintf("orders-%s-%s-%d", client, strings.ToLower(f), n)
		vf := valFormat{
			Topic: topic, OtherSubject: topic + "-other",
			Values: orderValues, OtherValue: otherValue, BadBody: badBodies[f],
		}
		switch f {
		case fmtAvro:
			vf.Schema, vf.OtherSchema = orderAvro, otherAvro
		case fmtJSON:
			vf.Schema, vf.OtherSchema = orderJSONSchema, otherJSONSchema
		case fmtProtobuf:
			vf.Schema, vf.OtherSchema = orderProto, otherProto
			vf.Descriptor = compiledProto(t, "order.proto")
			vf.OtherDescriptor = compiledProto(t, "order_ref.proto")
			vf.Message, vf.OtherMessage = protoMessages["order.proto"], protoMessages["order_ref.proto"]
			vf.SecondMessage, vf.SecondValue = "strait.interop.Refund", refundValue
		}
		p.spec.Formats[f] = vf
		p.topics = append(p.topics, topic)
	}
	p.topics = append(p.topics, p.spec.EventsTopic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, topic := range p.topics {
		createTopicN(ctx, t, cl, topic, 1)
	}
	return p
}

// compiledProto compiles one of protoFiles and returns its file descriptor.
func compiledProto(t *testing.T, name string) []byte {
	t.Helper()
	fd := compileProto(t, name)
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(fd))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compileProto(t *testing.T, name string) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(protoFiles),
	}}
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	return files[0]
}

// startValidationEnv starts a development registry, kfake and a gateway
// whose only filter is the record-validation filter of
// examples/validation.yaml, pointed at the registry.
func startValidationEnv(t *testing.T) (*env, string) {
	t.Helper()
	srv, err := devregistry.Start(devregistry.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	node := exampleValidationConfig(t, srv.URL())
	e := startEnv(t, withFilter(func(log *slog.Logger) (filter.Filter, error) {
		return registry.Build("record-validation", node, registry.Env{Log: log})
	}))
	return e, srv.URL()
}

// exampleValidationConfig returns the config block of the record-validation
// filter in examples/validation.yaml with the registry URL replaced, so the
// tests check what the example promises.
func exampleValidationConfig(t *testing.T, regURL string) *yaml.Node {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "validation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		VirtualClusters []struct {
			Filters []struct {
				Type   string    `yaml:"type"`
				Config yaml.Node `yaml:"config"`
			} `yaml:"filters"`
		} `yaml:"virtual_clusters"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("examples/validation.yaml: %v", err)
	}
	for _, vc := range doc.VirtualClusters {
		for _, f := range vc.Filters {
			if f.Type != "record-validation" {
				continue
			}
			node := f.Config
			url := mappingValue(&node, "registry", "url")
			if url == nil {
				t.Fatal("examples/validation.yaml: the record-validation filter has no registry.url")
			}
			url.Value = regURL
			return &node
		}
	}
	t.Fatal("examples/validation.yaml has no record-validation filter")
	return nil
}

// mappingValue follows keys down nested mappings and returns the value
// node, or nil.
func mappingValue(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// runValidationScript runs a client script on p's spec and returns its
// report.
func runValidationScript(t *testing.T, p valPlan, cmd ...string) valReport {
	t.Helper()
	b, err := json.Marshal(p.spec)
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, nil, cmd[0], append(cmd[1:], specFile)...)
	var rep valReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%s printed no report (%v):\n%s", cmd[1], err, tail(string(out), 2000))
	}
	return rep
}

// checkValidation checks a client's report against want (by case) and
// that the broker holds exactly the records that should have landed, in
// the order sent. Every case in want must have been run.
func checkValidation(t *testing.T, e *env, p valPlan, rep valReport, want map[string]valWant) {
	t.Helper()
	landed := map[string][][]byte{}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Case] = true
		w, ok := want[r.Case]
		if !ok {
			t.Errorf("%s: case %s: no expectation (error %q)", rep.Client, r.Case, r.Error)
			continue
		}
		t.Logf("%s: %s to %s: %s", rep.Client, r.Case, r.Topic, orLanded(r.Error))
		switch {
		case w.land && r.Error != "":
			t.Errorf("%s: %s: %s, want it to land", rep.Client, r.Case, r.Error)
		case !w.land && r.Error == "":
			t.Errorf("%s: %s: %s landed, want it refused", rep.Client, r.Case, short(r.Value))
		case !w.land && !w.client.MatchString(r.Error):
			t.Errorf("%s: %s: the client said %q, want %s", rep.Client, r.Case, r.Error, w.client)
		case !w.land && w.reason != nil && !loggedRefusal(e, r.Topic, w.reason):
			t.Errorf("%s: %s: the gateway logged no refusal of %s for %s", rep.Client, r.Case, r.Topic, w.reason)
		}
		if w.land {
			landed[r.Topic] = append(landed[r.Topic], r.Value)
		}
	}
	for c := range want {
		if !seen[c] {
			t.Errorf("%s: case %s was not run", rep.Client, c)
		}
	}
	for _, topic := range p.topics {
		got := storedValues(t, e, topic)
		if len(got) != len(landed[topic]) {
			t.Errorf("%s: the broker holds %d records, want %d", topic, len(got), len(landed[topic]))
		}
		for i := range min(len(got), len(landed[topic])) {
			if string(got[i]) != string(landed[topic][i]) {
				t.Errorf("%s: record %d at the broker is %s, the client sent %s", topic, i, short(got[i]), short(landed[topic][i]))
			}
		}
	}
}

// loggedRefusal says whether the gateway logged a refused produce to topic
// for reason.
func loggedRefusal(e *env, topic string, reason *regexp.Regexp) bool {
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "record-validation: refused") && strings.Contains(line, " topic="+topic+" ") && reason.MatchString(line) {
			return true
		}
	}
	return false
}

func orLanded(err string) string {
	if err == "" {
		return "landed"
	}
	return err
}

// storedValues reads topic (one partition) straight from kfake: the values
// of every record it holds, in order.
func storedValues(t *testing.T, e *env, topic string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := partitionEnd(ctx, t, cl, topic)
	var got [][]byte
	for int64(len(got)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("read %d of the %d records stored in %s", len(got), end, topic)
			break
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s/%d from kfake: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	return got
}

// partitionEnd is the end offset of partition 0 of topic.
func partitionEnd(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1 // the end offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("end offset of %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("end offset of %s/%d: %v", topic, rp.Partition, err)
			}
			return rp.Offset
		}
	}
	t.Fatalf("end offset of %s: no partition in the answer", topic)
	return 0
}
