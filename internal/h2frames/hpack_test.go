package h2frames

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// decodeBlock decodes a header block with x/net's decoder, as a peer
// would, with the table size a peer announces by default.
func decodeBlock(t testing.TB, block []byte) []hpack.HeaderField {
	t.Helper()
	d := hpack.NewDecoder(4096, nil)
	fields, err := d.DecodeFull(block)
	if err != nil {
		t.Fatalf("decode %x: %v", block, err)
	}
	return fields
}

// TestStaticTableIndices checks every index the encoder names against
// the static table as x/net's decoder knows it.
func TestStaticTableIndices(t *testing.T) {
	names := []string{":authority", ":method", ":path", ":scheme", ":status", "accept-charset", "accept-encoding",
		"accept-language", "accept-ranges", "accept", "access-control-allow-origin", "age", "allow", "authorization",
		"cache-control", "content-disposition", "content-encoding", "content-language", "content-length",
		"content-location", "content-range", "content-type", "cookie", "date", "etag", "expect", "expires", "from",
		"host", "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
		"link", "location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh",
		"retry-after", "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent", "vary",
		"via", "www-authenticate"}
	for _, name := range names {
		i := staticName(name)
		if i == 0 {
			t.Fatalf("%s: not in the encoder's static table", name)
		}
		f := decodeBlock(t, appendInt(nil, 0x80, 7, uint64(i)))
		if len(f) != 1 || f[0].Name != name {
			t.Errorf("static index %d is %v, the encoder says %s", i, f, name)
		}
	}
	for _, p := range [][2]string{{":method", "GET"}, {":method", "POST"}, {":path", "/"}, {":path", "/index.html"},
		{":scheme", "http"}, {":scheme", "https"}, {"accept-encoding", "gzip, deflate"}} {
		i := staticPair(p[0], p[1])
		f := decodeBlock(t, appendInt(nil, 0x80, 7, uint64(i)))
		if i == 0 || len(f) != 1 || f[0].Name != p[0] || f[0].Value != p[1] {
			t.Errorf("%s: %s is index %d, which decodes as %v", p[0], p[1], i, f)
		}
	}
	if staticName("x-api-key") != 0 || staticPair(":method", "PUT") != 0 {
		t.Error("fields outside the static table were given an index")
	}
}

func TestFieldsRoundTrip(t *testing.T) {
	long := strings.Repeat("v", 300) // a length past the 7-bit prefix
	in := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "127.0.0.1:28100"},
		{Name: ":path", Value: "/v1/chat/completions"},
		{Name: "content-type", Value: "application/json"},
		{Name: "authorization", Value: "Bearer sk-test", Sensitive: true},
		{Name: "x-api-key", Value: "secret", Sensitive: true},
		{Name: "anthropic-version", Value: "2023-06-01"},
		{Name: "x-long", Value: long},
		{Name: strings.Repeat("n", 200), Value: ""},
		{Name: "accept-encoding", Value: "gzip, deflate"},
	}
	var e HeaderEncoder
	b := e.Begin(nil)
	for _, f := range in {
		b = AppendField(b, f.Name, f.Value, f.Sensitive)
	}
	out := decodeBlock(t, b)
	if len(out) != len(in) {
		t.Fatalf("decoded %d fields, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("field %d: decoded %+v, want %+v", i, out[i], in[i])
		}
	}
	// The second block on the connection has no table size update.
	b2 := e.Begin(nil)
	if len(b2) != 0 {
		t.Errorf("second block begins %x", b2)
	}
}

// TestTableSizeUpdateSatisfiesSmallerTables: a peer that announced a
// table of 0 bytes, and one that lowered its size after the first block,
// decode what the encoder writes.
func TestTableSizeUpdateSatisfiesSmallerTables(t *testing.T) {
	var e HeaderEncoder
	first := AppendField(e.Begin(nil), "content-type", "application/json", false)
	d := hpack.NewDecoder(4096, nil)
	d.SetAllowedMaxDynamicTableSize(0)
	if _, err := d.DecodeFull(first); err != nil {
		t.Fatalf("a decoder with no table: %v", err)
	}
	if first[0] != 0x20 {
		t.Fatalf("first block begins %x, want a table size update to 0", first[0])
	}
	d.SetAllowedMaxDynamicTableSize(100)
	if _, err := d.DecodeFull(AppendField(e.Begin(nil), "x-request-id", "abc", false)); err != nil {
		t.Fatal(err)
	}
}

func TestAppendStatus(t *testing.T) {
	for _, code := range []int{100, 101, 200, 201, 204, 206, 301, 304, 400, 401, 404, 429, 500, 502, 503, 599, 999} {
		f := decodeBlock(t, AppendStatus(nil, code))
		if len(f) != 1 || f[0].Name != ":status" || f[0].Value != strconv.Itoa(code) {
			t.Errorf("status %d decodes as %v", code, f)
		}
	}
	for _, code := range []int{0, 99, 1000, -1} {
		f := decodeBlock(t, AppendStatus(nil, code))
		if len(f) != 1 || f[0].Value != "500" {
			t.Errorf("status %d decodes as %v, want 500", code, f)
		}
	}
}

func FuzzAppendField(f *testing.F) {
	f.Add("content-type", "application/json", false)
	f.Add("authorization", "Bearer k", true)
	f.Add(":method", "POST", false)
	f.Add("x-"+strings.Repeat("a", 130), strings.Repeat("b", 20000), false)
	f.Fuzz(func(t *testing.T, name, value string, sensitive bool) {
		b := AppendField(nil, name, value, sensitive)
		d := hpack.NewDecoder(4096, nil)
		d.SetMaxStringLength(1 << 20)
		out, err := d.DecodeFull(b)
		if err != nil {
			t.Fatalf("%q: %q: %v", name, value, err)
		}
		if len(out) != 1 || out[0].Name != name || out[0].Value != value || out[0].Sensitive != sensitive {
			t.Fatalf("%q: %q (sensitive %v) decodes as %+v", name, value, sensitive, out)
		}
	})
}
