package interop

// Real clients with their own serializers produce through a gateway running
// the field-encryption filter of examples/field-encryption.yaml, against a
// development registry (internal/devregistry, what `strait registry`
// serves). For every record the tests check three things:
//
//   - the broker holds it with each configured field (ssn, and in Avro the
//     field the schema tags PII) as ciphertext, no plaintext of it in any
//     byte of the record, every other byte as the client wrote it, and a
//     third-party reader still decodes it with the registered schema;
//   - read through the gateway, by the same client and by franz-go, it is
//     exactly what the client wrote, byte for byte;
//   - the marker header is on the broker's copy, first, and on no record
//     read through the gateway.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
	_ "github.com/straitgw/strait/internal/kafka/filters/fieldencryption" // registers field-encryption
	"github.com/straitgw/strait/internal/kms/vault"
)

const (
	// fieldsMarker is the header the filter puts first on every record
	// whose fields it encrypted.
	fieldsMarker = "strait.fields"
	// gcmTagLen is what AES-GCM adds to each encrypted value.
	gcmTagLen = 16
	// exampleKEK is the KEK examples/field-encryption.yaml names.
	exampleKEK = "demo-kek"
)

// The schemas of the people topics. Avro's email is tagged PII, which the
// example's pii-avro* rule encrypts besides ssn.
const (
	personAvro = `{"type":"record","name":"Person","namespace":"strait.interop","fields":[` +
		`{"name":"id","type":"string"},{"name":"status","type":"string"},{"name":"ssn","type":"string"},` +
		`{"name":"email","type":["null","string"],"default":null,"confluent:tags":["PII"]},` +
		`{"name":"visits","type":"long"},{"name":"notes","type":"string"}]}`
	personJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Person","type":"object",` +
		`"properties":{"id":{"type":"string"},"status":{"type":"string"},"ssn":{"type":"string"},` +
		`"visits":{"type":"integer"},"notes":{"type":"string"}},` +
		`"required":["id","status","ssn","visits","notes"],"additionalProperties":false}`
	personProto = `syntax = "proto3";
package strait.interop.pii;

message Person {
  string id = 1;
  string status = 2;
  string ssn = 3;
  string notes = 4;
  int32 visits = 5;
}
`
	personProtoFile    = "person.proto"
	personProtoMessage = "strait.interop.pii.Person"
	// personProtoTagged is personProto with an email tagged PII, which
	// the example's pii-proto* rule encrypts besides ssn. Clients do not
	// register confluent/meta.proto: registries supply it.
	personProtoTagged = `syntax = "proto3";
package strait.interop.pii;

import "confluent/meta.proto";

message Person {
  string id = 1;
  string status = 2;
  string ssn = 3;
  string notes = 4;
  int32 visits = 5;
  string email = 6 [(confluent.field_meta).tags = "PII"];
}
`
)

// personProtoFields are the field numbers of personProto's encrypted
// fields.
var personProtoFields = map[string]protowire.Number{"ssn": 3, "email": 6}

// fieldCase is one topic a client writes: the values it produces (as JSON
// objects) and the fields the filter must encrypt in them.
type fieldCase struct {
	Format     string           `json:"format"` // the registry's schema type; "" for plain JSON
	Topic      string           `json:"topic"`
	Schema     string           `json:"schema,omitempty"`
	Descriptor []byte           `json:"descriptor,omitempty"`
	Message    string           `json:"message,omitempty"`
	Values     []map[string]any `json:"values"`
	// secret are the fields the filter encrypts.
	secret []string
	// codec is what the client compresses with (the filter compresses
	// the batches it rewrites the same way); idempotent says its batches
	// carry a producer id (which the filter keeps).
	codec      string
	idempotent bool
	// writesDefaults says the client's Protobuf encoder writes a string
	// field set to "" (proto3 encoders usually leave it out).
	writesDefaults bool
}

// fieldSpec is what a client script is told.
type fieldSpec struct {
	Gateway  string      `json:"gateway"`
	Broker   []string    `json:"broker"`
	Registry string      `json:"registry"`
	TimeoutS int         `json:"timeout_s"`
	Cases    []fieldCase `json:"cases"`
}

// fieldRecord is a record as a client reports it: what it produced, or
// read and decoded.
type fieldRecord struct {
	Key     []byte         `json:"key"`
	Value   []byte         `json:"value"`
	Headers []header       `json:"headers"`
	Decoded map[string]any `json:"decoded"`
	Error   string         `json:"error"` // what the client's decoder said
}

