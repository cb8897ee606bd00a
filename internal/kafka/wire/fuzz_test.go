package wire_test

// Fuzz targets for every reader in package wire that sees a peer's bytes.
// Each has f.Add seeds for edge cases and a committed corpus of real frames
// under testdata/fuzz/<FuzzName>/, written by TestWriteSeedCorpus:
//
//	go test ./internal/kafka/wire/ -run TestWriteSeedCorpus -update
//
// Inputs the fuzzer finds failing land in the same directories and stay
// there as regression seeds.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

var update = flag.Bool("update", false, "rewrite the seed corpus under testdata/fuzz")

// fuzzVersion maps any int16 onto [from, to].
func fuzzVersion(v, from, to int16) int16 {
	span := int(to-from) + 1
	return from + int16((int(v)%span+span)%span)
}

func sameHeader(a, b wire.RequestHeader) bool {
	return a.Key == b.Key && a.Version == b.Version && a.CorrelationID == b.CorrelationID &&
		a.ClientIDNull == b.ClientIDNull && (a.ClientID == nil) == (b.ClientID == nil) &&
		bytes.Equal(a.ClientID, b.ClientID) && a.Len == b.Len
}

func FuzzParseRequestHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 9))
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0, 1, 2})
	f.Add([]byte{0, 1, 0, 12, 0, 0, 0, 1, 0, 1, 'x', 0})
	f.Add([]byte{0, 1, 0, 12, 0, 0, 0, 1, 0, 1, 'x', 1, 0, 2, 'a', 'b'})
	f.Add([]byte{0x7f, 0xff, 0, 0, 0, 0, 0, 1, 0xff, 0xfe})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := wire.ParseRequestHeader(data)
		if err != nil {
			if !errors.Is(err, wire.ErrShortHeader) && !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if h.Len <= 0 || h.Len > len(data) {
			t.Fatalf("Len %d out of range for %d bytes", h.Len, len(data))
		}
		var cid *string
		if !h.ClientIDNull {
			s := string(h.ClientID)
			cid = &s
		} else if h.ClientID != nil {
			t.Fatal("null client id with bytes")
		}
		fixed := appendHeader(nil, h.Key, h.Version, h.CorrelationID, cid, nil)
		if len(fixed) > h.Len || !bytes.Equal(fixed, data[:len(fixed)]) {
			t.Fatalf("re-encoded header % x is not a prefix of the input % x", fixed, data[:h.Len])
		}
		if !wire.Known(h.Key, h.Version) || !wire.RequestHeaderFlexible(h.Key, h.Version) {
			if h.Len != len(fixed) {
				t.Fatalf("Len %d for a header without tags of %d bytes", h.Len, len(fixed))
			}
			return
		}
		tags := data[len(fixed):h.Len]
		if n, err := wire.SkipTags(tags); err != nil || n != len(tags) {
			t.Fatalf("tag section % x: SkipTags = %d, %v", tags, n, err)
		}
		if bytes.Equal(tags, []byte{0}) && !bytes.Equal(append(fixed, 0), data[:h.Len]) {
			t.Fatal("re-encoded flexible header differs")
		}
	})
}

func FuzzRequestHeaderSplit(f *testing.F) {
	f.Add([]byte{0, 1, 0, 12, 0, 0, 0, 1, 0, 1, 'x', 0, 9}, uint16(11))
	f.Add([]byte{0, 1, 0, 12, 0, 0, 0, 1, 0, 1, 'x', 1, 0, 2, 'a', 'b'}, uint16(13))
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0, 0}, uint16(10))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		c := int(cut) % (len(data) + 1)
		hp, errp := wire.ParseRequestHeader(data[:c])
		hf, errf := wire.ParseRequestHeader(data)
		switch {
		case errp == nil:
			// What a partial read parsed, the whole frame parses the same.
			if errf != nil || !sameHeader(hp, hf) {
				t.Fatalf("first %d bytes gave %+v, all %d gave %+v, %v", c, hp, len(data), hf, errf)
			}
		case !errors.Is(errp, wire.ErrShortHeader):
			// Malformed is final: more bytes cannot cure it.
			if errf == nil || errf.Error() != errp.Error() {
				t.Fatalf("first %d bytes: %v; all %d: %v", c, errp, len(data), errf)
			}
		}
		if errf == nil && hf.Len <= c && (errp != nil || !sameHeader(hp, hf)) {
			t.Fatalf("header of %d bytes parsed from %d, not from the first %d: %+v, %v", hf.Len, len(data), c, hp, errp)
		}
	})
}

