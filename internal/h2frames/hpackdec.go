package h2frames

import (
	"bytes"
	"errors"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// HeaderDecoder decodes the HPACK header blocks (RFC 7541) a peer sends
// on one connection. x/net's decoder allocates a string for every name
// and value written as a literal, and peers that keep no dynamic table
// (curl's nghttp2 keeps one, many generators and some servers do not)
// write every field as a literal, every request: for a gateway that was
// about a quarter of its allocations per request. This decoder gives a
// literal a string it already has where it can:
//
//   - a name from the static table, or one of the names of knownNames,
//     is that table's string;
//   - other names are kept (up to maxNames per connection);
//   - a value equal to the last value of its name on this connection is
//     that value's string, so that a header that repeats on every request
//     (content-type, authorization, user-agent) costs nothing after the
//     first.
//
// Entries of the dynamic table keep their strings, as x/net's do.
//
// A decoder belongs to one connection's reader; it is not safe for
// concurrent use.
type HeaderDecoder struct {
	dyn      []hpack.HeaderField // the dynamic table, newest last
	size     uint32              // its size, RFC 7541 section 4.1
	max      uint32              // its current maximum, set by size updates
	limit    uint32              // the largest maximum allowed (our SETTINGS)
	maxStr   int                 // the longest string accepted
	huff     bytes.Buffer        // Huffman-decoded string
	names    map[string]string   // literal names seen, not in knownNames
	lastVals map[string]string   // interned name → its last literal value
}

// maxNames bounds the names a connection's decoder keeps; maxInterned
// the length of a value it remembers.
const (
	maxNames    = 64
	maxInterned = 256
)

// ErrHeaderBlock is what Decode returns for a block that does not decode:
// the connection must end with COMPRESSION_ERROR (RFC 9113 section 4.3).
var ErrHeaderBlock = errors.New("hpack: the header block does not decode")

// ErrHeaderString is what Decode returns for a string longer than the
// decoder's bound.
var ErrHeaderString = errors.New("hpack: a header string is too long")

// NewHeaderDecoder returns a decoder for a connection whose
// SETTINGS_HEADER_TABLE_SIZE is limit (4096 unless announced otherwise),
// accepting strings of at most maxString bytes after Huffman decoding.
func NewHeaderDecoder(limit uint32, maxString int) *HeaderDecoder {
	return &HeaderDecoder{max: limit, limit: limit, maxStr: maxString}
}

// Decode decodes one whole header block, calling emit for each field in
// order. A block that breaks HPACK returns ErrHeaderBlock (or
// ErrHeaderString); the decoder's table is then undefined, and so is the
// connection.
func (d *HeaderDecoder) Decode(p []byte, emit func(hpack.HeaderField)) error {
	first := true
	for len(p) > 0 {
		b := p[0]
		switch {
		case b&0x80 != 0: // indexed field
			i, rest, ok := readInt(7, p)
			if !ok {
				return ErrHeaderBlock
			}
			f, ok := d.at(i)
			if !ok {
				return ErrHeaderBlock
			}
			p = rest
			emit(f)
		case b&0xc0 == 0x40: // literal with incremental indexing
			f, rest, err := d.literal(6, p)
			if err != nil {
				return err
			}
			p = rest
			d.add(f)
			emit(f)
		case b&0xe0 == 0x20: // dynamic table size update
			if !first {
				// RFC 7541 section 4.2: only at the beginning of a block.
				return ErrHeaderBlock
			}
			n, rest, ok := readInt(5, p)
			if !ok || n > uint64(d.limit) {
				return ErrHeaderBlock
			}
			p = rest
			d.max = uint32(n)
			d.evict()
			continue // more updates may follow (section 4.2)
		default: // literal without indexing (0000), never indexed (0001)
			f, rest, err := d.literal(4, p)
			if err != nil {
				return err
			}
			f.Sensitive = b&0x10 != 0
			p = rest
			emit(f)
		}
		first = false
	}
	if d.huff.Cap() > 64<<10 {
		d.huff = bytes.Buffer{} // a long string's room is not kept
	}
	return nil
}

// literal reads a literal field whose name index has an n-bit prefix.
func (d *HeaderDecoder) literal(n uint8, p []byte) (hpack.HeaderField, []byte, error) {
	var f hpack.HeaderField
	i, p, ok := readInt(n, p)
	if !ok {
		return f, nil, ErrHeaderBlock
	}
	var err error
	if i > 0 {
		g, ok := d.at(i)
		if !ok {
			return f, nil, ErrHeaderBlock
		}
		f.Name = g.Name
	} else {
		var raw []byte
		if raw, p, err = d.str(p); err != nil {
			return f, nil, err
		}
		f.Name = d.name(raw)
	}
	var raw []byte
	if raw, p, err = d.str(p); err != nil {
		return f, nil, err
	}
	f.Value = d.value(f.Name, raw)
	return f, p, nil
}

// str reads a string literal: its bytes are p's own or, Huffman-coded,
// d.huff's, valid until the next call.
func (d *HeaderDecoder) str(p []byte) ([]byte, []byte, error) {
	if len(p) == 0 {
		return nil, nil, ErrHeaderBlock
	}
	huff := p[0]&0x80 != 0
	n, p, ok := readInt(7, p)
	if !ok || n > uint64(len(p)) {
		return nil, nil, ErrHeaderBlock
	}
	s, p := p[:n], p[n:]
	if !huff {
		if len(s) > d.maxStr {
			return nil, nil, ErrHeaderString
		}
		return s, p, nil
	}
	d.huff.Reset()
	if _, err := hpack.HuffmanDecode(&d.huff, s); err != nil {
		return nil, nil, ErrHeaderBlock
	}
	if d.huff.Len() > d.maxStr {
		return nil, nil, ErrHeaderString
	}
	return d.huff.Bytes(), p, nil
}

// name is a literal name's string.
func (d *HeaderDecoder) name(raw []byte) string {
	if s, ok := knownNames[string(raw)]; ok {
		return s
	}
	if s, ok := d.names[string(raw)]; ok {
		return s
	}
	s := string(raw)
	if len(d.names) < maxNames && len(s) <= maxInterned {
		if d.names == nil {
			d.names = make(map[string]string)
		}
		d.names[s] = s
	}
	return s
}

// value is a literal value's string: name's last value on this
// connection if they are equal.
func (d *HeaderDecoder) value(name string, raw []byte) string {
	last, ok := d.lastVals[name]
	if ok && last == string(raw) {
		return last
	}
	s := string(raw)
	if len(raw) > maxInterned {
		return s
	}
	if !ok {
		if len(d.lastVals) >= maxNames {
			return s
		}
		if d.lastVals == nil {
			d.lastVals = make(map[string]string)
		}
	}
	d.lastVals[name] = s
	return s
}

// ValidFieldName reports whether name is a token in lower case, as
// HTTP/2 requires of a field name (RFC 9113 section 8.2.1).
func ValidFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b >= 0x80 || !httpguts.IsTokenRune(rune(b)) || 'A' <= b && b <= 'Z' {
			return false
		}
	}
	return true
}