// fieldReport is what a client script prints.
type fieldReport struct {
	Client string   `json:"client"`
	Errors []string `json:"errors"`
	Cases  []struct {
		Topic    string        `json:"topic"`
		Produced []fieldRecord `json:"produced"`
		Broker   []fieldRecord `json:"broker"`
		Gateway  []fieldRecord `json:"gateway"`
	} `json:"cases"`
}

// personValues are the records of a client's people topic in a format.
// Each has an ssn; Avro's have an email, one of them null (a null field is
// left as it is). Protobuf has a record with an empty ssn, which most
// encoders leave off the wire: then it is stored as sent, with no marker.
func personValues(client, format string) []map[string]any {
	vs := []map[string]any{
		{"id": client + "-1", "status": "ACTIVE", "ssn": "123-45-6789", "visits": 3, "notes": "café \"quoted\" ☕ " + strings.Repeat("n", 200)},
		{"id": client + "-2", "status": "CLOSED", "ssn": "987-65-4321", "visits": 0, "notes": ""},
	}
	switch format {
	case fmtAvro:
		vs[0]["email"] = "ann@example.com"
		vs[1]["email"] = nil
	case fmtProtobuf:
		vs = append(vs, map[string]any{"id": client + "-3", "status": "NEW", "ssn": "", "visits": 7, "notes": "no ssn on the wire"})
	}
	return vs
}

// newFieldCase makes the case of a client's people topic in a format; the
// topic is created with one partition, so records keep their order.
func newFieldCase(t *testing.T, e *env, client, format string) fieldCase {
	t.Helper()
	prefix := map[string]string{fmtAvro: "pii-avro", fmtProtobuf: "pii-proto", fmtJSON: "pii-json", "": "pii-json"}[format]
	c := fieldCase{
		Format: format,
		Topic:  fmt.Sprintf("%s-%s-%d", prefix, client, time.Now().UnixNano()%1e9),
		Values: normalized(t, personValues(client, format)),
		secret: []string{"ssn"},
	}
	switch format {
	case fmtAvro:
		c.Schema = personAvro
		c.secret = append(c.secret, "email")
	case fmtJSON:
		c.Schema = personJSONSchema
	case fmtProtobuf:
		c.Schema, c.Descriptor, c.Message = personProto, personDescriptor(t), personProtoMessage
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	createTopicN(ctx, t, cl, c.Topic, 1)
	return c
}

// normalized returns values as a JSON decoder gives them back (numbers as
// float64), to compare with what clients decode.
func normalized(t *testing.T, values []map[string]any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// personDescriptor compiles personProto into a FileDescriptorProto.
func personDescriptor(t *testing.T) []byte {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{personProtoFile: personProto}),
	}}
	files, err := c.Compile(context.Background(), personProtoFile)
	if err != nil {
		t.Fatalf("compiling %s: %v", personProtoFile, err)
	}
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(files[0]))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tagProtoEmail makes a Protobuf case's schema personProtoTagged and gives
// every value an email. (confluent-kafka-python 1.7's serializer cannot
// write it: it looks the imported file up as a registered subject.)
func tagProtoEmail(c *fieldCase) {
	c.Schema, c.Descriptor, c.Message = personProtoTagged, nil, ""
	c.secret = append(c.secret, "email")
	for i, v := range c.Values {
		v["email"] = fmt.Sprintf("person%d@example.com", i+1)
	}
}

// sealed reports whether the filter encrypts field of value i: a null
// value is left alone, and so is a Protobuf string at its default when
// the client's encoder leaves it off the wire.
func (c *fieldCase) sealed(i int, field string) bool {
	v, ok := c.Values[i][field]
	if !ok || v == nil {
		return false
	}
	return !(c.Format == fmtProtobuf && v == "" && !c.writesDefaults)
}

