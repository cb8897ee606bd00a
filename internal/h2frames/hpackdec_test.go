package h2frames

import (
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/http2/hpack"
)

// unhex decodes a hex string written with spaces, as the RFC prints it.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func hf(name, value string) hpack.HeaderField {
	return hpack.HeaderField{Name: name, Value: value}
}

// decodeAll decodes one block on d and returns what it emitted.
func decodeAll(d *HeaderDecoder, block []byte) ([]hpack.HeaderField, error) {
	var got []hpack.HeaderField
	err := d.Decode(block, func(f hpack.HeaderField) { got = append(got, f) })
	return got, err
}

// dynNewestFirst is d's dynamic table in index order (62, 63, ...), the
// order in which RFC 7541 Appendix C lists it.
func dynNewestFirst(d *HeaderDecoder) []hpack.HeaderField {
	t := slices.Clone(d.dyn)
	slices.Reverse(t)
	return t
}

// checkTable compares d's dynamic table with want (newest first) and
// its size with size, and checks that the entries decode at their
// indices and that the index past them does not.
func checkTable(t *testing.T, d *HeaderDecoder, want []hpack.HeaderField, size uint32) {
	t.Helper()
	if got := dynNewestFirst(d); !slices.Equal(got, want) {
		t.Errorf("dynamic table\n got %q\nwant %q", got, want)
	}
	if d.size != size {
		t.Errorf("table size %d, want %d", d.size, size)
	}
	var sum uint32
	for _, f := range d.dyn {
		sum += f.Size()
	}
	if sum != d.size {
		t.Errorf("table size %d, its entries add up to %d", d.size, sum)
	}
	for i, f := range want {
		g, ok := d.at(uint64(len(staticTable) + 1 + i))
		if !ok || g != f {
			t.Errorf("index %d is %q (%v), want %q", len(staticTable)+1+i, g, ok, f)
		}
	}
	if _, ok := d.at(uint64(len(staticTable) + 1 + len(want))); ok {
		t.Errorf("index %d, past the table, resolves", len(staticTable)+1+len(want))
	}
}

// TestHeaderDecoderRFC7541Examples decodes the examples of RFC 7541
// Appendix C, three blocks in sequence on one decoder per example.
func TestHeaderDecoderRFC7541Examples(t *testing.T) {
	type step struct {
		hex    string
		fields []hpack.HeaderField
		table  []hpack.HeaderField // newest first
		size   uint32
	}
	authority := hf(":authority", "www.example.com")
	noCache := hf("cache-control", "no-cache")
	custom := hf("custom-key", "custom-value")
	requests := [][]hpack.HeaderField{
		{hf(":method", "GET"), hf(":scheme", "http"), hf(":path", "/"), authority},
		{hf(":method", "GET"), hf(":scheme", "http"), hf(":path", "/"), authority, noCache},
		{hf(":method", "GET"), hf(":scheme", "https"), hf(":path", "/index.html"), authority, custom},
	}
	requestTables := [][]hpack.HeaderField{
		{authority},
		{noCache, authority},
		{custom, noCache, authority},
	}
	requestSizes := []uint32{57, 110, 164}

	s302, s307, s200 := hf(":status", "302"), hf(":status", "307"), hf(":status", "200")
	private := hf("cache-control", "private")
	date21 := hf("date", "Mon, 21 Oct 2013 20:13:21 GMT")
	date22 := hf("date", "Mon, 21 Oct 2013 20:13:22 GMT")
	location := hf("location", "https://www.example.com")
	gzip := hf("content-encoding", "gzip")
	cookie := hf("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")
	responses := [][]hpack.HeaderField{
		{s302, private, date21, location},
		{s307, private, date21, location},
		{s200, private, date22, location, gzip, cookie},
	}
	responseTables := [][]hpack.HeaderField{
		{location, date21, private, s302},
		{s307, location, date21, private},
		{cookie, gzip, date22},
	}
	responseSizes := []uint32{222, 222, 215}

	build := func(hexes [3]string, fields, tables [][]hpack.HeaderField, sizes []uint32) []step {
		var s []step
		for i, h := range hexes {
			s = append(s, step{h, fields[i], tables[i], sizes[i]})
		}
		return s
	}

	tests := []struct {
		name  string
		limit uint32
		steps []step
	}{
		{"C.3 requests without Huffman coding", 4096, build([3]string{
			"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
			"8286 84be 5808 6e6f 2d63 6163 6865",
			"8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
		}, requests, requestTables, requestSizes)},
		{"C.4 requests with Huffman coding", 4096, build([3]string{
			"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
			"8286 84be 5886 a8eb 1064 9cbf",
			"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
		}, requests, requestTables, requestSizes)},
		{"C.5 responses without Huffman coding", 256, build([3]string{
			"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 " +
				"3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
			"4803 3330 37c1 c0bf",
			"88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 " +
				"7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 " +
				"6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
		}, responses, responseTables, responseSizes)},
		{"C.6 responses with Huffman coding", 256, build([3]string{
			"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad " +
				"1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
			"4883 640e ffc1 c0bf",
			"88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 " +
				"e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
		}, responses, responseTables, responseSizes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewHeaderDecoder(tt.limit, 1<<20)
			for i, s := range tt.steps {
				got, err := decodeAll(d, unhex(t, s.hex))
				if err != nil {
					t.Fatalf("block %d: %v", i+1, err)
				}
				if !slices.Equal(got, s.fields) {
					t.Errorf("block %d: fields\n got %q\nwant %q", i+1, got, s.fields)
				}
				checkTable(t, d, s.table, s.size)
			}
		})
	}
}

