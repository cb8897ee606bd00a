package wire_test

// Differential tests: the hand-written readers in package wire against the
// frames kmsg (the franz-go client's own encoder) builds.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// clientIDs are the client ids the header tests send; nil is a null id.
var clientIDs = []*string{nil, kmsg.StringPtr(""), kmsg.StringPtr("x"), kmsg.StringPtr(strings.Repeat("client-", 60))}

func TestParseRequestHeaderMatchesKmsg(t *testing.T) {
	count := 0
	for k := int16(0); k < wire.MaxKeys; k++ {
		if kmsg.RequestForKey(k) == nil {
			continue
		}
		for v := int16(0); v <= kmsg.RequestForKey(k).MaxVersion(); v++ {
			if k == 7 && v == 0 {
				// ControlledShutdown v0 has header v0 (no client id),
				// which ParseRequestHeader deliberately does not read.
				continue
			}
			for _, filled := range []bool{false, true} {
				req := kmsg.RequestForKey(k)
				req.SetVersion(v)
				if filled {
					var f filler
					f.fillMessage(req)
				}
				body := req.AppendTo(nil)
				for i, cid := range clientIDs {
					var opts []kmsg.RequestFormatterOpt
					if cid != nil {
						opts = append(opts, kmsg.FormatterClientID(*cid))
					}
					corr := int32(0x01020304) * int32(i+1)
					frame := kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, corr)
					checkHeader(t, frame, req, corr, cid, body)
					count++
				}
			}
		}
	}
	if count < 4*2*(expectedKeyVersions/2-1) {
		t.Fatalf("checked %d frames only", count)
	}
}

func checkHeader(t *testing.T, frame []byte, req kmsg.Request, corr int32, cid *string, body []byte) {
	t.Helper()
	k, v := req.Key(), req.GetVersion()
	name := kmsg.NameForKey(k)
	size, err := wire.FrameSize([4]byte(frame[:4]), wire.DefaultMaxFrame)
	if err != nil || size != len(frame)-4 {
		t.Fatalf("%s v%d: FrameSize = %d, %v; frame has %d bytes after the size", name, v, size, err, len(frame)-4)
	}
	b := frame[4:]
	h, err := wire.ParseRequestHeader(b)
	if err != nil {
		t.Fatalf("%s v%d: %v", name, v, err)
	}
	if h.Key != k || h.Version != v || h.CorrelationID != corr {
		t.Errorf("%s v%d: parsed key %d version %d correlation %d, want %d %d %d", name, v, h.Key, h.Version, h.CorrelationID, k, v, corr)
	}
	if cid == nil {
		if !h.ClientIDNull || h.ClientID != nil {
			t.Errorf("%s v%d: null client id parsed as %q (null=%v)", name, v, h.ClientID, h.ClientIDNull)
		}
	} else if h.ClientIDNull || string(h.ClientID) != *cid {
		t.Errorf("%s v%d: client id %q (null=%v), want %q", name, v, h.ClientID, h.ClientIDNull, *cid)
	}
	if h.Len <= 0 || h.Len > len(b) {
		t.Fatalf("%s v%d: Len %d out of range for %d bytes", name, v, h.Len, len(b))
	}
	if d := firstDiff(b[h.Len:], body); d >= 0 {
		t.Errorf("%s v%d: body at Len=%d differs from AppendTo at offset %d", name, v, h.Len, d)
	}
	// Every strict prefix of the header is too short (a partial read).
	for i := range h.Len {
		if _, err := wire.ParseRequestHeader(b[:i]); !errors.Is(err, wire.ErrShortHeader) {
			t.Fatalf("%s v%d: header cut to %d of %d bytes: err %v, want ErrShortHeader", name, v, i, h.Len, err)
		}
	}
}

// appendHeader builds a request header by hand, with optional raw bytes for
// its tagged-field section.
func appendHeader(dst []byte, key, version int16, corr int32, cid *string, tags []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if cid == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*cid)))
		dst = append(dst, *cid...)
	}
	return append(dst, tags...)
}

