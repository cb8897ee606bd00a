package h2client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/straitgw/strait/internal/h2frames"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock is a response header block (or trailers) being received,
// and then decoded: the reader's own. x/net's framer can decode blocks
// itself (ReadMetaHeaders), but allocates a frame, a field slice and a
// string per literal for every answer; Strait's decoder reuses the
// strings a provider repeats on every answer, and the slice.
type headerBlock struct {
	dec    *h2frames.HeaderDecoder
	id     uint32
	ended  bool // END_STREAM was on the HEADERS frame
	frames int
	raw    []byte // the fragments of a block that spans frames
	rawLen int

	fields    []hpack.HeaderField
	remain    uint32 // what the header list may still take (MaxHeaderListSize)
	truncated bool   // the list went past maxHeaderListSize
	regular   bool   // a regular field was seen
	invalid   error
}

// maxBlockFrames bounds the frames of one block: a block at the byte
// bound below in frames of 16 KiB takes 129.
const maxBlockFrames = 512

// decodedBlock is a header block as the stream sees it.
type decodedBlock struct {
	id        uint32
	ended     bool
	truncated bool
	fields    []hpack.HeaderField
}

// status is the block's :status, or "".
func (b *decodedBlock) status() string {
	for _, f := range b.fields {
		if f.Name == ":status" {
			return f.Value
		}
	}
	return ""
}

// regularCount is the number of fields that are not pseudo-headers.
func (b *decodedBlock) regularCount() int {
	n := 0
	for _, f := range b.fields {
		if !strings.HasPrefix(f.Name, ":") {
			n++
		}
	}
	return n
}

// onHeadersFrame begins a header block.
func (c *conn) onHeadersFrame(f *http2.HeadersFrame) error {
	hb := &c.hb
	hb.id, hb.ended, hb.frames, hb.rawLen = f.StreamID, f.StreamEnded(), 1, 0
	hb.raw = hb.raw[:0]
	return c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// onContinuation continues one; the framer has checked that it follows
// its HEADERS on the same stream.
func (c *conn) onContinuation(f *http2.ContinuationFrame) error {
	c.hb.frames++
	return c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// fragment takes part of a header block, and decodes and hands on the
// block when it is whole.
func (c *conn) fragment(p []byte, end bool) error {
	hb := &c.hb
	hb.rawLen += len(p)
	// Encoded, a list is rarely more than twice its decoded size; a
	// block far past the bound is not decoded at all, and ends the
	// connection, since its decoder's table is then unknown.
	if hb.frames > maxBlockFrames || hb.rawLen > 2*maxHeaderListSize+1024 {
		return protoErr("the response's header list is larger than %d bytes", maxHeaderListSize)
	}
	if !end || hb.frames > 1 {
		hb.raw = append(hb.raw, p...) // frames are reused: keep the bytes
		if !end {
			return nil
		}
		p = hb.raw
	}
	hb.fields = hb.fields[:0]
	hb.remain, hb.truncated, hb.regular, hb.invalid = maxHeaderListSize, false, false, nil
	err := hb.dec.Decode(p, hb.emit)
	if cap(hb.raw) > 64<<10 {
		hb.raw = nil
	}
	if err != nil {
		return connErr{code: http2.ErrCodeCompression, msg: "the response's header block does not decode"}
	}
	if hb.invalid == nil {
		hb.invalid = checkPseudo(hb.fields)
	}
	if hb.invalid != nil {
		c.streamError(hb.id, http2.ErrCodeProtocol, fmt.Errorf("malformed response (%v)", hb.invalid))
		return nil
	}
	err = c.onHeaders(&decodedBlock{id: hb.id, ended: hb.ended, truncated: hb.truncated, fields: hb.fields})
	if cap(hb.fields) > 64 {
		hb.fields = nil
	}
	return err
}

// emit checks each field as it is decoded, as x/net's framer does, and
// keeps it while the list is within maxHeaderListSize.
func (hb *headerBlock) emit(f hpack.HeaderField) {
	if hb.invalid != nil || hb.truncated {
		return
	}
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		hb.invalid = fmt.Errorf("invalid value of field %q", f.Name) // not the value: it may be secret
		return
	}
	if strings.HasPrefix(f.Name, ":") {
		if hb.regular {
			hb.invalid = errors.New("pseudo-header field after a regular field")
			return
		}
	} else {
		hb.regular = true
		if !h2frames.ValidFieldName(f.Name) {
			hb.invalid = fmt.Errorf("invalid field name %q", f.Name)
			return
		}
	}
	size := f.Size()
	if size > hb.remain {
		hb.truncated = true
		return
	}
	hb.remain -= size
	hb.fields = append(hb.fields, f)
}

// checkPseudo checks a response's pseudo-header fields: :status only,
// once.
func checkPseudo(fields []hpack.HeaderField) error {
	seen := false
	for _, f := range fields {
		if !strings.HasPrefix(f.Name, ":") {
			break
		}
		if f.Name != ":status" {
			return fmt.Errorf("pseudo-header field %q in a response", f.Name)
		}
		if seen {
			return errors.New("pseudo-header field :status twice")
		}
		seen = true
	}
	return nil
}
