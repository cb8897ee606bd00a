package wire_test

// Wire fidelity: every request and response kmsg can build, at every version
// kmsg knows, must survive encode → decode → encode byte for byte. Strait
// forwards frames it has decoded and re-encoded (and decodes frames built by
// its own filters), so any field kmsg drops or reorders on the way through
// would corrupt traffic silently. The test owns no knowledge of any message's
// layout: a reflection-based filler populates every exported field, whether or
// not it exists at the version under test (fields a version lacks are simply
// not encoded).

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// message is what kmsg's requests and responses have in common.
type message interface {
	Key() int16
	MaxVersion() int16
	SetVersion(int16)
	GetVersion() int16
	IsFlexible() bool
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

// kinds are requests and responses; newMessage builds a fresh default message
// of that kind for a key, or nil if kmsg does not know the key.
var kinds = []struct {
	name       string
	newMessage func(key int16) message
}{
	{"request", func(k int16) message {
		if r := kmsg.RequestForKey(k); r != nil {
			return r
		}
		return nil
	}},
	{"response", func(k int16) message {
		if r := kmsg.ResponseForKey(k); r != nil {
			return r
		}
		return nil
	}},
}

var tagsType = reflect.TypeFor[kmsg.Tags]()

// unknownTagBase is far above any tag number Kafka has assigned, so the
// unknown tags the filler adds can never be read back as known fields.
const unknownTagBase = 10000

// filler sets every exported field of a kmsg struct to a non-default value:
// numbers to distinct non-zero values, strings and byte slices non-empty,
// other slices to two filled elements, pointers to filled values, bools to
// true, UUIDs to non-zero, and each kmsg.Tags to one unknown tag.
type filler struct {
	n       uint64
	unknown []string // kinds the filler met but cannot fill
}

func (f *filler) fillMessage(m any) {
	f.fill(reflect.ValueOf(m).Elem(), 0)
}

func (f *filler) fill(v reflect.Value, depth int) {
	if depth > 16 {
		f.unknown = append(f.unknown, "nesting deeper than 16 at "+v.Type().String())
		return
	}
	f.n++
	n := f.n
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8:
		v.SetInt(int64(n%120 + 1))
	case reflect.Int16:
		v.SetInt(int64(n*257%32000 + 1))
	case reflect.Int32:
		v.SetInt(int64(n*100_003%2_000_000_000 + 1))
	case reflect.Int64, reflect.Int:
		v.SetInt(int64(n<<33 | n))
	case reflect.Uint8:
		v.SetUint(n%250 + 1)
	case reflect.Uint16:
		v.SetUint(n*257%65000 + 1)
	case reflect.Uint32:
		v.SetUint(n*100_003%4_000_000_000 + 1)
	case reflect.Uint64, reflect.Uint:
		v.SetUint(n<<33 | n)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.25)
	case reflect.String:
		v.SetString("s" + strconv.FormatUint(n, 10))
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if e := v.Index(i); e.Kind() == reflect.Uint8 {
				e.SetUint(uint64(byte(n+uint64(i))) | 1)
			} else {
				f.fill(e, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := reflect.MakeSlice(v.Type(), 4, 4)
			for i := range 4 {
				b.Index(i).SetUint(uint64(byte(n)+byte(i)) | 0x80)
			}
			v.Set(b)
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == tagsType {
			// Only encoded at flexible versions; harmless elsewhere.
			v.Addr().Interface().(*kmsg.Tags).Set(uint32(unknownTagBase+n%1000), []byte{byte(n), 0x42, byte(n >> 8)})
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() || depth == 0 && sf.Name == "Version" {
				continue
			}
			f.fill(v.Field(i), depth+1)
		}
	default:
		f.unknown = append(f.unknown, v.Type().String())
	}
}

// firstDiff returns the first offset at which a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// window shows up to 16 bytes of b around off, for failure messages.
func window(b []byte, off int) string {
	lo, hi := max(off-8, 0), min(off+8, len(b))
	if lo >= hi {
		return "(end)"
	}
	return fmt.Sprintf("% x", b[lo:hi])
}

// roundTrip encodes m, decodes the bytes into a fresh message of the same key
// and version, encodes that, and reports any difference.
func roundTrip(t *testing.T, kindName string, fresh message, m message) (encoded []byte) {
	t.Helper()
	v := m.GetVersion()
	first := m.AppendTo(nil)
	fresh.SetVersion(v)
	if err := fresh.ReadFrom(first); err != nil {
		t.Errorf("%s %s v%d: decoding its own %d-byte encoding: %v", kmsg.NameForKey(m.Key()), kindName, v, len(first), err)
		return first
	}
	second := fresh.AppendTo(nil)
	if d := firstDiff(first, second); d >= 0 {
		t.Errorf("%s %s v%d: re-encoding differs at offset %d of %d/%d bytes: first % s, second % s",
			kmsg.NameForKey(m.Key()), kindName, v, d, len(first), len(second), window(first, d), window(second, d))
	}
	return first
}

// allKeyVersions calls fn for every key and version kmsg knows, for requests
// and responses, and returns how many it visited.
func allKeyVersions(fn func(kindName string, newMessage func() message, key, version int16)) int {
	count := 0
	for _, kd := range kinds {
		for k := int16(0); k < wire.MaxKeys; k++ {
			m := kd.newMessage(k)
			if m == nil {
				continue
			}
			for v := int16(0); v <= m.MaxVersion(); v++ {
				fn(kd.name, func() message { return kd.newMessage(k) }, k, v)
				count++
			}
		}
	}
	return count
}

// expectedKeyVersions is the number of (kind, key, version) triples kmsg
// v1.15.1 knows: 367 request versions over its API keys, and as many
// response versions. It only grows with kmsg upgrades. The fidelity tests
// check they visited at least this many, so they cannot silently test
// nothing.
const expectedKeyVersions = 734

func TestFidelityFilled(t *testing.T) {
	var sizes []int
	count := allKeyVersions(func(kindName string, newMessage func() message, k, v int16) {
		m := newMessage()
		m.SetVersion(v)
		var f filler
		f.fillMessage(m)
		if m.GetVersion() != v {
			t.Fatalf("%s %s: filler changed the version", kmsg.NameForKey(k), kindName)
		}
		if len(f.unknown) > 0 {
			t.Errorf("%s %s: filler cannot fill %v", kmsg.NameForKey(k), kindName, f.unknown)
		}
		b := roundTrip(t, kindName, newMessage(), m)
		sizes = append(sizes, len(b))

		// A filled message must differ from a default one at the same
		// version unless the version has no fields at all; this proves
		// the filler reached the encoder.
		d := newMessage()
		d.SetVersion(v)
		if bytes.Equal(b, d.AppendTo(nil)) && len(b) > 1 {
			t.Errorf("%s %s v%d: filled encoding equals the default one", kmsg.NameForKey(k), kindName, v)
		}
	})
	if count < expectedKeyVersions {
		t.Fatalf("fidelity visited %d key/versions, want at least %d", count, expectedKeyVersions)
	}
	t.Logf("fidelity (filled) covered %d request and response key/versions", count)
}

func TestFidelityDefault(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		count := allKeyVersions(func(kindName string, newMessage func() message, k, v int16) {
			m := newMessage()
			m.SetVersion(v)
			roundTrip(t, kindName, newMessage(), m)
		})
		if count < expectedKeyVersions {
			t.Fatalf("visited %d key/versions, want at least %d", count, expectedKeyVersions)
		}
	})
	// A literal zero struct, as a caller writing kmsg.FetchRequest{} gets:
	// no Default() call, so tagged fields hold 0 rather than their
	// defaults and are encoded.
	t.Run("zero", func(t *testing.T) {
		count := allKeyVersions(func(kindName string, newMessage func() message, k, v int16) {
			m := reflect.New(reflect.TypeOf(newMessage()).Elem()).Interface().(message)
			m.SetVersion(v)
			roundTrip(t, kindName, newMessage(), m)
		})
		if count < expectedKeyVersions {
			t.Fatalf("visited %d key/versions, want at least %d", count, expectedKeyVersions)
		}
	})
}

