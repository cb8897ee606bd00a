package fieldencryption

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// envelope is where an encrypted value lies in a stored record.
type envelope struct {
	field      string
	start, end int
	text       bool // base64url text, not raw bytes
}

// jsonEnvelope is a JSON string field holding an envelope (or at least
// something as long as one).
var jsonEnvelope = regexp.MustCompile(`"(\w+)":"([A-Za-z0-9_-]{20,})"`)

// jsonEnvelopes finds the envelopes of a stored JSON value.
func jsonEnvelopes(v []byte) []envelope {
	var out []envelope
	for _, m := range jsonEnvelope.FindAllSubmatchIndex(v, -1) {
		out = append(out, envelope{field: string(v[m[2]:m[3]]), start: m[4], end: m[5], text: true})
	}
	return out
}

// avroEnvelopes finds the envelopes of a stored Person (personAvro): its
// ssn, card and streets, read with hamba/avro and looked up in the value.
func avroEnvelopes(t testing.TB, v []byte) []envelope {
	t.Helper()
	var p map[string]any
	if err := hamba.Unmarshal(hamba.MustParse(personAvro), v[5:], &p); err != nil {
		t.Fatalf("the stored record does not decode: %v", err)
	}
	var out []envelope
	add := func(field string, b []byte, text bool) {
		i := bytes.Index(v, b)
		if i < 0 || bytes.Index(v[i+1:], b) >= 0 {
			t.Fatalf("%s: its envelope is not once in the value", field)
		}
		out = append(out, envelope{field: field, start: i, end: i + len(b), text: text})
	}
	add("ssn", []byte(p["ssn"].(string)), true)
	add("card", p["card"].([]byte), false)
	for _, a := range p["addresses"].([]any) {
		add("street", []byte(a.(map[string]any)["street"].(string)), true)
	}
	return out
}

// b64Alphabet is base64url's alphabet.
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// wantCorrupt fetches batches of topic and checks the partition fails with
// CORRUPT_MESSAGE and no record reaches the client.
func wantCorrupt(t *testing.T, f *Filter, c *filter.Context, topic string, batches []byte, what string) {
	t.Helper()
	p, changed := fetchOne(t, f, c, topic, batches)
	if p.ErrorCode != kerr.CorruptMessage.Code || len(p.RecordBatches) != 0 || !changed {
		t.Errorf("%s: fetch gave error %d and %d bytes of records (changed %v), want CORRUPT_MESSAGE and none",
			what, p.ErrorCode, len(p.RecordBatches), changed)
	}
}

// tamperSetup is a filter and a record stored through it.
type tamperSetup struct {
	name   string
	cfg    Config
	value  []byte
	locate func(t testing.TB, v []byte) []envelope
	want   int // envelopes in the stored value
}

func tamperSetups(t *testing.T) []tamperSetup {
	random := jsonConfig("ssn", "name")
	det := jsonConfig()
	det.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic}, {Path: "name", Mode: modeDeterministic}}
	mixed := jsonConfig()
	mixed.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: modeDeterministic, KEK: "kek2"}, {Path: "name"}}
	jsonLocate := func(_ testing.TB, v []byte) []envelope { return jsonEnvelopes(v) }
	// "Jo Bloggs" takes 25 bytes sealed: 34 base64 characters, whose
	// last holds 4 bits that are not part of the value.
	value := []byte(`{"ssn":"123-45-6789","id":7,"name":"Jo Bloggs"}`)
	return []tamperSetup{
		{"random", random, value, jsonLocate, 2},
		{"deterministic", det, value, jsonLocate, 2},
		{"two keks", mixed, value, jsonLocate, 2},
		{"avro", schemaConfig(), avroPerson(t, "123-45-6789", []byte{1, 2, 3}, nil), avroEnvelopes, 4},
	}
}