// startFieldEnv starts a development registry, a vault with the example's
// KEK, kfake and a gateway whose only filter is the field-encryption filter
// of examples/field-encryption.yaml, pointed at the registry and the vault.
func startFieldEnv(t *testing.T) (*env, string) {
	t.Helper()
	srv, err := devregistry.Start(devregistry.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	dir := filepath.Join(t.TempDir(), "vault")
	if _, err := vault.CreateKey(dir, exampleKEK); err != nil {
		t.Fatal(err)
	}
	node := exampleFieldConfig(t, srv.URL(), dir)
	e := startEnv(t, withFilter(func(log *slog.Logger) (filter.Filter, error) {
		return registry.Build("field-encryption", node, registry.Env{Log: log})
	}))
	return e, srv.URL()
}

// exampleFieldConfig returns the config block of the field-encryption
// filter in examples/field-encryption.yaml with the registry URL and the
// vault path replaced, so the tests check what the example promises.
func exampleFieldConfig(t *testing.T, regURL, vaultDir string) *yaml.Node {
	t.Helper()
	const path = "../../examples/field-encryption.yaml"
	b, err := os.ReadFile(path)
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
		t.Fatalf("%s: %v", path, err)
	}
	for _, vc := range doc.VirtualClusters {
		for _, f := range vc.Filters {
			if f.Type != "field-encryption" {
				continue
			}
			node := f.Config
			for _, set := range []struct {
				keys  []string
				value string
			}{{[]string{"registry", "url"}, regURL}, {[]string{"kms", "path"}, vaultDir}} {
				n := mappingValue(&node, set.keys...)
				if n == nil {
					t.Fatalf("%s: the field-encryption filter has no %s", path, strings.Join(set.keys, "."))
				}
				n.Value = set.value
			}
			return &node
		}
	}
	t.Fatalf("%s has no field-encryption filter", path)
	return nil
}

// TestFieldEncryption runs every client against one gateway.
func TestFieldEncryption(t *testing.T) {
	e, regURL := startFieldEnv(t)
	t.Run("kafkajs", func(t *testing.T) {
		needKafkaJS(t)
		err := checkDep("confluent-schema-registry", probeCmd("node", "-e",
			"try { require.resolve('./node/node_modules/@kafkajs/confluent-schema-registry') } catch { console.error('no @kafkajs/confluent-schema-registry in test/interop/node/node_modules'); process.exit(1) }"))
		needDep(t, "the @kafkajs/confluent-schema-registry package", err, "npm ci --prefix test/interop/node")
		t.Parallel()
		// The package writes Protobuf records without message indexes,
		// which the filter must read (and write back) as the schema's
		// first message.
		cases := []fieldCase{newFieldCase(t, e, "kafkajs", fmtAvro), newFieldCase(t, e, "kafkajs", fmtProtobuf), newFieldCase(t, e, "kafkajs", fmtJSON)}
		tagProtoEmail(&cases[1])
		for i := range cases {
			// protobufjs writes a field set to its default, so the
			// empty ssn is on the wire, and encrypted.
			cases[i].codec, cases[i].writesDefaults = "gzip", true
		}
		runFieldClient(t, e, regURL, []string{"node", "node/fieldencryption.js"}, cases...)
	})
	t.Run("confluent-kafka-python", func(t *testing.T) {
		needPython(t, "confluent_kafka", "python3-confluent-kafka")
		needPython(t, "requests", "python3-requests")
		needPython(t, "jsonschema", "python3-jsonschema")
		needPython(t, "google.protobuf", "python3-protobuf")
		t.Parallel()
		cases := []fieldCase{newFieldCase(t, e, "confluent", fmtProtobuf), newFieldCase(t, e, "confluent", fmtJSON)}
		for i := range cases {
			cases[i].codec, cases[i].idempotent = "zstd", true
		}
		runFieldClient(t, e, regURL, []string{pythonBin(), "py/confluent_kafka_fieldencryption.py"}, cases...)
	})
	t.Run("kcat", func(t *testing.T) {
		needKcat(t)
		t.Parallel()
		kcatFieldCase(t, e)
	})
}

// runFieldClient has a client script produce and read the cases, then
// checks each.
func runFieldClient(t *testing.T, e *env, regURL string, cmd []string, cases ...fieldCase) {
	t.Helper()
	spec := fieldSpec{Gateway: e.addr, Broker: e.broker.ListenAddrs(), Registry: regURL,
		TimeoutS: int(clientTimeout/time.Second) - 15, Cases: cases}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, nil, cmd[0], append(cmd[1:], specFile)...)
	var rep fieldReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%s printed no report (%v):\n%s", cmd[1], err, tail(string(out), 2000))
	}
	for _, msg := range rep.Errors {
		t.Errorf("%s: %s", rep.Client, msg)
	}
	if len(rep.Cases) != len(cases) {
		t.Fatalf("%s reported %d cases, want %d", rep.Client, len(rep.Cases), len(cases))
	}
	for i, c := range cases {
		rc := rep.Cases[i]
		t.Run(strings.ToLower(c.Format), func(t *testing.T) {
			checkFieldCase(t, e, rep.Client, c, rc.Produced, rc.Broker, rc.Gateway)
		})
	}
}

