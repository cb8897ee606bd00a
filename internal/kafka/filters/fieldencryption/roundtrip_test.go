package fieldencryption

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// codecs are every compression codec of a record batch.
var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// jsonRecords are JSON values that exercise the splicer: odd whitespace,
// escapes, unicode, nested arrays, the field anywhere in its object.
var jsonRecords = [][]byte{
	[]byte(`{"id":"a1","status":"ACTIVE","ssn":"123-45-6789","notes":"x"}`),
	[]byte("  {\n\t\"ssn\" :\t\"123-45-6789\" ,\"n\":[1, 2.50e+3,[ {\"a\":[]} ]] }\r\n"),
	[]byte(`{"name":"Zoë \u00e9\"q\\","ssn":"\u0031\u0032\u0033-45-6789","z":null}`),
	[]byte(`{"a":{"ssn":"nested, not top-level"},"ssn":"日本語テキスト🙂"}`),
	[]byte(`{"ssn":""}`),
	[]byte(`{"ssn":null,"other":1}`), // null: nothing to encrypt, passes untouched
}

// TestJSONRoundTrip produces JSON records through the filter, checks what
// the broker would store (the ssn replaced by an envelope, every other
// byte as produced, a marker header), then fetches them back through the
// filter and checks they are the records as produced, byte for byte, for
// every codec.
func TestJSONRoundTrip(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn"), k)
	envelope := regexp.MustCompile(`"ssn"\s*:\s*"([A-Za-z0-9_-]*)"`)
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			var recs []rec
			for i, v := range jsonRecords {
				recs = append(recs, rec{key: []byte{byte('a' + i)}, value: v, headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}})
			}
			in := makeBatch(t, codec, recs...)
			c, _ := testCtx(t, "")
			up, refused := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-people": in}))
			if len(refused) != 0 {
				t.Fatalf("refused: %+v", refused)
			}
			stored := decodeRecords(t, up["pii-people"])
			for i, r := range stored {
				orig := jsonRecords[i]
				if bytes.Contains(orig, []byte(`"ssn":null`)) {
					if !bytes.Equal(r.Value, orig) || len(r.Headers) != 1 {
						t.Errorf("record %d with a null ssn changed: %q, %d headers", i, r.Value, len(r.Headers))
					}
					continue
				}
				if len(r.Headers) != 2 || r.Headers[0].Key != markerKey || r.Headers[1].Key != "h" {
					t.Errorf("record %d headers %+v: want the marker, then the record's own", i, r.Headers)
				}
				if bytes.Contains(r.Value, []byte("6789")) || bytes.Contains(r.Value, []byte("語")) {
					t.Errorf("record %d stored with its ssn in clear: %q", i, r.Value)
				}
				// Every byte but the (top-level, last) ssn's is as produced.
				sm := envelope.FindAllSubmatchIndex(r.Value, -1)
				if sm == nil {
					t.Fatalf("record %d: no envelope at ssn: %q", i, r.Value)
				}
				env := r.Value[sm[len(sm)-1][2]:sm[len(sm)-1][3]]
				om := regexp.MustCompile(`"ssn"\s*:\s*"((?:[^"\\]|\\.)*)"`).FindAllSubmatchIndex(orig, -1)
				last := om[len(om)-1]
				want := append(append(append([]byte{}, orig[:last[2]]...), env...), orig[last[3]:]...)
				if !bytes.Equal(r.Value, want) {
					t.Errorf("record %d: bytes other than the ssn changed:\n got %q\nwant %q", i, r.Value, want)
				}
				raw, err := base64.RawURLEncoding.DecodeString(string(env))
				if err != nil || len(raw) != last[3]-last[2]+16 {
					t.Errorf("record %d: envelope %q (%d bytes) for a %d-byte value: want ciphertext and a 16-byte tag", i, env, len(raw), last[3]-last[2])
				}
			}
			got, changed := runFetch(t, f, c, map[string][]byte{"pii-people": up["pii-people"]})
			if !changed {
				t.Fatal("fetch of encrypted records left unchanged")
			}
			p := got["pii-people"]
			if p.ErrorCode != 0 {
				t.Fatalf("fetch error %d", p.ErrorCode)
			}
			if name == "none" && !bytes.Equal(p.RecordBatches, in) {
				t.Errorf("fetched batch differs from the produced one:\n got %x\nwant %x", p.RecordBatches, in)
			}
			back := decodeRecords(t, p.RecordBatches)
			want := decodeRecords(t, in)
			for i := range want {
				if !bytes.Equal(back[i].Value, want[i].Value) || !bytes.Equal(back[i].Key, want[i].Key) || len(back[i].Headers) != 1 {
					t.Errorf("record %d back as %q (%d headers), produced %q", i, back[i].Value, len(back[i].Headers), want[i].Value)
				}
			}
		})
	}
}

// TestEnvelopeSize prints what encryption adds to one field, and checks the
// seed's 11-byte ssn is stored in at most 64 characters.
func TestEnvelopeSize(t *testing.T) {
	k := testKMS(t, "kek")
	for _, mode := range []string{modeRandom, modeDeterministic} {
		cfg := jsonConfig()
		cfg.Rules[0].Value.Fields = []Field{{Path: "ssn", Mode: mode}}
		f := newFilter(t, cfg, k)
		in := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"123-45-6789"}`)})
		c, _ := testCtx(t, "")
		up, _ := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-x": in}))
		r := decodeRecords(t, up["pii-x"])[0]
		env := regexp.MustCompile(`"ssn":"([^"]*)"`).FindSubmatch(r.Value)[1]
		t.Logf("%s mode: the 11-byte ssn is stored as %d characters; the record's marker header is %d bytes", mode, len(env), len(r.Headers[0].Value))
		if len(env) > 64 {
			t.Errorf("%s mode: the 11-byte ssn takes %d characters, want at most 64", mode, len(env))
		}
	}
}

