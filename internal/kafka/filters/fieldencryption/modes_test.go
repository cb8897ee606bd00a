package fieldencryption

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fieldText returns the text of JSON string field name in v.
func fieldText(t testing.TB, v []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`"` + name + `":"([^"]*)"`).FindSubmatch(v)
	if m == nil {
		t.Fatalf("no string field %s in %q", name, v)
	}
	return string(m[1])
}

// personJSON is a JSON value with an ssn and a name.
func personJSON(ssn, name string) rec {
	return rec{value: []byte(`{"ssn":"` + ssn + `","name":"` + name + `"}`)}
}

// TestDeterministicMode encrypts ssn deterministically and name randomly:
// equal ssns give equal ciphertexts in one batch, in two batches and in
// two produce requests, different ones differ, equal names never give
// equal ciphertexts, and all of it decrypts back.
func TestDeterministicMode(t *testing.T) {
	k := testKMS(t, "kek")
	cfg := jsonConfig()
	cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic}, {Path: "name", Mode: modeRandom}}
	f := newFilter(t, cfg, k)
	c, _ := testCtx(t, "")
	batch1 := makeBatch(t, kgo.NoCompression(), personJSON("111-11-1111", "Ann"), personJSON("111-11-1111", "Ann"), personJSON("222-22-2222", "Ann"))
	batch2 := makeBatch(t, kgo.Lz4Compression(), personJSON("111-11-1111", "Ann"))
	batch3 := makeBatch(t, kgo.NoCompression(), personJSON("111-11-1111", "Ann"))
	up1 := produceOne(t, f, c, "pii-people", append(append([]byte{}, batch1...), batch2...))
	up2 := produceOne(t, f, c, "pii-people", batch3)
	var stored []kmsg.Record
	stored = append(stored, decodeRecords(t, up1)...)
	stored = append(stored, decodeRecords(t, up2)...)
	var ssns, names []string
	for _, r := range stored {
		ssns = append(ssns, fieldText(t, r.Value, "ssn"))
		names = append(names, fieldText(t, r.Value, "name"))
	}
	// Records 0, 1, 3 (second batch) and 4 (second request) share an ssn.
	for _, i := range []int{1, 3, 4} {
		if ssns[i] != ssns[0] {
			t.Errorf("record %d: equal ssn stored as %s, record 0 as %s", i, ssns[i], ssns[0])
		}
	}
	if ssns[2] == ssns[0] {
		t.Error("different ssns stored alike")
	}
	for i := range names {
		for j := range i {
			if names[i] == names[j] {
				t.Errorf("records %d and %d: equal names in random mode stored alike: %s", j, i, names[i])
			}
		}
	}
	for _, up := range []struct{ stored, produced []byte }{{up1, append(append([]byte{}, batch1...), batch2...)}, {up2, batch3}} {
		p, _ := fetchOne(t, f, c, "pii-people", up.stored)
		want := values(t, up.produced)
		got := values(t, p.RecordBatches)
		if p.ErrorCode != 0 || len(got) != len(want) {
			t.Fatalf("fetch: error %d, %d records, want %d", p.ErrorCode, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("record %d back as %s, produced %s", i, got[i], want[i])
			}
		}
	}
	// A deterministic ciphertext is bound to its topic: the same ssn
	// in another topic is stored otherwise.
	other := decodeRecords(t, produceOne(t, f, c, "pii-other", batch3))[0]
	if fieldText(t, other.Value, "ssn") == ssns[0] {
		t.Error("an equal ssn in another topic is stored alike, with bind_topic on")
	}
}

// TestDeterministicAvro: equal Avro ssns give equal ciphertexts.
func TestDeterministicAvro(t *testing.T) {
	k := testKMS(t, "kek")
	cfg := schemaRule(formatAvro)
	cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic}}
	f := newFilter(t, cfg, k)
	c, _ := testCtx(t, "")
	v := avroPerson(t, "123-45-6789", nil, nil)
	in := makeBatch(t, kgo.NoCompression(), rec{value: v}, rec{value: v})
	up := produceOne(t, f, c, "pii-people", in)
	st := values(t, up)
	if !bytes.Equal(st[0], st[1]) || bytes.Equal(st[0], v) {
		t.Errorf("two equal records stored as\n%x\n%x", st[0], st[1])
	}
	if p, _ := fetchOne(t, f, c, "pii-people", up); !bytes.Equal(p.RecordBatches, in) {
		t.Error("the records did not come back as produced")
	}
}