// checkFieldCase checks the records of a case: produced as the client
// wrote them; broker and gateway as the client read and decoded them
// straight from the broker and through the gateway. It reads the topic
// with franz-go both ways too.
func checkFieldCase(t *testing.T, e *env, client string, c fieldCase, produced, broker, gateway []fieldRecord) {
	t.Helper()
	n := len(c.Values)
	if len(produced) != n {
		t.Fatalf("%s produced %d records, want %d", client, len(produced), n)
	}
	stored, batches := readStored(t, e.broker.ListenAddrs(), c.Topic, n)
	through, _ := readStored(t, []string{e.addr}, c.Topic, n)
	for i, b := range batches {
		if b.codec != c.codec || (b.producerID >= 0) != c.idempotent {
			want := map[bool]string{true: "with a producer id (idempotent)", false: "without a producer id"}[c.idempotent]
			t.Errorf("record %d is stored in a %s batch of producer id %d, want a %s batch %s as the client wrote it", i, b.codec, b.producerID, c.codec, want)
		}
	}
	for i := range min(n, len(stored), len(through)) {
		checkStoredRecord(t, &c, i, produced[i], stored[i])
		checkDecodedStored(t, client, &c, i, produced[i], stored[i], broker)
		// Read through the gateway, by franz-go and by the client: as
		// produced, byte for byte, and without the marker.
		checkSame(t, "franz-go through the gateway", i, produced[i], through[i])
		if i >= len(gateway) {
			t.Errorf("%s read %d records through the gateway, want %d", client, len(gateway), n)
			continue
		}
		g := gateway[i]
		checkSame(t, client+" through the gateway", i, produced[i], record{Key: g.Key, Value: g.Value, Headers: g.Headers})
		if g.Error != "" || !reflect.DeepEqual(g.Decoded, c.Values[i]) {
			t.Errorf("record %d: %s decoded it through the gateway as %v (error %q), want %v", i, client, g.Decoded, g.Error, c.Values[i])
		}
	}
}

// checkStoredRecord checks record i as the broker holds it: key as
// produced, the marker first among the produced headers when a field was
// encrypted (none otherwise), and no plaintext of an encrypted field in
// any of its bytes.
func checkStoredRecord(t *testing.T, c *fieldCase, i int, p fieldRecord, s record) {
	t.Helper()
	anySealed := false
	for _, f := range c.secret {
		if !c.sealed(i, f) {
			continue
		}
		anySealed = true
		plain := []byte(c.Values[i][f].(string))
		if len(plain) > 0 && (bytes.Contains(s.Key, plain) || bytes.Contains(s.Value, plain) || headersContain(s.Headers, plain)) {
			t.Errorf("record %d: the broker holds the plaintext %s", i, f)
		}
	}
	if !bytes.Equal(s.Key, p.Key) {
		t.Errorf("record %d: the broker holds key %q, the client wrote %q", i, s.Key, p.Key)
	}
	want := p.Headers
	if anySealed {
		if len(s.Headers) == 0 || s.Headers[0].Key != fieldsMarker {
			t.Errorf("record %d: stored headers %s, want %s first", i, fmtHeaders(s.Headers), fieldsMarker)
			return
		}
		want = append([]header{s.Headers[0]}, p.Headers...)
	} else if !bytes.Equal(s.Value, p.Value) {
		t.Errorf("record %d has no field to encrypt, but the broker holds %q, not %q as written", i, short(s.Value), short(p.Value))
	}
	if !sameHeaders(s.Headers, want) {
		t.Errorf("record %d: stored headers %s, want %s", i, fmtHeaders(s.Headers), fmtHeaders(want))
	}
}