// TestTamperEveryByte produces one record, then flips each byte of each
// of its envelopes, and each byte of its marker, in turn: every fetch of
// the altered record must fail its partition with CORRUPT_MESSAGE and
// give the client nothing.
func TestTamperEveryByte(t *testing.T) {
	k := testKMS(t, "kek", "kek2")
	for _, s := range tamperSetups(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFilter(t, s.cfg, k)
			c, _ := testCtx(t, "")
			up := produceOne(t, f, c, "pii-people", makeBatch(t, kgo.NoCompression(), rec{key: []byte("k"), value: s.value}))
			stored := decodeRecords(t, up)[0]
			// Unaltered, it opens: the failures below are the tampering's.
			if p, _ := fetchOne(t, f, c, "pii-people", rebatch(t, stored)); p.ErrorCode != 0 || !bytes.Equal(values(t, p.RecordBatches)[0], s.value) {
				t.Fatalf("the stored record, rebatched, does not open: error %d", p.ErrorCode)
			}
			envs := s.locate(t, stored.Value)
			if len(envs) != s.want {
				t.Fatalf("found %d envelopes in %q, want %d", len(envs), stored.Value, s.want)
			}
			for _, e := range envs {
				for i := e.start; i < e.end; i++ {
					for _, bit := range []byte{0x01, 0x20, 0x80} {
						r := stored
						r.Value = bytes.Clone(stored.Value)
						r.Value[i] ^= bit
						wantCorrupt(t, f, c, "pii-people", rebatch(t, r), fmt.Sprintf("%s envelope byte %d ^ %#x", e.field, i-e.start, bit))
					}
				}
				if !e.text {
					continue
				}
				// The last character of base64 text may hold bits
				// that are not part of the value: any other
				// character there is another text, and must not
				// decrypt either.
				last := stored.Value[e.end-1]
				for _, ch := range []byte(b64Alphabet) {
					if ch == last {
						continue
					}
					r := stored
					r.Value = bytes.Clone(stored.Value)
					r.Value[e.end-1] = ch
					wantCorrupt(t, f, c, "pii-people", rebatch(t, r), fmt.Sprintf("%s envelope's last character %q for %q", e.field, ch, last))
				}
			}
			m := markerOf(t, stored)
			for i := range m {
				for _, bit := range []byte{0x01, 0x80} {
					r := stored
					r.Headers = []kmsg.Header{{Key: markerKey, Value: bytes.Clone(m)}}
					r.Headers[0].Value[i] ^= bit
					wantCorrupt(t, f, c, "pii-people", rebatch(t, r), fmt.Sprintf("marker byte %d ^ %#x", i, bit))
				}
			}
		})
	}
}

// TestTamperMoves truncates an envelope, swaps the envelopes of two
// records and of two fields, and copies a record into another topic: none
// of it decrypts.
func TestTamperMoves(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn", "name"), k)
	c, _ := testCtx(t, "")
	in := makeBatch(t, kgo.NoCompression(),
		rec{key: []byte("a"), value: []byte(`{"ssn":"111-11-1111","name":"Ann Able"}`)},
		rec{key: []byte("b"), value: []byte(`{"ssn":"222-22-2222","name":"Bob Baker"}`)})
	stored := decodeRecords(t, produceOne(t, f, c, "pii-people", in))
	envs := [][]envelope{jsonEnvelopes(stored[0].Value), jsonEnvelopes(stored[1].Value)}
	text := func(r, i int) []byte { e := envs[r][i]; return stored[r].Value[e.start:e.end] }
	// with returns record r with envelope i replaced.
	with := func(r, i int, env []byte) kmsg.Record {
		e := envs[r][i]
		out := stored[r]
		out.Value = append(append(append([]byte{}, stored[r].Value[:e.start]...), env...), stored[r].Value[e.end:]...)
		return out
	}
	t.Run("truncated", func(t *testing.T) {
		for i := range envs[0] {
			env := text(0, i)
			wantCorrupt(t, f, c, "pii-people", rebatch(t, with(0, i, env[:len(env)-1]), stored[1]), "envelope one character short")
			wantCorrupt(t, f, c, "pii-people", rebatch(t, with(0, i, env[1:]), stored[1]), "envelope without its first character")
		}
	})
	t.Run("swapped between records", func(t *testing.T) {
		wantCorrupt(t, f, c, "pii-people", rebatch(t, with(0, 0, text(1, 0)), with(1, 0, text(0, 0))), "ssn envelopes swapped")
		wantCorrupt(t, f, c, "pii-people", rebatch(t, with(0, 0, text(1, 0)), stored[1]), "ssn envelope copied")
	})
	t.Run("moved to another field", func(t *testing.T) {
		r := with(0, 0, text(0, 1))
		envs0 := jsonEnvelopes(r.Value)
		e := envs0[1]
		r.Value = append(append(append([]byte{}, r.Value[:e.start]...), text(0, 0)...), r.Value[e.end:]...)
		wantCorrupt(t, f, c, "pii-people", rebatch(t, r), "ssn and name envelopes swapped")
	})
	t.Run("marker of another record", func(t *testing.T) {
		r := stored[0]
		r.Headers = stored[1].Headers
		wantCorrupt(t, f, c, "pii-people", rebatch(t, r), "marker swapped")
	})
	t.Run("key changed", func(t *testing.T) {
		r := stored[0]
		r.Key = []byte("b")
		wantCorrupt(t, f, c, "pii-people", rebatch(t, r), "key changed")
	})
	t.Run("another topic", func(t *testing.T) {
		wantCorrupt(t, f, c, "pii-other", rebatch(t, stored...), "records copied into another topic")
		// Unbound, the topic is not checked: the same copy opens.
		unbound := jsonConfig("ssn", "name")
		no := false
		unbound.BindTopic = &no
		fu := newFilter(t, unbound, k)
		st := decodeRecords(t, produceOne(t, fu, c, "pii-people", in))
		p, _ := fetchOne(t, fu, c, "pii-other", rebatch(t, st...))
		if p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, in) {
			t.Errorf("with bind_topic off, a copy into another topic gave error %d", p.ErrorCode)
		}
	})
}

