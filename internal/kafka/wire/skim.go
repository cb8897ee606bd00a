package wire

import "encoding/binary"

// The skimmers below walk a response body without decoding it, to find
// whether its top-level tagged fields are present. The KIP-951 NodeEndpoints
// field that carries broker addresses sits there, and only on responses that
// report a moved leader, so the proxy can pass nearly every Produce and Fetch
// response through untouched and decode only the rare one that needs its
// addresses rewritten. They allocate nothing.

type cursor struct {
	b   []byte
	off int
	bad bool
}

func (c *cursor) skip(n int) {
	if c.bad || n < 0 || n > len(c.b)-c.off {
		c.bad = true
		return
	}
	c.off += n
}

func (c *cursor) uvarint() uint32 {
	if c.bad {
		return 0
	}
	v, n := Uvarint(c.b[c.off:])
	if n == 0 {
		c.bad = true
		return 0
	}
	c.off += n
	return v
}

func (c *cursor) int32() int32 {
	if c.bad || len(c.b)-c.off < 4 {
		c.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(c.b[c.off:]))
	c.off += 4
	return v
}

// compactLen reads a compact (uvarint length+1) array, string or bytes
// length; null (0) reads as 0.
func (c *cursor) compactLen() int {
	v := c.uvarint()
	if v == 0 {
		return 0
	}
	return int(v - 1)
}

func (c *cursor) tags() (count int) {
	if c.bad {
		return 0
	}
	n, err := SkipTags(c.b[c.off:])
	if err != nil {
		c.bad = true
		return 0
	}
	num, _ := Uvarint(c.b[c.off:])
	c.off += n
	return int(num)
}

// FetchResponseHasTopLevelTags reports whether a flexible (v12+) Fetch
// response body carries top-level tagged fields. ok is false if the body
// does not parse.
func FetchResponseHasTopLevelTags(body []byte, version int16) (has, ok bool) {
	c := cursor{b: body}
	c.skip(4 + 2 + 4) // throttle, error code, session id
	topics := c.compactLen()
	for i := 0; i < topics && !c.bad; i++ {
		if version >= 13 {
			c.skip(16)
		} else {
			c.skip(c.compactLen())
		}
		parts := c.compactLen()
		for j := 0; j < parts && !c.bad; j++ {
			c.skip(4 + 2 + 8 + 8 + 8) // partition, error, hwm, lso, log start
			aborted := c.compactLen()
			for k := 0; k < aborted && !c.bad; k++ {
				c.skip(8 + 8)
				c.tags()
			}
			c.skip(4) // preferred read replica
			c.skip(c.compactLen())
			c.tags()
		}
		c.tags()
	}
	n := c.tags()
	if c.bad || c.off != len(body) {
		return false, false
	}
	return n > 0, true
}

// ProduceResponseHasTopLevelTags is FetchResponseHasTopLevelTags for
// flexible (v9+) Produce responses.
func ProduceResponseHasTopLevelTags(body []byte, version int16) (has, ok bool) {
	c := cursor{b: body}
	topics := c.compactLen()
	for i := 0; i < topics && !c.bad; i++ {
		if version >= 13 {
			c.skip(16)
		} else {
			c.skip(c.compactLen())
		}
		parts := c.compactLen()
		for j := 0; j < parts && !c.bad; j++ {
			c.skip(4 + 2 + 8 + 8 + 8) // partition, error, base offset, append time, log start
			errs := c.compactLen()
			for k := 0; k < errs && !c.bad; k++ {
				c.skip(4)
				c.skip(c.compactLen())
				c.tags()
			}
			c.skip(c.compactLen()) // error message
			c.tags()
		}
		c.tags()
	}
	c.int32() // throttle
	n := c.tags()
	if c.bad || c.off != len(body) {
		return false, false
	}
	return n > 0, true
}
