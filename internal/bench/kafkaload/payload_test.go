package kafkaload

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/straitgw/strait/bench/schemas"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestReferenceRecordEncodings(t *testing.T) {
	for _, kind := range []string{PayloadJSON, PayloadAvro, PayloadProtobuf} {
		p, err := newPayloads(kind, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, b := p.next(), p.next()
		var ra, rb Record
		switch kind {
		case PayloadJSON:
			if len(a) < 1000 || len(a) > 1050 {
				t.Errorf("JSON record is %d bytes, want about 1 KiB", len(a))
			}
			if err := json.Unmarshal(a, &ra); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal(b, &rb)
		case PayloadAvro:
			s := avro.MustParse(schemas.Avro)
			if err := avro.Unmarshal(s, a, &ra); err != nil {
				t.Fatal(err)
			}
			_ = avro.Unmarshal(s, b, &rb)
		case PayloadProtobuf:
			ra, rb = decodeProto(t, a), decodeProto(t, b)
		}
		if !uuidRE.MatchString(ra.ID) || ra.ID == rb.ID {
			t.Errorf("%s: ids %q and %q, want two distinct v4 UUIDs", kind, ra.ID, rb.ID)
		}
		if ra.Status != "ACTIVE" || ra.SSN != "123-45-6789" || len(ra.Notes) != 930 {
			t.Errorf("%s: record %+v", kind, ra)
		}
	}
}

func decodeProto(t *testing.T, b []byte) Record {
	t.Helper()
	var f [5]string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || num < 1 || num > 4 {
			t.Fatalf("bad protobuf tag %d/%d", num, typ)
		}
		b = b[n:]
		v, m := protowire.ConsumeString(b)
		if m < 0 {
			t.Fatal("bad protobuf string")
		}
		f[num], b = v, b[m:]
	}
	return Record{ID: f[1], Status: f[2], SSN: f[3], Notes: f[4]}
}

func TestRandomPayloadSize(t *testing.T) {
	p, err := newPayloads(PayloadRandom, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if v := p.next(); len(v) != 100 {
			t.Fatalf("value of %d bytes, want 100", len(v))
		}
	}
}

// Making a record is one allocation: the record, its header and the
// header's value together (random payloads come from a shared pool).
func TestNewRecordIsOneAllocation(t *testing.T) {
	r := &run{runID: 42}
	p, err := newPayloads(PayloadRandom, 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 5)
	if n := testing.AllocsPerRun(100, func() { _ = r.newRecord(p.next(), now) }); n != 1 {
		t.Errorf("%v allocations per record, want 1", n)
	}
	got, ok := r.intended(r.newRecord(p.next(), now))
	if !ok || !got.Equal(now) {
		t.Errorf("intended time read back as %v (%v), want %v", got, ok, now)
	}
}

// With a schema id, each reference record starts with the Confluent
// wire-format prefix, and the record after it is unchanged.
func TestSchemaIDPrefix(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		prefix []byte
	}{
		{PayloadJSON, []byte{0, 0, 0, 1, 2}},
		{PayloadAvro, []byte{0, 0, 0, 1, 2}},
		{PayloadProtobuf, []byte{0, 0, 0, 1, 2, 0}},
	} {
		bare, err := newPayloads(tc.kind, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := newPayloads(tc.kind, 0, 258)
		if err != nil {
			t.Fatal(err)
		}
		v := p.next()
		if string(v[:len(tc.prefix)]) != string(tc.prefix) {
			t.Errorf("%s: prefix % x, want % x", tc.kind, v[:len(tc.prefix)], tc.prefix)
		}
		if len(v)-len(tc.prefix) != len(bare.next()) || p.Size() != len(v) {
			t.Errorf("%s: %d bytes with the prefix, want the bare record's %d plus %d", tc.kind, len(v), bare.Size(), len(tc.prefix))
		}
	}
}