// TestTwoKEKs encrypts a deterministic field and a random one of one
// record under two KEKs: the marker lists both, and the record comes
// back whole.
func TestTwoKEKs(t *testing.T) {
	k := testKMS(t, "kek", "ssn-kek")
	cfg := jsonConfig()
	cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic, KEK: "ssn-kek"}, {Path: "name"}}
	f := newFilter(t, cfg, k)
	c, _ := testCtx(t, "")
	in := makeBatch(t, kgo.NoCompression(), personJSON("111-11-1111", "Ann"), personJSON("222-22-2222", "Bob"))
	up := produceOne(t, f, c, "pii-people", in)
	var m marker
	if err := m.parse(markerOf(t, decodeRecords(t, up)[0])); err != nil {
		t.Fatal(err)
	}
	if len(m.keks) != 2 || string(m.keks[0].name) != "ssn-kek" || len(m.keks[0].wrapped) != 0 ||
		string(m.keks[1].name) != "kek" || len(m.keks[1].wrapped) == 0 {
		t.Errorf("marker KEKs %+v: want ssn-kek with no DEK (deterministic only), then kek with one", m.keks)
	}
	if p, _ := fetchOne(t, f, c, "pii-people", up); p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, in) {
		t.Errorf("fetch: error %d, records %q", p.ErrorCode, values(t, p.RecordBatches))
	}
}

// TestKeyPart encrypts a JSON key's id deterministically and the value's
// ssn randomly: equal keys stay equal as stored (so compaction still
// works), the records come back whole, and a tombstone with an encrypted
// key, and a record with a null key, pass and come back.
func TestKeyPart(t *testing.T) {
	k := testKMS(t, "kek")
	cfg := jsonConfig("ssn")
	cfg.Rules[0].Key = &Part{Format: formatJSON, Fields: []Field{{Path: "id", Mode: modeDeterministic}}}
	f := newFilter(t, cfg, k)
	c, _ := testCtx(t, "")
	key := []byte(`{"id":"cust-1","region":"eu"}`)
	hdr := []kmsg.Header{{Key: "trace", Value: []byte("t1")}}
	in := makeBatch(t, kgo.NoCompression(),
		rec{key: key, value: []byte(`{"ssn":"111-11-1111"}`), headers: hdr},
		rec{key: key, value: nil},
		rec{key: []byte(`{"id":"cust-2","region":"eu"}`), value: []byte(`{"ssn":"222-22-2222"}`)},
		rec{key: nil, value: []byte(`{"ssn":"333-33-3333"}`)})
	st := decodeRecords(t, produceOne(t, f, c, "pii-people", in))
	for i, r := range st {
		if bytes.Contains(r.Key, []byte("cust-")) || ssnText.Match(r.Value) {
			t.Errorf("record %d stored in clear: key %s, value %s", i, r.Key, r.Value)
		}
		markerOf(t, r)
	}
	if !bytes.Equal(st[0].Key, st[1].Key) {
		t.Errorf("equal keys stored as %s and %s: compaction would keep both", st[0].Key, st[1].Key)
	}
	if bytes.Equal(st[0].Key, st[2].Key) {
		t.Error("different keys stored alike")
	}
	if st[1].Value != nil || st[3].Key != nil {
		t.Errorf("the tombstone's value became %q, the null key %q", st[1].Value, st[3].Key)
	}
	if fieldText(t, st[0].Key, "region") != "eu" {
		t.Errorf("key fields not configured changed: %s", st[0].Key)
	}
	p, _ := fetchOne(t, f, c, "pii-people", rebatch(t, st...))
	if p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, in) {
		t.Errorf("fetch: error %d; want the records as produced, got %+v", p.ErrorCode, decodeRecords(t, p.RecordBatches))
	}
}
