package fieldencryption

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzConfig has a JSON rule (topics pii-json*: key id deterministic,
// value ssn random and name deterministic under a second KEK) and the
// schema rule of schemaConfig (topics pii-schema*).
func fuzzConfig() Config {
	cfg := schemaConfig()
	cfg.Rules[0].Topics = []string{"pii-schema*"}
	cfg.Rules = append([]Rule{{
		Topics: []string{"pii-json*"}, KEK: "kek",
		Key:   &Part{Format: formatJSON, Fields: []Field{{Path: "id", Mode: modeDeterministic}}},
		Value: &Part{Format: formatJSON, Fields: []Field{{Path: "ssn"}, {Path: "name", Mode: modeDeterministic, KEK: "kek2"}}},
	}}, cfg.Rules...)
	return cfg
}

// sealedSeeds seals records of each rule of fuzzConfig and returns them as
// stored: topic, key, value and marker.
func sealedSeeds(t testing.TB, f *Filter) []kmsg.Record {
	nick := "Bo"
	var out []kmsg.Record
	for _, r := range []struct {
		topic string
		rec   rec
	}{
		{"pii-json", rec{key: []byte(`{"id":"c-1"}`), value: []byte(`{"ssn":"123-45-6789","name":"Ann","n":[1,{"a":"b"}]}`)}},
		{"pii-json", rec{key: []byte(`{"id":"c-1"}`), value: nil}},
		{"pii-schema", rec{key: []byte("k"), value: avroPerson(t, "123-45-6789", []byte{1, 2}, &nick)}},
		{"pii-schema", rec{value: protoPerson("123-45-6789")}},
	} {
		sealed, _, err := f.sealPartition(context.Background(), r.topic, f.policy(r.topic), makeBatch(t, kgo.NoCompression(), r.rec))
		if err != nil {
			t.Fatal(err)
		}
		st := decodeRecords(t, sealed)[0]
		st.Headers = append(st.Headers, kmsg.Header{Key: r.topic}) // the topic, for the seed
		out = append(out, st)
	}
	return out
}

// FuzzMarker parses arbitrary marker values: parse never panics, and what
// it accepts is exactly what appendMarker writes for what it read. A
// marker built from the input by appendMarker parses back equal.
func FuzzMarker(f *testing.F) {
	fl := newFilter(f, fuzzConfig(), testKMS(f, "kek", "kek2"))
	for _, r := range sealedSeeds(f, fl) {
		f.Add(r.Headers[0].Value)
	}
	f.Add([]byte{})
	f.Add([]byte{markerVersion})
	f.Add([]byte{markerVersion, 0, 0, 0})
	f.Add([]byte{markerVersion, 0, 1, 1, 'k', 0, 1, fieldDeterministic | wireJSON<<fieldFormatShift, 0, 0, 1, 1, 'a'})
	f.Add([]byte{markerVersion, 0, 1, 1, 'k', 1, 'w', 0x80, 0x00, 1, wireJSON << fieldFormatShift, 0, 0, 1, 1, 'a'})
	f.Fuzz(func(t *testing.T, v []byte) {
		var m marker
		if err := m.parse(v); err == nil {
			if back := appendMarker(nil, m.flags, m.keks, m.fields); !bytes.Equal(back, v) {
				t.Fatalf("parse accepted %x, which appendMarker writes as %x", v, back)
			}
		}
		keks, fields := markerFrom(v)
		written := appendMarker(nil, flagTopic, keks, fields)
		if err := m.parse(written); err != nil {
			t.Fatalf("appendMarker wrote %x, which does not parse: %v", written, err)
		}
		if m.flags != flagTopic || len(m.keks) != len(keks) || len(m.fields) != len(fields) {
			t.Fatalf("parsed back %+v, wrote %+v %+v", m, keks, fields)
		}
		for i := range keks {
			if !bytes.Equal(m.keks[i].name, keks[i].name) || !bytes.Equal(m.keks[i].wrapped, keks[i].wrapped) || m.keks[i].first != keks[i].first {
				t.Fatalf("KEK %d parsed back as %+v, written %+v", i, m.keks[i], keks[i])
			}
		}
		for i := range fields {
			a, b := m.fields[i], fields[i]
			if a.flags != b.flags || a.kek != b.kek || a.schemaID != b.schemaID || a.count != b.count || !bytes.Equal(a.path, b.path) {
				t.Fatalf("field %d parsed back as %+v, written %+v", i, a, b)
			}
		}
	})
}

// markerFrom builds a valid marker's KEKs and fields from arbitrary bytes.
func markerFrom(v []byte) ([]markerKEK, []markerField) {
	take := func(n int) []byte {
		n = min(n, len(v))
		b := v[:n]
		v = v[n:]
		return b
	}
	next := func() int {
		if b := take(1); len(b) == 1 {
			return int(b[0])
		}
		return 0
	}
	keks := make([]markerKEK, 1+next()%3)
	for i := range keks {
		keks[i].name = append([]byte("k"), take(next()%8)...)
		keks[i].wrapped = take(next() % 40)
		if len(keks[i].wrapped) > 0 {
			keks[i].first = binary.LittleEndian.Uint64(append(take(8), make([]byte, 8)...))
		}
	}
	fields := make([]markerField, 1+next()%4)
	for i := range fields {
		f := &fields[i]
		f.kek = next() % len(keks)
		f.flags = byte(1+next()%3) << fieldFormatShift
		if next()%2 == 1 || len(keks[f.kek].wrapped) == 0 {
			f.flags |= fieldDeterministic
		}
		if i == 0 && next()%2 == 1 {
			f.flags |= fieldKey
		}
		f.schemaID = int(binary.LittleEndian.Uint32(append(take(4), make([]byte, 4)...)) >> 1)
		f.count = 1 + next()
		f.path = append([]byte("p"), take(next()%16)...)
	}
	return keks, fields
}

// FuzzOpen fetches a record whose key, value and marker are arbitrary,
// starting from sealed ones, through each rule and outcome: the opener
// never panics, and what it returns is a valid batch.
func FuzzOpen(f *testing.F) {
	fl := newFilter(f, fuzzConfig(), testKMS(f, "kek", "kek2"))
	for _, r := range sealedSeeds(f, fl) {
		f.Add(r.Headers[len(r.Headers)-1].Key, r.Key, r.Value, r.Headers[0].Value, false)
		f.Add(r.Headers[len(r.Headers)-1].Key, r.Key, r.Value, r.Headers[0].Value, true)
	}
	f.Fuzz(func(t *testing.T, topic string, key, value, m []byte, redact bool) {
		if topic != "pii-json" {
			topic = "pii-schema"
		}
		r := rec{key: key, value: value, headers: []kmsg.Header{{Key: markerKey, Value: m}, {Key: "h"}}}
		if len(key) == 0 {
			r.key = nil
		}
		if len(value) == 0 {
			r.value = nil
		}
		in := makeBatch(t, kgo.NoCompression(), r)
		out, changed, err := fl.openPartition(context.Background(), topic, fl.policy(topic).rule, redact, in)
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("error %v with %d bytes of records: one record, nothing before it", err, len(out))
			}
			return
		}
		if !changed {
			t.Fatal("a record with a marker opened unchanged")
		}
		recs := decodeRecords(t, out)
		if len(recs) != 1 || len(recs[0].Headers) != 1 || recs[0].Headers[0].Key != "h" {
			t.Fatalf("opened to %+v: want one record, its marker gone", recs)
		}
	})
}