// at is the field at index i of the static and dynamic tables.
func (d *HeaderDecoder) at(i uint64) (hpack.HeaderField, bool) {
	if i == 0 {
		return hpack.HeaderField{}, false
	}
	if i <= uint64(len(staticTable)) {
		return staticTable[i-1], true
	}
	i -= uint64(len(staticTable))
	if i > uint64(len(d.dyn)) {
		return hpack.HeaderField{}, false
	}
	return d.dyn[uint64(len(d.dyn))-i], true
}

// add inserts f into the dynamic table, evicting the oldest entries as
// needed; an entry larger than the table empties it (section 4.4).
func (d *HeaderDecoder) add(f hpack.HeaderField) {
	f.Sensitive = false
	d.dyn = append(d.dyn, f)
	d.size += f.Size()
	d.evict()
}

// evict removes the oldest entries until the table fits its maximum.
func (d *HeaderDecoder) evict() {
	n := 0
	for d.size > d.max && n < len(d.dyn) {
		d.size -= d.dyn[n].Size()
		n++
	}
	if n == 0 {
		return
	}
	k := copy(d.dyn, d.dyn[n:])
	clear(d.dyn[k:])
	d.dyn = d.dyn[:k]
}

// readInt reads an integer with an n-bit prefix (RFC 7541 section 5.1).
// Nothing in a header block needs more than 32 bits; longer encodings of
// small numbers (zero continuation bytes) are accepted, as x/net's
// decoder accepts them, up to 63 bits.
func readInt(n uint8, p []byte) (uint64, []byte, bool) {
	if len(p) == 0 {
		return 0, nil, false
	}
	mask := uint64(1)<<n - 1
	i := uint64(p[0]) & mask
	p = p[1:]
	if i < mask {
		return i, p, true
	}
	for shift := uint(0); len(p) > 0 && shift < 63; shift += 7 {
		b := p[0]
		p = p[1:]
		i += uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			if i > 1<<32-1 {
				return 0, nil, false
			}
			return i, p, true
		}
	}
	return 0, nil, false
}

