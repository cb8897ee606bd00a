package kafkaload

import (
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/straitgw/strait/bench/schemas"
)

// Payload kinds for Workload.Payload.
const (
	PayloadRandom   = "random"
	PayloadJSON     = "json"
	PayloadAvro     = "avro"
	PayloadProtobuf = "protobuf"
)

// PayloadKinds lists the valid Workload.Payload values.
var PayloadKinds = []string{PayloadRandom, PayloadJSON, PayloadAvro, PayloadProtobuf}

// Record is the reference record (bench/schemas): the shape the
// field-encryption work measures against.
type Record struct {
	ID     string `json:"id" avro:"id"`
	Status string `json:"status" avro:"status"`
	SSN    string `json:"ssn" avro:"ssn"`
	Notes  string `json:"notes" avro:"notes"`
}

// notesLen is the length of the reference record's notes field; with it the
// JSON encoding is about 1 KiB.
const notesLen = 930

// ReferenceRecord returns the reference record with the given id.
func ReferenceRecord(id string) Record {
	return Record{ID: id, Status: "ACTIVE", SSN: "123-45-6789", Notes: notes()}
}

func notes() string {
	const text = "Customer reported intermittent delivery delays on the evening route; " +
		"follow-up scheduled with the regional depot and the account manager. "
	var b strings.Builder
	for b.Len() < notesLen {
		b.WriteString(text)
	}
	return b.String()[:notesLen]
}

// EncodeRecord encodes r in the given payload kind (json, avro, protobuf).
func EncodeRecord(kind string, r Record) ([]byte, error) {
	switch kind {
	case PayloadJSON:
		return json.Marshal(r)
	case PayloadAvro:
		s, err := avro.Parse(schemas.Avro)
		if err != nil {
			return nil, fmt.Errorf("bench/schemas/record.avsc: %w", err)
		}
		return avro.Marshal(s, r)
	case PayloadProtobuf:
		var b []byte
		for i, v := range []string{r.ID, r.Status, r.SSN, r.Notes} {
			b = protowire.AppendTag(b, protowire.Number(i+1), protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
		return b, nil
	}
	return nil, fmt.Errorf("payload %q is not a record encoding", kind)
}

// payloads makes record values. Random payloads are slices of one random
// buffer (no per-record work); reference records are one encoded template
// per run whose 36-byte id is overwritten in each record's copy, so every
// record carries a distinct UUID at the cost of one copy.
type payloads struct {
	kind   string
	size   int
	pool   []byte // random: size*poolRecords bytes
	tmpl   []byte // reference record encoding
	idAt   int    // offset of the id in tmpl
	random *rand.ChaCha8
}

const poolRecords = 256

func newPayloads(kind string, size, schemaID int) (*payloads, error) {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	p := &payloads{kind: kind, size: size, random: rand.NewChaCha8(seed)}
	if kind == PayloadRandom {
		p.pool = make([]byte, size*poolRecords+1)
		_, _ = p.random.Read(p.pool)
		return p, nil
	}
	const placeholder = "00000000-0000-4000-8000-000000000000"
	tmpl, err := EncodeRecord(kind, ReferenceRecord(placeholder))
	if err != nil {
		return nil, err
	}
	if schemaID > 0 {
		tmpl = append(wirePrefix(kind, schemaID), tmpl...)
	}
	p.tmpl = tmpl
	p.idAt = strings.Index(string(tmpl), placeholder)
	if p.idAt < 0 {
		return nil, fmt.Errorf("payload %q: id not found in the encoded template", kind)
	}
	return p, nil
}

// wirePrefix is the Confluent wire-format prefix of a record of the given
// kind under schema id: magic byte 0, the id big-endian, and for Protobuf
// the message-index list [0], written as the single byte 0.
func wirePrefix(kind string, id int) []byte {
	b := []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
	if kind == PayloadProtobuf {
		b = append(b, 0)
	}
	return b
}

// Size is the encoded size of each value.
func (p *payloads) Size() int {
	if p.tmpl != nil {
		return len(p.tmpl)
	}
	return p.size
}

// next returns a value for one record. Random values share the pool's
// memory: producers never modify a value, so sharing is safe.
func (p *payloads) next() []byte {
	if p.tmpl == nil {
		off := p.random.Uint64() % poolRecords
		return p.pool[int(off)*p.size : int(off+1)*p.size]
	}
	v := make([]byte, len(p.tmpl))
	copy(v, p.tmpl)
	p.uuid(v[p.idAt : p.idAt+36])
	return v
}

// uuid writes a random version-4 UUID in text form into dst (36 bytes).
func (p *payloads) uuid(dst []byte) {
	var u [16]byte
	_, _ = p.random.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	hex.Encode(dst[0:8], u[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], u[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], u[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], u[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:36], u[10:16])
}

func newSeed() *rand.ChaCha8 {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}

// clone returns a generator sharing p's pool and template but with its own
// random source, for one producer goroutine.
func (p *payloads) clone() *payloads {
	c := *p
	c.random = newSeed()
	return &c
}