// TestForgedMarker: a produced record that carries the marker header is
// refused, even with no field to encrypt: passed on, it would fail every
// fetch of its partition.
func TestForgedMarker(t *testing.T) {
	f := newFilter(t, jsonConfig("ssn"), testKMS(t, "kek"))
	for _, hs := range [][]kmsg.Header{
		{{Key: markerKey, Value: []byte{1, 0}}},
		{{Key: "a", Value: []byte("b")}, {Key: markerKey, Value: nil}},
	} {
		in := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":null}`), headers: hs})
		c, _ := testCtx(t, "")
		up, refused := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-x": in}))
		p, ok := refused["pii-x"]
		if !ok || up["pii-x"] != nil {
			t.Fatalf("headers %v: not refused (upstream %d bytes)", hs, len(up["pii-x"]))
		}
		if p.ErrorCode != kerr.InvalidRecord.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "strait.fields") {
			t.Errorf("refused with %d %v, want INVALID_RECORD naming the header", p.ErrorCode, p.ErrorMessage)
		}
	}
}

// TestLongHeaderCount: a record whose header count is written longer than
// needed (0 as 0x80 0x00, which varint readers accept), and whose key alone
// has a field to encrypt, keeps its value intact both ways: the value's
// end is read, not worked out from the count's width.
func TestLongHeaderCount(t *testing.T) {
	cfg := jsonConfig()
	cfg.Rules[0].Value = nil
	cfg.Rules[0].Key = &Part{Format: formatJSON, Fields: []Field{{Path: "ssn"}}}
	f := newFilter(t, cfg, testKMS(t, "kek"))
	key, value := []byte(`{"ssn":"123-45-6789"}`), []byte("plain value")
	body := []byte{0, 0, 0} // attributes, timestamp delta, offset delta
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = append(body, 0x80, 0x00) // header count 0, in two bytes
	raw := binary.AppendVarint(nil, int64(len(body)))
	raw = append(raw, body...)
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: raw}
	in := b.AppendTo(nil)
	binary.BigEndian.PutUint32(in[8:], uint32(len(in)-12))
	binary.BigEndian.PutUint32(in[17:], crc32.Checksum(in[21:], castagnoli))

	c, _ := testCtx(t, "")
	up, refused := runProduce(t, f, c, produce(-1, map[string][]byte{"pii-x": in}))
	if len(refused) != 0 {
		t.Fatalf("refused: %+v", refused)
	}
	stored := decodeRecords(t, up["pii-x"])[0]
	if !bytes.Equal(stored.Value, value) || len(stored.Headers) != 1 || bytes.Contains(stored.Key, []byte("6789")) {
		t.Fatalf("stored key %q value %q with %d headers: want the key's ssn encrypted, the value as produced, the marker", stored.Key, stored.Value, len(stored.Headers))
	}
	got, _ := runFetch(t, f, c, map[string][]byte{"pii-x": up["pii-x"]})
	back := decodeRecords(t, got["pii-x"].RecordBatches)[0]
	if !bytes.Equal(back.Key, key) || !bytes.Equal(back.Value, value) || len(back.Headers) != 0 {
		t.Errorf("fetched key %q value %q with %d headers, want %q, %q and none", back.Key, back.Value, len(back.Headers), key, value)
	}
}

// TestKEKTemplates: the rule's KEK and a field's own are templates; each
// topic's values are sealed under the KEKs its name gives, which the
// marker names, and open again.
func TestKEKTemplates(t *testing.T) {
	k := testKMS(t, "pii-a-kek", "pii-a-mail", "pii-b-kek", "pii-b-mail")
	cfg := jsonConfig()
	cfg.Rules[0].KEK = "{topic}-kek"
	cfg.Rules[0].Value.Fields = []Field{{Path: "ssn"}, {Path: "email", KEK: "{topic}-mail", Mode: modeDeterministic}}
	f := newFilter(t, cfg, k)
	value := []byte(`{"ssn":"123-45-6789","email":"a@example.com"}`)
	c, _ := testCtx(t, "")
	for _, topic := range []string{"pii-a", "pii-b"} {
		in := makeBatch(t, kgo.NoCompression(), rec{value: value})
		up, refused := runProduce(t, f, c, produce(-1, map[string][]byte{topic: in}))
		if len(refused) != 0 {
			t.Fatalf("%s refused: %+v", topic, refused)
		}
		stored := decodeRecords(t, up[topic])[0]
		var m marker
		if err := m.parse(stored.Headers[0].Value); err != nil {
			t.Fatal(err)
		}
		if len(m.keks) != 2 || string(m.keks[0].name) != topic+"-kek" || string(m.keks[1].name) != topic+"-mail" {
			t.Errorf("%s: the marker names KEKs %q and %q, want %s-kek and %s-mail", topic, m.keks[0].name, m.keks[len(m.keks)-1].name, topic, topic)
		}
		got, _ := runFetch(t, f, c, map[string][]byte{topic: up[topic]})
		if back := decodeRecords(t, got[topic].RecordBatches)[0]; !bytes.Equal(back.Value, value) {
			t.Errorf("%s: fetched %q, produced %q", topic, back.Value, value)
		}
	}
}