// staticTable is RFC 7541's Appendix A: index i is staticTable[i-1].
var staticTable = [...]hpack.HeaderField{
	{Name: ":authority"},
	{Name: ":method", Value: "GET"},
	{Name: ":method", Value: "POST"},
	{Name: ":path", Value: "/"},
	{Name: ":path", Value: "/index.html"},
	{Name: ":scheme", Value: "http"},
	{Name: ":scheme", Value: "https"},
	{Name: ":status", Value: "200"},
	{Name: ":status", Value: "204"},
	{Name: ":status", Value: "206"},
	{Name: ":status", Value: "304"},
	{Name: ":status", Value: "400"},
	{Name: ":status", Value: "404"},
	{Name: ":status", Value: "500"},
	{Name: "accept-charset"},
	{Name: "accept-encoding", Value: "gzip, deflate"},
	{Name: "accept-language"},
	{Name: "accept-ranges"},
	{Name: "accept"},
	{Name: "access-control-allow-origin"},
	{Name: "age"},
	{Name: "allow"},
	{Name: "authorization"},
	{Name: "cache-control"},
	{Name: "content-disposition"},
	{Name: "content-encoding"},
	{Name: "content-language"},
	{Name: "content-length"},
	{Name: "content-location"},
	{Name: "content-range"},
	{Name: "content-type"},
	{Name: "cookie"},
	{Name: "date"},
	{Name: "etag"},
	{Name: "expect"},
	{Name: "expires"},
	{Name: "from"},
	{Name: "host"},
	{Name: "if-match"},
	{Name: "if-modified-since"},
	{Name: "if-none-match"},
	{Name: "if-range"},
	{Name: "if-unmodified-since"},
	{Name: "last-modified"},
	{Name: "link"},
	{Name: "location"},
	{Name: "max-forwards"},
	{Name: "proxy-authenticate"},
	{Name: "proxy-authorization"},
	{Name: "range"},
	{Name: "referer"},
	{Name: "refresh"},
	{Name: "retry-after"},
	{Name: "server"},
	{Name: "set-cookie"},
	{Name: "strict-transport-security"},
	{Name: "transfer-encoding"},
	{Name: "user-agent"},
	{Name: "vary"},
	{Name: "via"},
	{Name: "www-authenticate"},
}

// knownNames are the names a literal is given without allocating: the
// static table's, and those the LLM APIs and their SDKs send.
var knownNames = func() map[string]string {
	m := make(map[string]string)
	for _, f := range staticTable {
		m[f.Name] = f.Name
	}
	for _, n := range []string{
		"x-api-key", "anthropic-version", "anthropic-beta", "openai-organization", "openai-project",
		"openai-version", "openai-processing-ms", "x-request-id", "request-id", "te", "x-stainless-arch",
		"x-stainless-lang", "x-stainless-os", "x-stainless-package-version", "x-stainless-runtime",
		"x-stainless-runtime-version", "x-stainless-retry-count", "x-stainless-timeout",
		"idempotency-key", "traceparent", "tracestate", "x-forwarded-for", "x-forwarded-proto",
		"x-strait-overhead-us", "x-strait-overhead-total-us", "x-strait-trace", "x-strait-target",
		"x-strait-attempts", "x-content-type-options", "x-accel-buffering", "keep-alive",
		"connection", "upgrade", "proxy-connection", "trailer",
	} {
		m[n] = n
	}
	return m
}()