// TestTamperSecondBatch fetches two batches whose second is altered: the
// client gets the first decrypted and nothing of the second; fetching the
// second alone fails the partition.
func TestTamperSecondBatch(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn"), k)
	c, _ := testCtx(t, "")
	first := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"111-11-1111"}`)}, rec{value: []byte(`{"ssn":"222-22-2222"}`)})
	second := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"333-33-3333"}`)})
	sealedFirst := produceOne(t, f, c, "pii-people", first)
	st := decodeRecords(t, produceOne(t, f, c, "pii-people", second))[0]
	e := jsonEnvelopes(st.Value)[0]
	st.Value = bytes.Clone(st.Value)
	st.Value[e.start] ^= 1
	tampered := rebatch(t, st)

	p, _ := fetchOne(t, f, c, "pii-people", append(append([]byte{}, sealedFirst...), tampered...))
	if p.ErrorCode != 0 {
		t.Errorf("error %d with a good batch first: want the good batch, and the error on the next fetch", p.ErrorCode)
	}
	if !bytes.Equal(p.RecordBatches, first) {
		t.Errorf("got %q, want the first batch decrypted and nothing after it", values(t, p.RecordBatches))
	}
	wantCorrupt(t, f, c, "pii-people", tampered, "the second batch alone")
}

// TestTamperLineBreaks inserts line breaks, which a base64 decoder may
// skip, into envelopes: the text is no longer the envelope written, and
// must not decrypt.
func TestTamperLineBreaks(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, schemaConfig(), k)
	c, _ := testCtx(t, "")
	up := produceOne(t, f, c, "pii-people", makeBatch(t, kgo.NoCompression(), rec{value: avroPerson(t, "123-45-6789", []byte{1}, nil)}))
	stored := decodeRecords(t, up)[0]
	s := hamba.MustParse(personAvro)
	for _, brk := range []string{"\n", "\r", "\r\n"} {
		var p map[string]any
		if err := hamba.Unmarshal(s, stored.Value[5:], &p); err != nil {
			t.Fatal(err)
		}
		env := p["ssn"].(string)
		for _, at := range []int{0, len(env) / 2, len(env)} {
			p["ssn"] = env[:at] + brk + env[at:]
			body, err := hamba.Marshal(s, p)
			if err != nil {
				t.Fatal(err)
			}
			r := stored
			r.Value = append(append([]byte{}, stored.Value[:5]...), body...)
			wantCorrupt(t, f, c, "pii-people", rebatch(t, r), fmt.Sprintf("%q at %d of the ssn envelope", brk, at))
		}
	}
}