func FuzzSkipTags(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{2, 0, 1, 'a', 5, 0})
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x0f, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := wire.SkipTags(data)
		if err == nil {
			if n <= 0 || n > len(data) {
				t.Fatalf("SkipTags read %d of %d bytes", n, len(data))
			}
			if m, err := wire.SkipTags(data[:n]); err != nil || m != n {
				t.Fatalf("on its own %d bytes: %d, %v", n, m, err)
			}
			if _, err := wire.SkipTags(data[:n-1]); err == nil {
				t.Fatalf("a tag section cut short parsed")
			}
		}
		// kmsg reads the same section as the tail of an ApiVersions v3
		// request (two empty compact strings, then tags).
		body := append([]byte{1, 1}, data...)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		kerr := req.ReadFrom(body)
		if err == nil && kerr != nil {
			t.Fatalf("SkipTags read %d bytes, kmsg failed: %v", n, kerr)
		}
		if kerr == nil && bytes.Equal(req.AppendTo(nil), body) && (err != nil || n != len(data)) {
			t.Fatalf("kmsg read the whole section; SkipTags = %d, %v", n, err)
		}
	})
}

func FuzzProduceAcks(f *testing.F) {
	f.Add([]byte{}, int16(0))
	f.Add([]byte{0xff, 0xff}, int16(2))
	f.Add([]byte{0xff, 0xff, 0, 1}, int16(3))
	f.Add([]byte{0x7f, 0xff, 0, 1}, int16(8))
	f.Add([]byte{0, 0xff, 0xff}, int16(9))
	f.Add([]byte{4, 'a', 'b', 'c', 0, 1}, int16(11))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0}, int16(12))
	maxV := wire.MaxVersion(wire.KeyProduce)
	f.Fuzz(func(t *testing.T, data []byte, version int16) {
		v := fuzzVersion(version, 0, maxV)
		acks, ok := wire.ProduceAcks(data, v)
		if ok {
			// The answer depends only on bytes already read.
			more := append(data[:len(data):len(data)], 0xee, 0xee)
			if a2, ok2 := wire.ProduceAcks(more, v); !ok2 || a2 != acks {
				t.Fatalf("longer body gave %d, %v; body gave %d", a2, ok2, acks)
			}
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		if err := req.ReadFrom(data); err == nil && (!ok || acks != req.Acks) {
			t.Fatalf("Produce v%d: kmsg read acks %d; ProduceAcks = %d, %v", v, req.Acks, acks, ok)
		}
	})
}

func fuzzSkim(t *testing.T, name string, skim skimmer, data []byte, v int16, resp message, topLevel func() bool) {
	has, ok := skim(data, v)
	if ok {
		if len(data) > 0 {
			if _, ok := skim(data[:len(data)-1], v); ok {
				t.Fatalf("%s v%d: body without its last byte parsed", name, v)
			}
		}
		if _, ok := skim(append(data[:len(data):len(data)], 0), v); ok {
			t.Fatalf("%s v%d: body with a trailing byte parsed", name, v)
		}
	} else if has {
		t.Fatalf("%s v%d: has without ok", name, v)
	}
	resp.SetVersion(v)
	if err := resp.ReadFrom(data); err != nil || !bytes.Equal(resp.AppendTo(nil), data) {
		return // kmsg cannot read it, or it is not kmsg's own encoding
	}
	if want := topLevel(); !ok || has != want {
		t.Fatalf("%s v%d: kmsg round-trips the body (top-level tags: %v); skimmer = (%v, %v)", name, v, want, has, ok)
	}
}

func FuzzFetchSkim(f *testing.F) {
	f.Add([]byte{}, int16(12))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, int16(12))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 2}, int16(16))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, int16(13))
	maxV := wire.MaxVersion(wire.KeyFetch)
	f.Fuzz(func(t *testing.T, data []byte, version int16) {
		v := fuzzVersion(version, 12, maxV)
		resp := kmsg.NewPtrFetchResponse()
		fuzzSkim(t, "Fetch", wire.FetchResponseHasTopLevelTags, data, v, resp, func() bool {
			return len(resp.Brokers) > 0 || resp.UnknownTags.Len() > 0
		})
	})
}

func FuzzProduceSkim(f *testing.F) {
	f.Add([]byte{}, int16(9))
	f.Add([]byte{1, 0, 0, 0, 0, 0}, int16(9))
	f.Add([]byte{1, 0, 0, 0, 0, 1, 0, 1, 2}, int16(10))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0}, int16(13))
	maxV := wire.MaxVersion(wire.KeyProduce)
	f.Fuzz(func(t *testing.T, data []byte, version int16) {
		v := fuzzVersion(version, 9, maxV)
		resp := kmsg.NewPtrProduceResponse()
		fuzzSkim(t, "Produce", wire.ProduceResponseHasTopLevelTags, data, v, resp, func() bool {
			return len(resp.Brokers) > 0 || resp.UnknownTags.Len() > 0
		})
	})
}