// tagSection encodes tags (key, value pairs, in order) as Kafka does.
func tagSection(kv ...[]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(kv)/2))
	for i := 0; i+1 < len(kv); i += 2 {
		b = append(b, kv[i]...)
		b = binary.AppendUvarint(b, uint64(len(kv[i+1])))
		b = append(b, kv[i+1]...)
	}
	return b
}

func TestParseRequestHeaderTags(t *testing.T) {
	tags := tagSection([]byte{0}, []byte("v"), []byte{0x80, 0x01}, bytes.Repeat([]byte{7}, 200))
	for _, k := range []int16{wire.KeyProduce, wire.KeyFetch, wire.KeyMetadata, wire.KeyApiVersions} {
		v := wire.MaxVersion(k)
		if !wire.RequestHeaderFlexible(k, v) {
			t.Fatalf("%s v%d not flexible", wire.KeyName(k), v)
		}
		body := []byte("body")
		b := append(appendHeader(nil, k, v, 9, kmsg.StringPtr("cid"), tags), body...)
		h, err := wire.ParseRequestHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(b) - len(body); h.Len != want {
			t.Errorf("%s v%d with tags: Len %d, want %d", wire.KeyName(k), v, h.Len, want)
		}
		for i := range len(b) - len(body) {
			if _, err := wire.ParseRequestHeader(b[:i]); !errors.Is(err, wire.ErrShortHeader) {
				t.Errorf("cut to %d: %v", i, err)
			}
		}
	}
}

func TestParseRequestHeaderUnknown(t *testing.T) {
	cid := kmsg.StringPtr("abc")
	for _, c := range []struct{ key, version int16 }{
		{-1, 0}, {wire.MaxKeys, 0}, {0x7fff, 3}, {wire.KeyFetch, wire.MaxVersion(wire.KeyFetch) + 1}, {wire.KeyProduce, -1},
	} {
		if wire.Known(c.key, c.version) {
			t.Fatalf("%d v%d is Known", c.key, c.version)
		}
		// A tag-looking byte follows the client id; it must not be read,
		// since Strait does not know whether this header version has tags.
		b := appendHeader(nil, c.key, c.version, 5, cid, []byte{0x01, 0x02})
		h, err := wire.ParseRequestHeader(b)
		if err != nil {
			t.Fatalf("%d v%d: %v", c.key, c.version, err)
		}
		if h.Key != c.key || h.Version != c.version || h.CorrelationID != 5 || string(h.ClientID) != "abc" {
			t.Errorf("%d v%d: parsed %+v", c.key, c.version, h)
		}
		if h.Len != 10+len(*cid) {
			t.Errorf("%d v%d: Len %d, want %d (fixed part and client id)", c.key, c.version, h.Len, 10+len(*cid))
		}
	}
}

func TestParseRequestHeaderMalformed(t *testing.T) {
	for _, n := range []uint16{0xfffe, 0x8000, 0xff00} {
		b := binary.BigEndian.AppendUint16(make([]byte, 8), n)
		b = append(b, make([]byte, 64)...)
		if _, err := wire.ParseRequestHeader(b); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("client id length %#x: err %v, want ErrMalformed", n, err)
		}
	}
	// A client id longer than the frame.
	b := binary.BigEndian.AppendUint16(make([]byte, 8), 5)
	if _, err := wire.ParseRequestHeader(append(b, "abcd"...)); !errors.Is(err, wire.ErrShortHeader) {
		t.Errorf("client id past the end: err %v", err)
	}
	// A flexible header whose tag section is cut or over-long.
	for _, tags := range [][]byte{nil, {0x01}, {0x01, 0x00}, {0x01, 0x00, 0x05, 'a'}, {0x80}, {0xff, 0xff, 0xff, 0xff, 0x7f}} {
		b := appendHeader(nil, wire.KeyFetch, wire.MaxVersion(wire.KeyFetch), 1, nil, tags)
		if _, err := wire.ParseRequestHeader(b); !errors.Is(err, wire.ErrShortHeader) {
			t.Errorf("tags % x: err %v, want ErrShortHeader", tags, err)
		}
	}
}