// TestFidelityUnknownTagsSurvive checks the filler's unknown tags really are
// carried through decode for flexible versions (the byte comparison alone
// would pass if both encodings dropped them).
func TestFidelityUnknownTagsSurvive(t *testing.T) {
	flexible := 0
	allKeyVersions(func(kindName string, newMessage func() message, k, v int16) {
		m := newMessage()
		m.SetVersion(v)
		if !m.IsFlexible() {
			return
		}
		flexible++
		var f filler
		f.fillMessage(m)
		got := newMessage()
		got.SetVersion(v)
		if err := got.ReadFrom(m.AppendTo(nil)); err != nil {
			t.Errorf("%s %s v%d: %v", kmsg.NameForKey(k), kindName, v, err)
			return
		}
		tags := reflect.ValueOf(got).Elem().FieldByName("UnknownTags").Addr().Interface().(*kmsg.Tags)
		if tags.Len() != 1 {
			t.Errorf("%s %s v%d: decoded %d top-level unknown tags, want 1", kmsg.NameForKey(k), kindName, v, tags.Len())
		}
	})
	if flexible == 0 {
		t.Fatal("no flexible versions visited")
	}
}

// TestKeyTableMatchesKmsg checks wire's per-key table against kmsg for every
// key and version, and that MaxKeys covers every key kmsg knows.
func TestKeyTableMatchesKmsg(t *testing.T) {
	for k := int16(wire.MaxKeys); k < 4096; k++ {
		if kmsg.RequestForKey(k) != nil {
			t.Errorf("kmsg knows key %d, beyond wire.MaxKeys=%d", k, wire.MaxKeys)
		}
	}
	for k := int16(-1); k < wire.MaxKeys; k++ {
		r := kmsg.RequestForKey(k)
		if r == nil {
			if wire.KnownKey(k) || wire.Known(k, 0) || wire.MaxVersion(k) != -1 {
				t.Errorf("key %d: wire knows it, kmsg does not", k)
			}
			continue
		}
		name := kmsg.NameForKey(k)
		if !wire.KnownKey(k) || wire.MaxVersion(k) != r.MaxVersion() || wire.KeyName(k) != name {
			t.Errorf("%s: wire says known=%v max=%d name=%q, kmsg max=%d", name, wire.KnownKey(k), wire.MaxVersion(k), wire.KeyName(k), r.MaxVersion())
		}
		if wire.Known(k, -1) || wire.Known(k, r.MaxVersion()+1) {
			t.Errorf("%s: versions -1 or max+1 are Known", name)
		}
		resp := kmsg.ResponseForKey(k)
		for v := int16(0); v <= r.MaxVersion(); v++ {
			r.SetVersion(v)
			resp.SetVersion(v)
			if !wire.Known(k, v) {
				t.Errorf("%s v%d: not Known", name, v)
			}
			if got, want := wire.Flexible(k, v), r.IsFlexible(); got != want {
				t.Errorf("%s v%d: Flexible=%v, kmsg request says %v", name, v, got, want)
			}
			if got, want := wire.Flexible(k, v), resp.IsFlexible(); got != want {
				t.Errorf("%s v%d: Flexible=%v, kmsg response says %v", name, v, got, want)
			}
			if got, want := wire.RequestHeaderFlexible(k, v), r.IsFlexible(); got != want {
				t.Errorf("%s v%d: RequestHeaderFlexible=%v, want %v", name, v, got, want)
			}
			// KIP-511: the ApiVersions response header is always v0.
			want := resp.IsFlexible() && k != wire.KeyApiVersions
			if got := wire.ResponseHeaderFlexible(k, v); got != want {
				t.Errorf("%s v%d: ResponseHeaderFlexible=%v, want %v", name, v, got, want)
			}
		}
	}
	if wire.KeyName(-1) == "" || wire.KeyName(wire.MaxKeys) == "" {
		t.Error("KeyName of an unknown key is empty")
	}
}
