package mockllm

import (
	"bytes"
	"errors"
	"strings"

	"github.com/straitgw/strait/internal/h2frames"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Request header blocks. A load generator sends the same header block
// for every request, and decoding it (a string allocated per field) was a
// fifth of a plain answer's cost; so a connection keeps the last block it
// decoded and its fields, and a block that is the same bytes is not
// decoded again. That is only sound for a block that neither reads nor
// changes HPACK's dynamic table, whose decoding depends on nothing but its
// bytes: staticOnly tells them.

// headerBlock gathers a header block across CONTINUATION frames.
type headerBlock struct {
	stream uint32
	ended  bool // its HEADERS frame ended the stream
	buf    []byte

	last       []byte // the last block decoded, if it can be reused
	lastFields []hpack.HeaderField
	lastHead   *reqHead // what lastFields make, once read
}

var (
	errHeaderList = errors.New("header list too large")
	errBadField   = errors.New("malformed header field")
)

// fields decodes a whole header block, as x/net's framer would with
// ReadMetaHeaders: a connection error (COMPRESSION_ERROR) if it does not
// decode, errBadField for a field HTTP/2 forbids, and errHeaderList if the
// list is larger than maxHeaderList.
func (c *lconn) fields(block []byte) ([]hpack.HeaderField, error) {
	hb := &c.hb
	if hb.last != nil && bytes.Equal(block, hb.last) {
		return hb.lastFields, nil
	}
	var fields []hpack.HeaderField
	var bad, big bool
	sawRegular := false
	remain := uint32(maxHeaderList)
	c.dec.SetEmitEnabled(true)
	c.dec.SetEmitFunc(func(f hpack.HeaderField) {
		if bad || big {
			return
		}
		if !httpguts.ValidHeaderFieldValue(f.Value) {
			bad = true
			return
		}
		if strings.HasPrefix(f.Name, ":") {
			if sawRegular {
				bad = true
				return
			}
			switch f.Name {
			case ":method", ":path", ":scheme", ":authority", ":protocol":
			default:
				bad = true
				return
			}
			for _, g := range fields {
				if g.Name == f.Name {
					bad = true // a pseudo-header twice
					return
				}
			}
		} else {
			sawRegular = true
			if !h2frames.ValidFieldName(f.Name) {
				bad = true
				return
			}
		}
		if size := f.Size(); size > remain {
			big = true
			return
		} else {
			remain -= size
		}
		fields = append(fields, f)
	})
	defer c.dec.SetEmitFunc(func(hpack.HeaderField) {})
	if _, err := c.dec.Write(block); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if err := c.dec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	switch {
	case bad:
		return nil, errBadField
	case big:
		return nil, errHeaderList
	}
	hb.lastHead = nil
	if staticOnly(block) {
		hb.last = append(hb.last[:0], block...)
		hb.lastFields = fields
	} else {
		hb.last, hb.lastFields = hb.last[:0], nil
	}
	return fields, nil
}

// staticOnly reports whether every representation in an HPACK block uses
// the static table at most: no reference to the dynamic table, no literal
// added to it and no change of its size (RFC 7541, section 6).
func staticOnly(b []byte) bool {
	const staticEntries = 61
	for len(b) > 0 {
		first := b[0]
		switch {
		case first&0x80 != 0: // indexed field
			idx, rest, ok := hpackInt(b, 7)
			if !ok || idx == 0 || idx > staticEntries {
				return false
			}
			b = rest
		case first&0xe0 == 0x00: // literal without indexing or never indexed
			idx, rest, ok := hpackInt(b, 4)
			if !ok || idx > staticEntries {
				return false
			}
			b = rest
			if idx == 0 {
				if b, ok = skipHpackString(b); !ok {
					return false
				}
			}
			if b, ok = skipHpackString(b); !ok {
				return false
			}
		default: // incremental indexing, or a table size update
			return false
		}
	}
	return true
}

// hpackInt reads an integer with an n-bit prefix (RFC 7541, 5.1).
func hpackInt(b []byte, n uint) (uint64, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	mask := uint64(1)<<n - 1
	v := uint64(b[0]) & mask
	b = b[1:]
	if v < mask {
		return v, b, true
	}
	for shift := uint(0); shift < 28; shift += 7 {
		if len(b) == 0 {
			return 0, nil, false
		}
		c := b[0]
		b = b[1:]
		v += uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, b, true
		}
	}
	return 0, nil, false
}

// skipHpackString skips a string literal.
func skipHpackString(b []byte) ([]byte, bool) {
	n, rest, ok := hpackInt(b, 7)
	if !ok || n > uint64(len(rest)) {
		return nil, false
	}
	return rest[n:], true
}