// checkDecodedStored checks what a client decoded reading record i
// straight from the broker: the record (with the marker), decoded with its
// schema, with every field as produced but the encrypted ones, which hold
// base64url ciphertext; and that the stored value is the produced one with
// just those values replaced.
func checkDecodedStored(t *testing.T, client string, c *fieldCase, i int, p fieldRecord, s record, broker []fieldRecord) {
	t.Helper()
	if i >= len(broker) {
		t.Errorf("%s read %d records from the broker, want %d", client, len(broker), len(c.Values))
		return
	}
	b := broker[i]
	if !bytes.Equal(b.Value, s.Value) || !sameHeaders(b.Headers, s.Headers) {
		t.Errorf("record %d: %s read %q %s from the broker; franz-go read %q %s", i, client, short(b.Value), fmtHeaders(b.Headers), short(s.Value), fmtHeaders(s.Headers))
	}
	if b.Error != "" {
		t.Errorf("record %d: %s cannot decode the stored record with its schema: %s", i, client, b.Error)
		return
	}
	replaced := map[string][2]string{}
	for f, want := range c.Values[i] {
		got := b.Decoded[f]
		if !slices.Contains(c.secret, f) || !c.sealed(i, f) {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record %d: %s decodes the stored %s as %v, want %v as produced", i, client, f, got, want)
			}
			continue
		}
		plain := want.(string)
		ct, ok := got.(string)
		if !ok {
			t.Errorf("record %d: %s decodes the stored %s as %T, want a string", i, client, f, got)
			continue
		}
		if raw, err := base64.RawURLEncoding.DecodeString(ct); err != nil || len(raw) != len(plain)+gcmTagLen {
			t.Errorf("record %d: stored %s is %q, want base64url of %d bytes (%d of plaintext and a tag): %v", i, f, ct, len(plain)+gcmTagLen, len(plain), err)
		}
		replaced[f] = [2]string{plain, ct}
	}
	if len(b.Decoded) != len(c.Values[i]) {
		t.Errorf("record %d: %s decodes the stored record as %v, want the fields of %v", i, client, b.Decoded, c.Values[i])
	}
	if want := substitute(c.Format, p.Value, replaced); !bytes.Equal(s.Value, want) {
		t.Errorf("record %d: the broker holds\n%q\nwant the produced record with only the encrypted values replaced:\n%q", i, s.Value, want)
	}
}

// substitute returns value with the values in replaced (by field:
// plaintext and ciphertext) replaced, as the format encodes them: after
// the field's tag and with its length (Protobuf), with its length (Avro's
// zigzag varint), or in quotes (JSON).
func substitute(format string, value []byte, replaced map[string][2]string) []byte {
	enc := func(field, s string) []byte {
		switch format {
		case fmtAvro:
			return append(binary.AppendVarint(nil, int64(len(s))), s...)
		case fmtProtobuf:
			b := protowire.AppendTag(nil, personProtoFields[field], protowire.BytesType)
			return protowire.AppendString(b, s)
		}
		return []byte(`"` + s + `"`)
	}
	out := value
	for f, v := range replaced {
		out = bytes.Replace(out, enc(f, v[0]), enc(f, v[1]), 1)
	}
	return out
}

// checkSame checks that record i, as a reader got it, is what the client
// produced: key, value and headers.
func checkSame(t *testing.T, reader string, i int, p fieldRecord, got record) {
	t.Helper()
	if !bytes.Equal(got.Key, p.Key) || !bytes.Equal(got.Value, p.Value) {
		t.Errorf("record %d: %s read key %q value %q, want %q %q as produced", i, reader, got.Key, short(got.Value), p.Key, short(p.Value))
	}
	if !sameHeaders(got.Headers, p.Headers) {
		t.Errorf("record %d: %s read headers %s, want %s as produced (no %s)", i, reader, fmtHeaders(got.Headers), fmtHeaders(p.Headers), fieldsMarker)
	}
}

func headersContain(hs []header, b []byte) bool {
	for _, h := range hs {
		if bytes.Contains([]byte(h.Key), b) || bytes.Contains(h.Value, b) {
			return true
		}
	}
	return false
}

// batchOf is what the batch of a stored record says.
type batchOf struct {
	codec      string
	producerID int64
}

// readRecords reads the n records of topic (one partition) from the
// beginning with franz-go, from seeds: the broker, or the gateway.
func readRecords(t *testing.T, seeds []string, topic string, n int) []record {
	t.Helper()
	recs, _ := readStored(t, seeds, topic, n)
	return recs
}

