package fieldencryption

import (
	"bytes"
	"context"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/straitgw/strait/internal/schema/protobuf"
)

// withFetch sets the fetch rule of cfg's first rule, and the placeholder
// of its configured ssn.
func withFetch(cfg Config, fr FetchRule, redactWith string) Config {
	v := *cfg.Rules[0].Value
	v.Fields = append([]Field(nil), v.Fields...)
	for i := range v.Fields {
		if v.Fields[i].Path == "ssn" {
			v.Fields[i].RedactWith = redactWith
		}
	}
	cfg.Rules = append([]Rule(nil), cfg.Rules...)
	cfg.Rules[0].Value, cfg.Rules[0].Fetch = &v, fr
	return cfg
}

// TestPrincipalOutcomes produces JSON, Avro and Protobuf records and
// fetches them as alice, who may decrypt, and as bob, who may not: alice
// gets the records as produced, bob a placeholder in each encrypted field
// (the record still valid for its schema, with no marker) or the records
// as stored.
func TestPrincipalOutcomes(t *testing.T) {
	k := testKMS(t, "kek")
	nick := "Bo"
	kinds := []struct {
		name  string
		cfg   Config
		value []byte
		// redacted checks bob's value, whose ssn should be ssn.
		redacted func(t *testing.T, v []byte, ssn string)
	}{
		{"json", jsonConfig("ssn", "card"), []byte(`{"id":"p-1","ssn":"123-45-6789","card":"4111 1111","n":1}`),
			func(t *testing.T, v []byte, ssn string) {
				if want := `{"id":"p-1","ssn":"` + ssn + `","card":"","n":1}`; string(v) != want {
					t.Errorf("bob got %s, want %s", v, want)
				}
			}},
		{"avro", schemaConfig(), avroPerson(t, "123-45-6789", []byte{1, 2, 3}, &nick), redactedAvro},
		{"protobuf", schemaConfig(), protoPerson("123-45-6789"), redactedProto},
	}
	for _, kind := range kinds {
		for _, redactWith := range []string{"", "***-**-****"} {
			t.Run(kind.name+"/redact "+redactWith, func(t *testing.T) {
				f := newFilter(t, withFetch(kind.cfg, FetchRule{DecryptFor: []string{"alice"}, Others: othersRedact}, redactWith), k)
				in := makeBatch(t, kgo.NoCompression(), rec{key: []byte("k"), value: kind.value})
				alice, _ := testCtx(t, "alice")
				bob, _ := testCtx(t, "bob")
				up := produceOne(t, f, bob, "pii-people", in)
				if p, _ := fetchOne(t, f, alice, "pii-people", up); p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, in) {
					t.Errorf("alice got error %d and records %q, want the records as produced", p.ErrorCode, values(t, p.RecordBatches))
				}
				p, changed := fetchOne(t, f, bob, "pii-people", up)
				if p.ErrorCode != 0 || !changed {
					t.Fatalf("bob got error %d, changed %v", p.ErrorCode, changed)
				}
				recs := decodeRecords(t, p.RecordBatches)
				if len(recs) != 1 || len(recs[0].Headers) != 0 || string(recs[0].Key) != "k" {
					t.Fatalf("bob got %+v: want one record, key k, no header", recs)
				}
				kind.redacted(t, recs[0].Value, redactWith)
			})
		}
		t.Run(kind.name+"/ciphertext", func(t *testing.T) {
			f := newFilter(t, withFetch(kind.cfg, FetchRule{DecryptFor: []string{"alice"}}, ""), k)
			in := makeBatch(t, kgo.NoCompression(), rec{key: []byte("k"), value: kind.value})
			alice, _ := testCtx(t, "alice")
			up := produceOne(t, f, alice, "pii-people", in)
			if p, _ := fetchOne(t, f, alice, "pii-people", up); !bytes.Equal(p.RecordBatches, in) {
				t.Errorf("alice got %q, want the records as produced", values(t, p.RecordBatches))
			}
			for _, who := range []string{"bob", ""} {
				c, _ := testCtx(t, who)
				got, changed := runFetch(t, f, c, map[string][]byte{"pii-people": up, "plain": in})
				if p := got["pii-people"]; p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, up) {
					t.Errorf("%q got error %d and %q, want the records as stored", who, p.ErrorCode, values(t, p.RecordBatches))
				}
				if changed {
					t.Errorf("%q: a fetch of topics %q gets as stored was not left unchanged", who, who)
				}
			}
		})
	}
}

// redactedAvro checks a redacted Person: ssn and the streets hold the
// placeholders, card (bytes) is empty, the rest as produced.
func redactedAvro(t *testing.T, v []byte, ssn string) {
	t.Helper()
	var p map[string]any
	if err := hamba.Unmarshal(hamba.MustParse(personAvro), v[5:], &p); err != nil {
		t.Fatalf("bob's record does not decode with its schema: %v", err)
	}
	if p["ssn"] != ssn || len(p["card"].([]byte)) != 0 {
		t.Errorf("bob got ssn %q and card %x, want %q and nothing", p["ssn"], p["card"], ssn)
	}
	for _, a := range p["addresses"].([]any) {
		if a := a.(map[string]any); a["street"] != "" || a["zip"] == "" {
			t.Errorf("bob got address %v: want its street redacted, its zip kept", a)
		}
	}
	if p["id"] != "p-1" || p["nick"] != "Bo" {
		t.Errorf("bob got %v: fields not encrypted changed", p)
	}
}

// redactedProto checks a redacted Person (personProto).
func redactedProto(t *testing.T, v []byte, ssn string) {
	t.Helper()
	ps, err := protobuf.Compile(context.Background(), personProto, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ps.Message([]int{0})
	st := dynamicpb.NewMessage(m.Descriptor())
	if err := proto.Unmarshal(v[6:], st); err != nil {
		t.Fatalf("bob's record does not decode with its schema: %v", err)
	}
	fd := m.Descriptor().Fields()
	if got := st.Get(fd.ByName("ssn")).String(); got != ssn {
		t.Errorf("bob got ssn %q, want %q", got, ssn)
	}
	if got := st.Get(fd.ByName("card")).Bytes(); len(got) != 0 {
		t.Errorf("bob got card %x, want nothing", got)
	}
	home := st.Get(fd.ByName("home")).Message()
	street := home.Descriptor().Fields().ByName("street")
	if got := home.Get(street).String(); got != "" {
		t.Errorf("bob got street %q, want it redacted", got)
	}
	if got := st.Get(fd.ByName("id")).String(); got != "p-1" {
		t.Errorf("bob got id %q", got)
	}
}