func TestFrameSize(t *testing.T) {
	for _, c := range []struct {
		b    [4]byte
		max  int64
		want int
		err  bool
	}{
		{[4]byte{0, 0, 0, 0}, 10, 0, false},
		{[4]byte{0, 0, 0, 10}, 10, 10, false},
		{[4]byte{0, 0, 0, 11}, 10, 0, true},
		{[4]byte{0x7f, 0xff, 0xff, 0xff}, wire.DefaultMaxFrame, 0, true},
		{[4]byte{0x7f, 0xff, 0xff, 0xff}, 1 << 31, 1<<31 - 1, false},
		{[4]byte{0xff, 0xff, 0xff, 0xff}, wire.DefaultMaxFrame, 0, true},
		{[4]byte{0x80, 0, 0, 0}, 1 << 40, 0, true},
	} {
		n, err := wire.FrameSize(c.b, c.max)
		if (err != nil) != c.err || n != c.want {
			t.Errorf("FrameSize(% x, %d) = %d, %v", c.b, c.max, n, err)
		}
	}
	var tooLarge *wire.FrameTooLargeError
	if _, err := wire.FrameSize([4]byte{1, 0, 0, 0}, 100); !errors.As(err, &tooLarge) || tooLarge.Size != 1<<24 || tooLarge.Max != 100 {
		t.Errorf("want FrameTooLargeError, got %v", err)
	}
	if _, err := wire.FrameSize([4]byte{0x80, 0, 0, 1}, 100); !errors.Is(err, wire.ErrNegativeFrame) {
		t.Errorf("want ErrNegativeFrame, got %v", err)
	}
}

func TestResponseHeaderLen(t *testing.T) {
	tags := tagSection([]byte{3}, []byte("abc"))
	for k := int16(0); k < wire.MaxKeys; k++ {
		resp := kmsg.ResponseForKey(k)
		if resp == nil {
			continue
		}
		for v := int16(0); v <= resp.MaxVersion(); v++ {
			resp.SetVersion(v)
			flexible := resp.IsFlexible() && k != wire.KeyApiVersions
			b := binary.BigEndian.AppendUint32(nil, 0xdeadbeef)
			want := 4
			if flexible {
				b = append(b, tags...)
				want += len(tags)
			}
			b = append(b, resp.AppendTo(nil)...)
			n, err := wire.ResponseHeaderLen(b, k, v)
			if err != nil || n != want {
				t.Errorf("%s v%d: ResponseHeaderLen = %d, %v; want %d", kmsg.NameForKey(k), v, n, err, want)
			}
			if wire.CorrelationID(b) != int32(-0x21524111) {
				t.Errorf("CorrelationID = %#x", wire.CorrelationID(b))
			}
			for i := range want {
				if _, err := wire.ResponseHeaderLen(b[:i], k, v); err == nil {
					t.Errorf("%s v%d: header cut to %d bytes parsed", kmsg.NameForKey(k), v, i)
				}
			}
		}
	}
}

func TestUvarint(t *testing.T) {
	for _, v := range []uint32{0, 1, 127, 128, 300, 1<<14 - 1, 1 << 14, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<32 - 1} {
		b := binary.AppendUvarint(nil, uint64(v))
		got, n := wire.Uvarint(b)
		if got != v || n != len(b) {
			t.Errorf("Uvarint(% x) = %d, %d; want %d, %d", b, got, n, v, len(b))
		}
		for i := range len(b) {
			if _, n := wire.Uvarint(b[:i]); n != 0 {
				t.Errorf("Uvarint(% x) cut to %d read %d bytes", b, i, n)
			}
		}
	}
	for _, b := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x10},       // over 32 bits
		{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // six bytes
		{0x80, 0x80, 0x80, 0x80, 0x80},
	} {
		if v, n := wire.Uvarint(b); n != 0 {
			t.Errorf("Uvarint(% x) = %d, %d; want failure", b, v, n)
		}
	}
}

func TestSkipTags(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want int
	}{
		{[]byte{0}, 1},
		{[]byte{0, 9, 9}, 1},
		{tagSection([]byte{1}, []byte("abc")), 6},
		{append(tagSection([]byte{1}, nil, []byte{2}, bytes.Repeat([]byte{1}, 130)), 0xff), 1 + 2 + 1 + 2 + 130},
	} {
		n, err := wire.SkipTags(c.in)
		if err != nil || n != c.want {
			t.Errorf("SkipTags(% x) = %d, %v; want %d", c.in, n, err, c.want)
		}
	}
	for _, in := range [][]byte{nil, {1}, {1, 0}, {1, 0, 1}, {2, 0, 0}, {0x80}, {1, 0x80, 0x80, 0x80, 0x80, 0x10, 0}, {1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if n, err := wire.SkipTags(in); err == nil {
			t.Errorf("SkipTags(% x) = %d, want an error", in, n)
		}
	}
}