// readStored is readRecords that also says what each record's batch says.
func readStored(t *testing.T, seeds []string, topic string, n int) ([]record, []batchOf) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if end := partitionEnd(ctx, t, cl, topic); end != int64(n) {
		t.Errorf("%s holds %d records (read from %v), want %d", topic, end, seeds, n)
	}
	var got []record
	var batches []batchOf
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("read %d of the %d records of %s from %v", len(got), n, topic, seeds)
			break
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s/%d from %v: %v", tp, p, seeds, err) })
		fs.EachRecord(func(r *kgo.Record) {
			rec := record{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, header{Key: h.Key, Value: h.Value})
			}
			got = append(got, rec)
			batches = append(batches, batchOf{codec: codecName(r.Attrs.CompressionType()), producerID: r.ProducerID})
		})
	}
	return got, batches
}

// kcatFieldLines are plain JSON records as a person types them for kcat,
// one a line: spacing, escapes, key order and nesting that the gateway
// must give back byte for byte. Only the top-level ssn is encrypted; the
// ssn inside other values is not the example's path.
var kcatFieldLines = []string{
	`{"id":"kcat-1","status":"ACTIVE","ssn":"123-45-6789"}`,
	`{ "ssn" : "987-65-4321", "id": "kcat-2", "tags": ["a", {"ssn": "x"}], "notes": "caf\u00e9 \"q\" \\ /", "visits": 12.5e1 }`,
	`{"id":"kcat-3","nested":{"ssn":"not this one"},"ssn":"555-12-3456","empty":null}`,
}

// kcatFieldCase produces kcatFieldLines with kcat (lz4, a header on every
// record) to a pii-json topic, reads them back with kcat through the
// gateway and straight from the broker (checking the CRC of every batch,
// which the gateway rewrote), and checks them.
func kcatFieldCase(t *testing.T, e *env) {
	c := newFieldCase(t, e, "kcat", "")
	c.Values, c.codec = nil, "lz4"
	var in bytes.Buffer
	var produced []fieldRecord
	for i, line := range kcatFieldLines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("kcatFieldLines[%d]: %v", i, err)
		}
		c.Values = append(c.Values, v)
		key := fmt.Sprintf("k%d", i)
		fmt.Fprintf(&in, "%s|%s\n", key, line)
		produced = append(produced, fieldRecord{Key: []byte(key), Value: []byte(line), Headers: []header{{Key: "app", Value: []byte("kcat")}}})
	}
	runClient(t, in.Bytes(), "kcat", "-P", "-b", e.addr, "-t", c.Topic, "-K", "|", "-z", "lz4", "-H", "app=kcat",
		"-X", "acks=all", "-X", "client.id=strait-interop-kcat")

	read := func(addr string) []record {
		out := runClient(t, nil, "kcat", "-C", "-b", addr, "-t", c.Topic, "-o", "beginning", "-e", "-J", "-q",
			"-X", "check.crcs=true", "-X", "client.id=strait-interop-kcat")
		return parseKcatJSON(t, out)
	}
	// kcat prints a header's value as text: it shows the marker is there,
	// first, but not its bytes, which franz-go compares.
	for i, r := range read(e.broker.ListenAddrs()[0]) {
		if len(r.Headers) != 2 || r.Headers[0].Key != fieldsMarker || r.Headers[1].Key != "app" {
			t.Errorf("record %d: kcat reads headers %s from the broker, want %s and app", i, fmtHeaders(r.Headers), fieldsMarker)
		}
	}
	var gateway []fieldRecord
	for _, r := range read(e.addr) {
		gateway = append(gateway, jsonRecord(t, r))
	}
	// The reader that decodes what the broker holds is encoding/json.
	var broker []fieldRecord
	for _, r := range readRecords(t, e.broker.ListenAddrs(), c.Topic, len(c.Values)) {
		broker = append(broker, jsonRecord(t, r))
	}
	checkFieldCase(t, e, "kcat", c, produced, broker, gateway)
}

// jsonRecord is r with its value decoded as a JSON object.
func jsonRecord(t *testing.T, r record) fieldRecord {
	t.Helper()
	fr := fieldRecord{Key: r.Key, Value: r.Value, Headers: r.Headers}
	if err := json.Unmarshal(r.Value, &fr.Decoded); err != nil {
		fr.Error = err.Error()
	}
	return fr
}