// byteFiller is the fuzzing counterpart of filler: it takes every value, array
// length, nil-ness and unknown tag from a byte string, so the fuzzer explores
// messages that kmsg encodes canonically and the differential check always
// applies. Once the bytes run out, everything is zero, nil or empty.
type byteFiller struct{ src []byte }

func (f *byteFiller) take() byte {
	if len(f.src) == 0 {
		return 0
	}
	b := f.src[0]
	f.src = f.src[1:]
	return b
}

func (f *byteFiller) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = f.take()
	}
	return b
}

func (f *byteFiller) bits(size uintptr) uint64 {
	var u uint64
	for range size {
		u = u<<8 | uint64(f.take())
	}
	return u
}

func (f *byteFiller) fill(v reflect.Value, depth int) {
	if depth > 16 {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(f.take()&1 == 1)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(int64(f.bits(v.Type().Size()))) // truncated to the field's width
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(f.bits(v.Type().Size()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(math.Float64frombits(f.bits(8)))
	case reflect.String:
		v.SetString(string(f.bytes(int(f.take() % 8))))
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if n := int(f.take() % 6); n > 0 {
				v.SetBytes(f.bytes(n - 1))
			}
			return
		}
		if n := int(f.take() % 4); n > 0 {
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				f.fill(s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Pointer:
		if f.take()&1 == 1 {
			p := reflect.New(v.Type().Elem())
			f.fill(p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Struct:
		if v.Type() == tagsType {
			if n := int(f.take() % 3); n > 0 {
				v.Addr().Interface().(*kmsg.Tags).Set(unknownTagBase+uint32(f.take()), f.bytes(n-1))
			}
			return
		}
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() && (depth > 0 || sf.Name != "Version") {
				f.fill(v.Field(i), depth+1)
			}
		}
	}
}

// FuzzSkimStructured builds Fetch or Produce responses from the fuzzer's
// bytes with kmsg and checks the skimmers' answer against the message.
func FuzzSkimStructured(f *testing.F) {
	f.Add([]byte{}, int16(0), false)
	f.Add(bytes.Repeat([]byte{1, 2, 3, 0xff, 0x80}, 40), int16(3), false)
	f.Add(bytes.Repeat([]byte{2, 7, 0, 0xfe, 0x41, 3}, 60), int16(4), true)
	f.Fuzz(func(t *testing.T, data []byte, version int16, produce bool) {
		s := skimmers[0]
		if produce {
			s = skimmers[1]
		}
		v := fuzzVersion(version, s.from, wire.MaxVersion(s.key))
		resp := s.response()
		resp.SetVersion(v)
		(&byteFiller{src: data}).fill(reflect.ValueOf(resp).Elem(), 0)
		var want bool
		switch r := resp.(type) {
		case *kmsg.FetchResponse:
			want = len(r.Brokers) > 0 || r.UnknownTags.Len() > 0
		case *kmsg.ProduceResponse:
			want = len(r.Brokers) > 0 || r.UnknownTags.Len() > 0
		}
		body := resp.AppendTo(nil)
		has, ok := s.skim(body, v)
		if !ok || has != want {
			t.Fatalf("%s v%d: skimmer = (%v, %v), want (%v, true) for % x", s.name, v, has, ok, want, body)
		}
		if _, ok := s.skim(body[:len(body)-1], v); ok {
			t.Fatalf("%s v%d: body without its last byte parsed", s.name, v)
		}
	})
}

// corpusSeed is one file of the committed seed corpus.
type corpusSeed struct {
	fuzz, name string
	args       []any
}

// seedCorpus builds the committed seed corpus: real frames and bodies as
// kmsg encodes them.
func seedCorpus() []corpusSeed {
	var seeds []corpusSeed
	add := func(fuzz, name string, args ...any) {
		seeds = append(seeds, corpusSeed{fuzz, name, args})
	}

	// Request frames (after the size), default bodies to keep them small.
	type hdr struct {
		key, version int16
		cid          *string
	}
	for _, h := range []hdr{
		{wire.KeyProduce, 3, kmsg.StringPtr("producer-1")},
		{wire.KeyProduce, 9, kmsg.StringPtr("producer-1")},
		{wire.KeyProduce, wire.MaxVersion(wire.KeyProduce), nil},
		{wire.KeyFetch, 11, kmsg.StringPtr("consumer")},
		{wire.KeyFetch, 12, kmsg.StringPtr("")},
		{wire.KeyFetch, wire.MaxVersion(wire.KeyFetch), kmsg.StringPtr("consumer")},
		{wire.KeyMetadata, wire.MaxVersion(wire.KeyMetadata), kmsg.StringPtr("admin")},
		{wire.KeyApiVersions, 0, kmsg.StringPtr("x")},
		{wire.KeyApiVersions, 3, kmsg.StringPtr("x")},
		{wire.KeySASLHandshake, 1, nil},
	} {
		req := kmsg.RequestForKey(h.key)
		req.SetVersion(h.version)
		var opts []kmsg.RequestFormatterOpt
		if h.cid != nil {
			opts = append(opts, kmsg.FormatterClientID(*h.cid))
		}
		frame := kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, 0x11223344)[4:]
		name := fmt.Sprintf("%s-v%d", strings.ToLower(kmsg.NameForKey(h.key)), h.version)
		add("FuzzParseRequestHeader", name, frame)
		add("FuzzRequestHeaderSplit", name, frame, uint16(10+len(frame)/3))
	}
	tagged := appendHeader(nil, wire.KeyFetch, wire.MaxVersion(wire.KeyFetch), 7, kmsg.StringPtr("c"),
		tagSection([]byte{0}, []byte("v"), []byte{0x80, 0x01}, bytes.Repeat([]byte{7}, 130)))
	add("FuzzParseRequestHeader", "fetch-tagged-header", tagged)
	add("FuzzRequestHeaderSplit", "fetch-tagged-header", tagged, uint16(len(tagged)-5))
	add("FuzzParseRequestHeader", "unknown-key", appendHeader(nil, 1000, 0, 1, kmsg.StringPtr("z"), []byte{0}))

	// Tag sections.
	add("FuzzSkipTags", "three-tags", tagSection([]byte{0}, nil, []byte{1}, []byte("abc"), []byte{0x90, 0x4e}, bytes.Repeat([]byte{1}, 200)))
	{
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.UnknownTags.Set(5, []byte("hello"))
		req.UnknownTags.Set(300, nil)
		add("FuzzSkipTags", "kmsg-apiversions-tags", req.AppendTo(nil)[2:])
	}

	// Produce request bodies.
	for _, v := range []int16{2, 3, 8, 9, wire.MaxVersion(wire.KeyProduce)} {
		for i, txn := range produceTxnIDs {
			if v < 3 && i > 0 {
				break
			}
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(v)
			var f filler
			f.fillMessage(req)
			req.TransactionID = txn
			req.Acks = []int16{-1, 0, 1}[i]
			add("FuzzProduceAcks", fmt.Sprintf("produce-v%d-txn%d", v, i), req.AppendTo(nil), v)
		}
	}

	// Fetch and Produce response bodies.
	for _, s := range skimmers {
		fuzz := "Fuzz" + s.name + "Skim"
		for _, v := range []int16{s.from, s.from + 1, wire.MaxVersion(s.key)} {
			for _, c := range s.cases(v) {
				if c.name == "empty" || c.name == "one partition" {
					continue
				}
				name := fmt.Sprintf("%s-v%d-%s", strings.ToLower(s.name), v, strings.ReplaceAll(strings.ReplaceAll(c.name, ",", ""), " ", "-"))
				add(fuzz, name, c.msg.AppendTo(nil), v)
			}
			filled := s.response()
			filled.SetVersion(v)
			var f filler
			f.fillMessage(filled)
			add(fuzz, fmt.Sprintf("%s-v%d-filled", strings.ToLower(s.name), v), filled.AppendTo(nil), v)
		}
	}
	// Byte strings for the structured skimmer fuzzer.
	for i, produce := range []bool{false, true} {
		var src []byte
		for j := range 400 {
			src = append(src, byte(j*37+i*11+1))
		}
		name := []string{"fetch", "produce"}[i]
		add("FuzzSkimStructured", name+"-mixed", src, int16(5+i), produce)
		add("FuzzSkimStructured", name+"-dense", bytes.Repeat([]byte{3, 3, 1, 0x7f, 2, 0x80, 1}, 80), int16(1), produce)
	}
	return seeds
}

// marshalCorpus writes a fuzz input in Go's corpus file format.
func marshalCorpus(args []any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch a := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", a)
		case int16:
			fmt.Fprintf(&b, "int16(%d)\n", a)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", a)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", a)
		default:
			panic(fmt.Sprintf("corpus type %T", a))
		}
	}
	return b.Bytes()
}

// TestWriteSeedCorpus checks the committed seed corpus is present and up to
// date; with -update it rewrites it.
func TestWriteSeedCorpus(t *testing.T) {
	seeds := seedCorpus()
	if len(seeds) < 40 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	for _, s := range seeds {
		path := filepath.Join("testdata", "fuzz", s.fuzz, "seed-"+s.name)
		want := marshalCorpus(s.args)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run with -update to write the seed corpus)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale (run with -update to rewrite it)", path)
		}
	}
}