// TestSkipTagsMatchesKmsg compares SkipTags with kmsg on tag sections kmsg
// writes: every flexible message's filled encoding ends in its top-level tag
// section, which kmsg writes from its UnknownTags.
func TestSkipTagsMatchesKmsg(t *testing.T) {
	for n := range 5 {
		var tags kmsg.Tags
		for i := range n {
			tags.Set(uint32(i*1000), bytes.Repeat([]byte{byte(i)}, i*100))
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.UnknownTags = tags
		body := req.AppendTo(nil)
		// Two empty compact strings, then the tag section.
		sec := body[2:]
		got, err := wire.SkipTags(sec)
		if err != nil || got != len(sec) {
			t.Errorf("%d tags: SkipTags = %d, %v; want %d", n, got, err, len(sec))
		}
	}
}

// produceTxnIDs are the transactional ids the acks tests use.
var produceTxnIDs = []*string{nil, kmsg.StringPtr(""), kmsg.StringPtr(strings.Repeat("t", 300))}

// acksEnd returns where the acks field ends in a Produce body of the given
// version and transactional id, computed from the protocol spec.
func acksEnd(version int16, txn *string) int {
	switch {
	case version >= 9:
		if txn == nil {
			return 1 + 2
		}
		return len(binary.AppendUvarint(nil, uint64(len(*txn)+1))) + len(*txn) + 2
	case version >= 3:
		if txn == nil {
			return 2 + 2
		}
		return 2 + len(*txn) + 2
	default:
		return 2
	}
}

func TestProduceAcksMatchesKmsg(t *testing.T) {
	for v := int16(0); v <= wire.MaxVersion(wire.KeyProduce); v++ {
		for _, txn := range produceTxnIDs {
			for _, acks := range []int16{-1, 0, 1} {
				req := kmsg.NewPtrProduceRequest()
				req.SetVersion(v)
				var f filler
				f.fillMessage(req)
				req.TransactionID = txn
				req.Acks = acks
				body := req.AppendTo(nil)
				got, ok := wire.ProduceAcks(body, v)
				if !ok || got != acks {
					t.Errorf("Produce v%d txn %v: ProduceAcks = %d, %v; want %d", v, txn != nil, got, ok, acks)
				}
				end := acksEnd(v, txn)
				if end > len(body) || int16(binary.BigEndian.Uint16(body[end-2:])) != acks {
					t.Fatalf("Produce v%d: test's acks offset %d is wrong", v, end)
				}
				for i := range end {
					if _, ok := wire.ProduceAcks(body[:i], v); ok {
						t.Errorf("Produce v%d: body cut to %d of %d bytes gave ok", v, i, end)
					}
				}
				if got, ok := wire.ProduceAcks(body[:end], v); !ok || got != acks {
					t.Errorf("Produce v%d: body cut to acks gave %d, %v", v, got, ok)
				}
			}
		}
	}
}

// TestProduceAcksPrefix checks ProduceAcksPrefix covers the longest legal
// transactional id (a string's length is an int16) at every version.
func TestProduceAcksPrefix(t *testing.T) {
	long := strings.Repeat("L", 32767)
	for v := int16(0); v <= wire.MaxVersion(wire.KeyProduce); v++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.TransactionID = &long
		req.Acks = -1
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, 4096)}}}}
		body := req.AppendTo(nil)
		if v >= 3 && len(body) < wire.ProduceAcksPrefix {
			t.Fatalf("v%d: body shorter than the prefix", v)
		}
		// Callers peek the prefix, or the whole body if it is shorter.
		if got, ok := wire.ProduceAcks(body[:min(len(body), wire.ProduceAcksPrefix)], v); !ok || got != -1 {
			t.Errorf("v%d: ProduceAcks on the prefix = %d, %v", v, got, ok)
		}
	}
}

