package h2frames

// HPACK (RFC 7541) for the header blocks the gateway writes. x/net's
// encoder searches a static and a dynamic table through maps for every
// field and Huffman-codes every string; per request that was a few
// microseconds and, worse, the deepest frames of a handler's stack, the
// point where its goroutine outgrew the stack it started with and the
// runtime copied it. The fields the gateway sends are few, and most of
// them change per request or are credentials that must not be indexed
// anyway, so this encoder keeps no dynamic table: a field is an entry of
// the static table, or a literal "without indexing" (or "never indexed"
// for credentials) whose name is the static table's where it has one.
// Strings go out as they are, without Huffman coding: a few bytes more
// per request, on connections whose bodies are hundreds of bytes.

// HeaderEncoder appends header fields. It keeps one bit of state per
// connection: the first block it writes on a connection begins with a
// dynamic table size update to 0, so that the peer's decoder never
// expects entries from it, whatever SETTINGS_HEADER_TABLE_SIZE it
// announces later.
type HeaderEncoder struct {
	begun bool
}

// Begin starts a header block in b.
func (e *HeaderEncoder) Begin(b []byte) []byte {
	if !e.begun {
		e.begun = true
		b = append(b, 0x20) // dynamic table size update: 0
	}
	return b
}

// AppendField appends one field; name must be lower case. A sensitive
// field (a credential) is marked never to be indexed, by this hop or by
// any intermediary after it (RFC 7541 section 7.1.3).
func AppendField(b []byte, name, value string, sensitive bool) []byte {
	if !sensitive {
		if i := staticPair(name, value); i != 0 {
			return appendInt(b, 0x80, 7, uint64(i))
		}
	}
	first := byte(0x00) // literal without indexing
	if sensitive {
		first = 0x10 // literal never indexed
	}
	if i := staticName(name); i != 0 {
		b = appendInt(b, first, 4, uint64(i))
	} else {
		b = append(b, first)
		b = appendString(b, name)
	}
	return appendString(b, value)
}

// AppendStatus appends a response's :status field.
func AppendStatus(b []byte, code int) []byte {
	switch code {
	case 200:
		return append(b, 0x80|8)
	case 204:
		return append(b, 0x80|9)
	case 206:
		return append(b, 0x80|10)
	case 304:
		return append(b, 0x80|11)
	case 400:
		return append(b, 0x80|12)
	case 404:
		return append(b, 0x80|13)
	case 500:
		return append(b, 0x80|14)
	}
	if code < 100 || code > 999 {
		code = 500 // a handler's bad code; net/http panics, we answer 500
	}
	b = append(b, 0x08, 3) // :status by static name, three octets
	return append(b, byte('0'+code/100), byte('0'+code/10%10), byte('0'+code%10))
}

func appendString(b []byte, s string) []byte {
	b = appendInt(b, 0, 7, uint64(len(s)))
	return append(b, s...)
}

// appendInt appends i with an n-bit prefix (RFC 7541 section 5.1); first
// holds the bits above the prefix.
func appendInt(b []byte, first byte, n uint, i uint64) []byte {
	limit := uint64(1)<<n - 1
	if i < limit {
		return append(b, first|byte(i))
	}
	b = append(b, first|byte(limit))
	i -= limit
	for i >= 0x80 {
		b = append(b, byte(i)|0x80)
		i >>= 7
	}
	return append(b, byte(i))
}

// staticPair is the static table's index of an entry with this name and
// value, or 0.
func staticPair(name, value string) int {
	switch name {
	case ":method":
		switch value {
		case "GET":
			return 2
		case "POST":
			return 3
		}
	case ":path":
		switch value {
		case "/":
			return 4
		case "/index.html":
			return 5
		}
	case ":scheme":
		switch value {
		case "http":
			return 6
		case "https":
			return 7
		}
	case "accept-encoding":
		if value == "gzip, deflate" {
			return 16
		}
	}
	return 0
}

// staticName is the lowest static table index with this name, or 0.
func staticName(name string) int {
	switch name {
	case ":authority":
		return 1
	case ":method":
		return 2
	case ":path":
		return 4
	case ":scheme":
		return 6
	case ":status":
		return 8
	case "accept-charset":
		return 15
	case "accept-encoding":
		return 16
	case "accept-language":
		return 17
	case "accept-ranges":
		return 18
	case "accept":
		return 19
	case "access-control-allow-origin":
		return 20
	case "age":
		return 21
	case "allow":
		return 22
	case "authorization":
		return 23
	case "cache-control":
		return 24
	case "content-disposition":
		return 25
	case "content-encoding":
		return 26
	case "content-language":
		return 27
	case "content-length":
		return 28
	case "content-location":
		return 29
	case "content-range":
		return 30
	case "content-type":
		return 31
	case "cookie":
		return 32
	case "date":
		return 33
	case "etag":
		return 34
	case "expect":
		return 35
	case "expires":
		return 36
	case "from":
		return 37
	case "host":
		return 38
	case "if-match":
		return 39
	case "if-modified-since":
		return 40
	case "if-none-match":
		return 41
	case "if-range":
		return 42
	case "if-unmodified-since":
		return 43
	case "last-modified":
		return 44
	case "link":
		return 45
	case "location":
		return 46
	case "max-forwards":
		return 47
	case "proxy-authenticate":
		return 48
	case "proxy-authorization":
		return 49
	case "range":
		return 50
	case "referer":
		return 51
	case "refresh":
		return 52
	case "retry-after":
		return 53
	case "server":
		return 54
	case "set-cookie":
		return 55
	case "strict-transport-security":
		return 56
	case "transfer-encoding":
		return 57
	case "user-agent":
		return 58
	case "vary":
		return 59
	case "via":
		return 60
	case "www-authenticate":
		return 61
	}
	return 0
}