// TestHeaderDecoderMalformed checks that blocks breaking HPACK return
// ErrHeaderBlock, and do not panic.
func TestHeaderDecoderMalformed(t *testing.T) {
	// a one-entry dynamic table: "a: b" at index 62
	withEntry := func(d *HeaderDecoder) {
		if _, err := decodeAll(d, []byte{0x40, 1, 'a', 1, 'b'}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(*HeaderDecoder)
		block string
	}{
		{"indexed field 0", nil, "80"},
		{"indexed field 0 after a valid field", nil, "82 80"},
		{"indexed field past the static table", nil, "be"},
		{"indexed field past the dynamic table", withEntry, "bf"},
		{"indexed field far past the table", nil, "ff 80 01"},
		{"literal name index past the table", nil, "7e 01 61"},
		{"never indexed name index past the table", nil, "1f 30 01 61"},
		{"without indexing name index past the table", withEntry, "0f 30 01 61"},
		{"truncated integer, prefix only", nil, "ff"},
		{"truncated integer, continuation", nil, "ff 80"},
		{"truncated name index", nil, "7f 81"},
		{"truncated size update", nil, "3f"},
		{"truncated string length", nil, "00 7f"},
		{"literal without a name", nil, "00"},
		{"literal without a value", nil, "00 01 61"},
		{"literal with indexed name, no value", nil, "44"},
		{"name length past the block", nil, "00 05 61 62"},
		{"value length past the block", nil, "00 01 61 05 61 62"},
		{"huffman value length past the block", nil, "04 83 63"},
		{"huffman with EOS", nil, "04 84 ff ff ff ff"},
		{"huffman padding longer than 7 bits", nil, "04 82 1f ff"},
		{"huffman padding of a single byte", nil, "04 81 ff"},
		{"huffman padding not all ones", nil, "04 81 00"},
		{"huffman name with EOS", nil, "00 84 ff ff ff ff 01 61"},
		{"size update over the limit", nil, "3f e2 1f"},
		{"size update far over the limit", nil, "3f e1 ff 03"},
		{"size update after an indexed field", nil, "82 20"},
		{"size update after a literal", nil, "00 01 61 01 62 20"},
		{"size update after a field, table not empty", withEntry, "82 3f e1 1f"},
		{"integer overflowing 63 bits", nil, "ff ff ff ff ff ff ff ff ff ff 01"},
		{"integer overflowing 32 bits", nil, "ff 80 80 80 80 10"},
		{"string length overflowing 32 bits", nil, "00 ff 80 80 80 80 10 61"},
		{"size update overflowing 32 bits", nil, "3f e1 9f 80 80 10"},
	}
	// x/net's decoder accepts a size update after a field while its
	// table is empty; RFC 7541 section 4.2 does not.
	xnetAccepts := map[string]bool{"82 20": true, "00 01 61 01 62 20": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewHeaderDecoder(4096, 1<<20)
			if tt.setup != nil {
				tt.setup(d)
			}
			_, err := decodeAll(d, unhex(t, tt.block))
			if !errors.Is(err, ErrHeaderBlock) {
				t.Errorf("%s: err %v, want ErrHeaderBlock", tt.block, err)
			}
			// x/net's decoder agrees that the block is bad.
			ref := hpack.NewDecoder(4096, nil)
			if tt.setup != nil {
				if _, err := ref.DecodeFull([]byte{0x40, 1, 'a', 1, 'b'}); err != nil {
					t.Fatal(err)
				}
			}
			if f, err := ref.DecodeFull(unhex(t, tt.block)); err == nil && !xnetAccepts[tt.block] {
				t.Errorf("%s: x/net's decoder accepts it: %q", tt.block, f)
			}
		})
	}
}