// skimCase is one response the skimmer tests build.
type skimCase struct {
	name string
	has  bool // top-level tags present
	msg  message
}

func fetchResponses(version int16) []skimCase {
	recs := bytes.Repeat([]byte{0xab}, 300)
	mk := func(topics, parts, aborted int, leader bool) *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		r.SetVersion(version)
		r.ThrottleMillis, r.ErrorCode, r.SessionID = 7, 0, 99
		for i := range topics {
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic = strings.Repeat("topic", i+1)
			tp.TopicID = [16]byte{byte(i + 1), 2, 3}
			for j := range parts {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(j)
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1000, 900, 10
				for a := range aborted {
					p.AbortedTransactions = append(p.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: int64(a), FirstOffset: 5})
				}
				if j%2 == 1 {
					p.RecordBatches = recs
				}
				if leader {
					p.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
					p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 3, 12
					p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 4, 50
				}
				tp.Partitions = append(tp.Partitions, p)
			}
			r.Topics = append(r.Topics, tp)
		}
		return r
	}
	withBrokers := func(r *kmsg.FetchResponse) *kmsg.FetchResponse {
		r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 3, Host: "broker-3.example", Port: 9092, Rack: kmsg.StringPtr("r1")}, {NodeID: 4, Host: "b4", Port: 9093}}
		return r
	}
	withTopLevelUnknown := func(r *kmsg.FetchResponse) *kmsg.FetchResponse {
		r.UnknownTags.Set(7, []byte("future"))
		return r
	}
	withInnerUnknown := func(r *kmsg.FetchResponse) *kmsg.FetchResponse {
		for i := range r.Topics {
			r.Topics[i].UnknownTags.Set(9, []byte{1})
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].UnknownTags.Set(9, []byte{2})
			}
		}
		return r
	}
	return []skimCase{
		{"empty", false, mk(0, 0, 0, false)},
		{"plain", false, mk(3, 4, 2, false)},
		{"one partition", false, mk(1, 1, 0, false)},
		{"partition leaders only", false, mk(2, 3, 1, true)},
		{"inner unknown tags only", false, withInnerUnknown(mk(2, 2, 1, true))},
		{"node endpoints", true, withBrokers(mk(2, 3, 1, true))},
		{"node endpoints, no topics", true, withBrokers(mk(0, 0, 0, false))},
		{"top-level unknown tag", true, withTopLevelUnknown(mk(2, 2, 0, false))},
		{"both", true, withTopLevelUnknown(withBrokers(withInnerUnknown(mk(3, 2, 3, true))))},
	}
}

func produceResponses(version int16) []skimCase {
	mk := func(topics, parts, recErrs int, leader bool) *kmsg.ProduceResponse {
		r := kmsg.NewPtrProduceResponse()
		r.SetVersion(version)
		r.ThrottleMillis = 11
		for i := range topics {
			tp := kmsg.NewProduceResponseTopic()
			tp.Topic = strings.Repeat("t", 10*i+1)
			tp.TopicID = [16]byte{0xff, byte(i + 1)}
			for j := range parts {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition = int32(j)
				p.BaseOffset, p.LogAppendTime, p.LogStartOffset = 77, -1, 3
				for e := range recErrs {
					p.ErrorRecords = append(p.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: int32(e), ErrorMessage: kmsg.StringPtr("bad record")})
				}
				if recErrs > 0 {
					p.ErrorCode = 87 // INVALID_RECORD
					p.ErrorMessage = kmsg.StringPtr("some records were invalid")
				}
				if leader {
					p.ErrorCode = 6
					p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 8
				}
				tp.Partitions = append(tp.Partitions, p)
			}
			r.Topics = append(r.Topics, tp)
		}
		return r
	}
	withBrokers := func(r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
		r.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 2, Host: "broker-2.example", Port: 9092}, {NodeID: 5, Host: "b5", Port: 19092, Rack: kmsg.StringPtr("rack-b")}}
		return r
	}
	withTopLevelUnknown := func(r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
		r.UnknownTags.Set(6, []byte("x"))
		return r
	}
	withInnerUnknown := func(r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
		for i := range r.Topics {
			r.Topics[i].UnknownTags.Set(9, nil)
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].UnknownTags.Set(9, []byte{2, 3})
			}
		}
		return r
	}
	return []skimCase{
		{"empty", false, mk(0, 0, 0, false)},
		{"plain", false, mk(3, 4, 0, false)},
		{"record errors", false, mk(2, 2, 3, false)},
		{"partition leaders only", false, mk(2, 3, 1, true)},
		{"inner unknown tags only", false, withInnerUnknown(mk(2, 2, 1, true))},
		{"node endpoints", true, withBrokers(mk(2, 3, 1, true))},
		{"node endpoints, no topics", true, withBrokers(mk(0, 0, 0, false))},
		{"top-level unknown tag", true, withTopLevelUnknown(mk(1, 1, 0, false))},
		{"both", true, withTopLevelUnknown(withBrokers(withInnerUnknown(mk(3, 2, 2, true))))},
	}
}

