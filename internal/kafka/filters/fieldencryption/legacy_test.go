package fieldencryption

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// legacyMessage is a magic 1 message (the format before record batches),
// uncompressed, at offset.
func legacyMessage(offset int64, key, value []byte) []byte {
	body := []byte{1, 0} // magic, attributes
	body = binary.BigEndian.AppendUint64(body, 1_700_000_000_000)
	for _, b := range [][]byte{key, value} {
		if b == nil {
			body = binary.BigEndian.AppendUint32(body, 0xffffffff)
			continue
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
	}
	m := binary.BigEndian.AppendUint64(nil, uint64(offset))
	m = binary.BigEndian.AppendUint32(m, uint32(4+len(body)))
	m = binary.BigEndian.AppendUint32(m, crc32.ChecksumIEEE(body))
	return append(m, body...)
}

// TestLegacyMessages: messages in the format before record batches cannot
// carry the marker. Fetched from a topic a rule selects, they hold no
// encrypted field and reach the client as stored, before and after
// batches that do; produced, they are refused, as they cannot be
// encrypted.
func TestLegacyMessages(t *testing.T) {
	k := testKMS(t, "kek")
	f := newFilter(t, jsonConfig("ssn"), k)
	c, _ := testCtx(t, "")
	legacy := append(legacyMessage(0, []byte("k"), []byte(`{"ssn":"111-11-1111"}`)), legacyMessage(1, nil, []byte(`{"ssn":"222-22-2222"}`))...)
	in := makeBatch(t, kgo.NoCompression(), rec{value: []byte(`{"ssn":"333-33-3333"}`)})
	sealed := produceOne(t, f, c, "pii-people", in)

	p, changed := fetchOne(t, f, c, "pii-people", legacy)
	if p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, legacy) || changed {
		t.Errorf("legacy messages alone: error %d, changed %v, %x", p.ErrorCode, changed, p.RecordBatches)
	}
	mixed := append(append(append([]byte{}, legacy...), sealed...), legacy...)
	want := append(append(append([]byte{}, legacy...), in...), legacy...)
	if p, _ := fetchOne(t, f, c, "pii-people", mixed); p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, want) {
		t.Errorf("legacy messages around a batch: error %d, got %x, want %x", p.ErrorCode, p.RecordBatches, want)
	}

	out := runProduceAll(t, f, c, producePartitions(map[string]map[int32][]byte{"pii-people": {0: legacy}}))
	wantRefused(t, out, "pii-people", 0, kerr.UnsupportedForMessageFormat, []string{"legacy message format", "cannot carry the field-encryption marker"}, "111-11-1111")
}