// TestHeaderDecoderSizeUpdates checks where size updates are allowed.
func TestHeaderDecoderSizeUpdates(t *testing.T) {
	d := NewHeaderDecoder(4096, 1<<20)
	withEntries := []byte{0x40, 1, 'a', 1, 'b', 0x40, 1, 'c', 1, 'd'}
	if _, err := decodeAll(d, withEntries); err != nil {
		t.Fatal(err)
	}
	// Two updates at the start of a block (section 4.2): the smallest,
	// then the final size.
	got, err := decodeAll(d, unhex(t, "3f 03 3f e1 1f 82"))
	if err != nil {
		t.Fatalf("two leading size updates: %v", err)
	}
	if !slices.Equal(got, []hpack.HeaderField{hf(":method", "GET")}) {
		t.Errorf("fields %q", got)
	}
	checkTable(t, d, []hpack.HeaderField{hf("c", "d")}, 34)
	if d.max != 4096 {
		t.Errorf("max %d, want 4096", d.max)
	}
	// A block of updates alone, to the limit exactly.
	if got, err := decodeAll(d, unhex(t, "20 3f e1 1f")); err != nil || len(got) != 0 {
		t.Fatalf("updates only: %q, %v", got, err)
	}
	checkTable(t, d, nil, 0)
	// An empty block.
	if got, err := decodeAll(d, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty block: %q, %v", got, err)
	}
}