type skimmer func(body []byte, version int16) (has, ok bool)

var skimmers = []struct {
	name     string
	key      int16
	from     int16 // first flexible version
	skim     skimmer
	cases    func(int16) []skimCase
	response func() message
}{
	{"Fetch", wire.KeyFetch, 12, wire.FetchResponseHasTopLevelTags, fetchResponses, func() message { return kmsg.NewPtrFetchResponse() }},
	{"Produce", wire.KeyProduce, 9, wire.ProduceResponseHasTopLevelTags, produceResponses, func() message { return kmsg.NewPtrProduceResponse() }},
}

func TestSkimmers(t *testing.T) {
	for _, s := range skimmers {
		if !wire.Flexible(s.key, s.from) || wire.Flexible(s.key, s.from-1) {
			t.Fatalf("%s: first flexible version is not %d", s.name, s.from)
		}
		for v := s.from; v <= wire.MaxVersion(s.key); v++ {
			for _, c := range s.cases(v) {
				body := c.msg.AppendTo(nil)
				checkSkim(t, s.name+" v"+itoa(v)+" "+c.name, s.skim, body, v, c.has)
			}
			// The filler's messages have unknown tags (and node
			// endpoints) at every level; defaults have none.
			filled := s.response()
			filled.SetVersion(v)
			var f filler
			f.fillMessage(filled)
			checkSkim(t, s.name+" v"+itoa(v)+" filled", s.skim, filled.AppendTo(nil), v, true)
			def := s.response()
			def.SetVersion(v)
			checkSkim(t, s.name+" v"+itoa(v)+" default", s.skim, def.AppendTo(nil), v, false)
		}
	}
}

func itoa(v int16) string { return strconv.Itoa(int(v)) }

// checkSkim checks a skimmer on a whole body, on every strict prefix of it
// (a truncated body never parses) and on the body with a trailing byte.
func checkSkim(t *testing.T, name string, skim skimmer, body []byte, v int16, want bool) {
	t.Helper()
	has, ok := skim(body, v)
	if !ok || has != want {
		t.Errorf("%s: (has, ok) = (%v, %v), want (%v, true)", name, has, ok, want)
	}
	for i := range body {
		if has, ok := skim(body[:i], v); ok {
			t.Fatalf("%s: body cut to %d of %d bytes gave (%v, true)", name, i, len(body), has)
		}
	}
	if _, ok := skim(append(body[:len(body):len(body)], 0), v); ok {
		t.Errorf("%s: body with a trailing byte gave ok", name)
	}
}

// TestProduceAcksHugeTxnIDLength feeds compact transactional id lengths
// near 2^31 and 2^32: on a 32-bit platform (GOARCH=386, arm) the offset of
// acks overflows int, and ProduceAcks must report ok=false, not panic.
func TestProduceAcksHugeTxnIDLength(t *testing.T) {
	for _, l := range []uint64{1<<31 - 8, 1<<31 - 7, 1<<31 - 6, 1<<31 - 5, 1<<31 - 2, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1} {
		body := binary.AppendUvarint(nil, l)
		body = append(body, 0xff, 0xff, 0, 0, 0, 0, 0, 0)
		if acks, ok := wire.ProduceAcks(body, 9); ok {
			t.Errorf("compact length %d in a %d-byte body: acks %d, ok", l, len(body), acks)
		}
	}
}