// TestHeaderDecoderSensitive checks that only never-indexed literals are
// emitted as sensitive.
func TestHeaderDecoderSensitive(t *testing.T) {
	d := NewHeaderDecoder(4096, 1<<20)
	var block []byte
	block = append(block, 0x10, 8)
	block = append(block, "password"...)
	block = append(block, 6)
	block = append(block, "secret"...)
	block = append(block, 0x1f, 23-15, 8) // authorization, never indexed
	block = append(block, "Bearer x"...)
	block = append(block, 0x00, 1, 'x', 1, 'y')      // without indexing
	block = append(block, 0x0f, 58-15, 4)            // user-agent, without indexing
	block = append(block, "curl"...)                 //
	block = append(block, 0x40, 3, 'k', 'e', 'y', 1) // incremental indexing
	block = append(block, 'v')
	block = append(block, 0x82) // indexed, static
	block = append(block, 0x10, 1, 'h')
	block = hpack.AppendHuffmanString(append(block, 0x80|byte(hpack.HuffmanEncodeLength("hidden"))), "hidden")
	got, err := decodeAll(d, block)
	if err != nil {
		t.Fatal(err)
	}
	want := []hpack.HeaderField{
		{Name: "password", Value: "secret", Sensitive: true},
		{Name: "authorization", Value: "Bearer x", Sensitive: true},
		{Name: "x", Value: "y"},
		{Name: "user-agent", Value: "curl"},
		{Name: "key", Value: "v"},
		{Name: ":method", Value: "GET"},
		{Name: "h", Value: "hidden", Sensitive: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields\n got %+v\nwant %+v", got, want)
	}
	checkTable(t, d, []hpack.HeaderField{hf("key", "v")}, 36)

	// The indexed entry comes back not sensitive, and so do the
	// static table's, whatever the last literal of their name was.
	got, err = decodeAll(d, []byte{0xbe, 0x80 | 23, 0x10, 1, 'k', 0})
	if err != nil {
		t.Fatal(err)
	}
	want = []hpack.HeaderField{
		{Name: "key", Value: "v"},
		{Name: "authorization"},
		{Name: "k", Value: "", Sensitive: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields\n got %+v\nwant %+v", got, want)
	}
	for _, f := range d.dyn {
		if f.Sensitive {
			t.Errorf("table entry %+v is sensitive", f)
		}
	}
}

// TestHeaderDecoderMaxString checks the bound on strings, raw and
// Huffman-coded, names and values.
func TestHeaderDecoderMaxString(t *testing.T) {
	huff := func(b []byte, s string) []byte {
		b = appendInt(b, 0x80, 7, hpack.HuffmanEncodeLength(s))
		return hpack.AppendHuffmanString(b, s)
	}
	long := strings.Repeat("a", 12) // 60 bits: 8 bytes coded, 12 decoded
	if n := hpack.HuffmanEncodeLength(long); n != 8 {
		t.Fatalf("coded length %d", n)
	}
	tests := []struct {
		name  string
		block []byte
		err   error
	}{
		{"raw value at the bound", appendString([]byte{0x00, 1, 'n'}, "12345678"), nil},
		{"raw value over the bound", appendString([]byte{0x00, 1, 'n'}, "123456789"), ErrHeaderString},
		{"raw name over the bound", appendString(appendString([]byte{0x00}, "123456789"), "v"), ErrHeaderString},
		{"raw indexed value over the bound", appendString([]byte{0x40, 1, 'n'}, "123456789"), ErrHeaderString},
		{"huffman value at the bound", huff([]byte{0x00, 1, 'n'}, "aaaaaaaa"), nil},
		{"huffman value over the bound", huff([]byte{0x00, 1, 'n'}, long), ErrHeaderString},
		{"huffman name over the bound", appendString(huff([]byte{0x00}, long), "v"), ErrHeaderString},
		{"huffman never indexed value over the bound", huff([]byte{0x1f, 23 - 15}, long), ErrHeaderString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewHeaderDecoder(4096, 8)
			_, err := decodeAll(d, tt.block)
			if err != tt.err {
				t.Errorf("%x: err %v, want %v", tt.block, err, tt.err)
			}
		})
	}
}

// internBlock is a block of literals without indexing, as a client that
// keeps no dynamic table writes every request.
func internBlock() []byte {
	var b []byte
	b = append(b, 0x82, 0x87)                                    // :method GET, :scheme https
	b = appendString(append(b, 0x04), "/v1/messages")            // :path, literal
	b = appendString(append(b, 0x0f, 31-15), "application/json") // content-type
	b = appendString(append(b, 0x0f, 23-15), "Bearer x")         // authorization
	b = appendString(appendString(append(b, 0x00), "x-custom"), "v")
	b = appendString(appendString(append(b, 0x10), "x-api-key"), "sk-secret")
	// user-agent, Huffman-coded value
	ua := "anthropic-sdk-go/2.15.0"
	b = appendInt(append(b, 0x0f, 58-15), 0x80, 7, hpack.HuffmanEncodeLength(ua))
	b = hpack.AppendHuffmanString(b, ua)
	// a custom name, Huffman-coded
	n := "x-trace-sample"
	b = appendInt(append(b, 0x00), 0x80, 7, hpack.HuffmanEncodeLength(n))
	b = appendString(hpack.AppendHuffmanString(b, n), "1")
	return b
}

// TestHeaderDecoderInterningAllocs checks that a block of literals, once
// seen on a connection, decodes again without allocating.
func TestHeaderDecoderInterningAllocs(t *testing.T) {
	block := internBlock()
	want := []hpack.HeaderField{
		hf(":method", "GET"), hf(":scheme", "https"), hf(":path", "/v1/messages"),
		hf("content-type", "application/json"), hf("authorization", "Bearer x"), hf("x-custom", "v"),
		{Name: "x-api-key", Value: "sk-secret", Sensitive: true},
		hf("user-agent", "anthropic-sdk-go/2.15.0"), hf("x-trace-sample", "1"),
	}
	d := NewHeaderDecoder(4096, 1<<20)
	fields := make([]hpack.HeaderField, 0, 16)
	emit := func(f hpack.HeaderField) { fields = append(fields, f) }
	var err error
	for i := range 2 {
		fields = fields[:0]
		if err = d.Decode(block, emit); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fields, want) {
			t.Fatalf("decode %d: fields\n got %q\nwant %q", i, fields, want)
		}
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates; the fields are checked above
	}
	allocs := testing.AllocsPerRun(100, func() {
		fields = fields[:0]
		err = d.Decode(block, emit)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fields, want) {
		t.Fatalf("fields\n got %q\nwant %q", fields, want)
	}
	if allocs != 0 {
		t.Errorf("decoding a block seen before: %v allocations, want 0", allocs)
	}
}

// TestHeaderDecoderInterning checks which strings are shared.
func TestHeaderDecoderInterning(t *testing.T) {
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	d := NewHeaderDecoder(4096, 1<<20)
	first, err := decodeAll(d, internBlock())
	if err != nil {
		t.Fatal(err)
	}
	second, err := decodeAll(d, internBlock())
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if !same(first[i].Name, second[i].Name) || !same(first[i].Value, second[i].Value) {
			t.Errorf("field %d (%s) not shared between two decodes", i, first[i].Name)
		}
	}
	// Known names are the package's strings; a name from the static
	// table given as a literal is the static table's.
	byLiteral, err := decodeAll(d, appendString(appendString([]byte{0x00}, "content-type"), "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	if !same(byLiteral[0].Name, staticTable[30].Name) {
		t.Error("a literal static name is not the static table's string")
	}
	if !same(first[6].Name, knownNames["x-api-key"]) {
		t.Error("x-api-key is not the known name's string")
	}
	// A changed value is a new string, then the one that repeats.
	a, _ := decodeAll(d, appendString([]byte{0x0f, 23 - 15}, "Bearer y"))
	b, _ := decodeAll(d, appendString([]byte{0x0f, 23 - 15}, "Bearer y"))
	if a[0].Value != "Bearer y" || same(a[0].Value, first[4].Value) || !same(a[0].Value, b[0].Value) {
		t.Errorf("changed value %q: not a new string then a shared one", a[0].Value)
	}
	// Strings do not alias the block.
	block := appendString(appendString([]byte{0x00}, "x-other"), "value")
	f, err := decodeAll(d, block)
	if err != nil {
		t.Fatal(err)
	}
	clear(block)
	if f[0] != hf("x-other", "value") {
		t.Errorf("field changed with its block: %q", f[0])
	}
}

// TestHeaderDecoderEviction fills a table of 100 octets and checks its
// entries and indices as the oldest are evicted.
func TestHeaderDecoderEviction(t *testing.T) {
	lit := func(name, value string) []byte { // literal with incremental indexing, new name
		return appendString(appendString([]byte{0x40}, name), value)
	}
	big := strings.Repeat("x", 68) // 32 + 1 + 68 = 101 octets
	steps := []struct {
		name  string
		block []byte
		table []hpack.HeaderField // newest first
		size  uint32
	}{
		{"first entry", lit("a", "0"), []hpack.HeaderField{hf("a", "0")}, 34},
		{"second entry", lit("a", "1"), []hpack.HeaderField{hf("a", "1"), hf("a", "0")}, 68},
		{"third evicts the first", lit("a", "2"), []hpack.HeaderField{hf("a", "2"), hf("a", "1")}, 68},
		{"indexed fields add nothing", []byte{0xbe, 0xbf}, []hpack.HeaderField{hf("a", "2"), hf("a", "1")}, 68},
		{"a larger entry evicts one", lit("b", "0123456789"), []hpack.HeaderField{hf("b", "0123456789"), hf("a", "2")}, 77},
		{"an entry of the table's size evicts the rest", lit("c", strings.Repeat("y", 67)),
			[]hpack.HeaderField{hf("c", strings.Repeat("y", 67))}, 100},
		{"an entry larger than the table empties it", lit("d", big), nil, 0},
		{"entry with a name from the table", append(lit("e", "1"), 0x7e, 1, '2'),
			[]hpack.HeaderField{hf("e", "2"), hf("e", "1")}, 68},
		{"a smaller size evicts", append([]byte{0x3f, 40 - 31}, lit("f", "1")...), []hpack.HeaderField{hf("f", "1")}, 34},
		{"and bounds what is added", lit("g", "1"), []hpack.HeaderField{hf("g", "1")}, 34},
		{"size 0 empties the table", []byte{0x20}, nil, 0},
		{"and nothing is kept", lit("h", "1"), nil, 0},
		{"size back to the limit", append([]byte{0x3f, 100 - 31}, lit("i", "1")...), []hpack.HeaderField{hf("i", "1")}, 34},
	}
	d := NewHeaderDecoder(100, 1<<20)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if _, err := decodeAll(d, s.block); err != nil {
				t.Fatalf("%x: %v", s.block, err)
			}
			checkTable(t, d, s.table, s.size)
			// every entry decodes at its index as an indexed field
			for i, want := range s.table {
				got, err := decodeAll(d, appendInt(nil, 0x80, 7, uint64(62+i)))
				if err != nil || len(got) != 1 || got[0] != want {
					t.Errorf("index %d: %q, %v; want %q", 62+i, got, err, want)
				}
			}
			if _, err := decodeAll(d, appendInt(nil, 0x80, 7, uint64(62+len(s.table)))); err != ErrHeaderBlock {
				t.Errorf("index %d past the table: err %v", 62+len(s.table), err)
			}
		})
	}
	if _, err := decodeAll(d, []byte{0x3f, 101 - 31}); err != ErrHeaderBlock {
		t.Errorf("size update past the limit 100: err %v", err)
	}
}
