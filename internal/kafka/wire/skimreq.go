package wire

import "encoding/binary"

// The request skimmers read the resources a request names straight from
// its bytes, so that a filter which only has to look (authorization, when
// every name is allowed) lets the request go on unread and undecoded, as
// requests no filter subscribes to do. They allocate nothing; a body they
// cannot read whole reports ok false, and the caller decodes it instead.

// int16 reads a big-endian int16.
func (c *cursor) int16() int16 {
	if c.bad || len(c.b)-c.off < 2 {
		c.bad = true
		return 0
	}
	v := int16(binary.BigEndian.Uint16(c.b[c.off:]))
	c.off += 2
	return v
}

// arrayLen reads an array length: compact in flexible versions, int32
// before. Null and empty both read as 0; a negative legacy length is
// malformed but for -1 (null).
func (c *cursor) arrayLen(flexible bool) int {
	if flexible {
		return c.compactLen()
	}
	n := c.int32()
	if n < -1 {
		c.bad = true
	}
	return int(max(n, 0))
}

// str reads a string (nullable or not): compact in flexible versions,
// int16-length before. null reports false.
func (c *cursor) str(flexible bool) ([]byte, bool) {
	var n int
	if flexible {
		v := c.uvarint()
		if v == 0 {
			return nil, false
		}
		n = int(v - 1)
	} else {
		l := c.int16()
		if l < 0 {
			return nil, false
		}
		n = int(l)
	}
	if c.bad || n > len(c.b)-c.off {
		c.bad = true
		return nil, false
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	return s, true
}

func (c *cursor) uuid() (id [16]byte) {
	if c.bad || len(c.b)-c.off < 16 {
		c.bad = true
		return id
	}
	copy(id[:], c.b[c.off:])
	c.off += 16
	return id
}

// ProducePrefix is what the start of a Produce request says.
type ProducePrefix struct {
	// Transactional: the request carries a transactional id.
	Transactional bool
	Acks          int16
	// Topics is how many topics the request names; Name (before v13) or
	// ID (v13+) is the first one's. Name aliases the body.
	Topics int
	Name   []byte
	ID     [16]byte
}

// SkimProduce reads a Produce request body up to its first topic's name:
// enough to check a request that names one topic (nearly every producer's)
// without reading its records. body may be a prefix of the whole; ok is
// false if it is too short or does not parse.
func SkimProduce(body []byte, version int16) (p ProducePrefix, ok bool) {
	flex := version >= 9
	c := cursor{b: body}
	p = produceHead(&c, version)
	if p.Topics > 0 {
		if version >= 13 {
			p.ID = c.uuid()
		} else {
			p.Name, _ = c.str(flex)
		}
	}
	return p, !c.bad
}

// produceHead reads what a Produce request body holds before its first
// topic: the transactional id (v3+), acks, the timeout and the topic count.
func produceHead(c *cursor, version int16) (p ProducePrefix) {
	flex := version >= 9
	if version >= 3 {
		_, p.Transactional = c.str(flex)
	}
	p.Acks = c.int16()
	c.skip(4) // timeout
	p.Topics = c.arrayLen(flex)
	return p
}

// SkimProduceTopics walks a whole Produce request body and calls fn for
// each topic it writes to (its name before v13, its ID from v13), until fn
// returns false; the records are skipped, not read. ok is false if the body
// does not parse to its end.
func SkimProduceTopics(body []byte, version int16, fn func(name []byte, id [16]byte) bool) (p ProducePrefix, ok bool) {
	flex := version >= 9
	c := cursor{b: body}
	p = produceHead(&c, version)
	more := true
	for i := 0; i < p.Topics && !c.bad; i++ {
		var name []byte
		var id [16]byte
		if version >= 13 {
			id = c.uuid()
		} else {
			name, _ = c.str(flex)
		}
		if i == 0 {
			p.Name, p.ID = name, id
		}
		if more && !c.bad {
			more = fn(name, id)
		}
		parts := c.arrayLen(flex)
		for j := 0; j < parts && !c.bad; j++ {
			c.skip(4) // partition
			if flex {
				c.skip(c.compactLen()) // records (compact nullable bytes)
				c.tags()
			} else {
				n := c.int32()
				if n > 0 {
					c.skip(int(n))
				} else if n < -1 {
					c.bad = true
				}
			}
		}
		if flex {
			c.tags()
		}
	}
	if flex {
		c.tags()
	}
	return p, !c.bad && c.off == len(body)
}

// FetchTopic is one topic a Fetch request names: Name before v13, ID from
// it. Name aliases the body.
type FetchTopic struct {
	Name []byte
	ID   [16]byte
}

// SkimFetch walks a whole Fetch request body (v4 and later) and calls fn
// for each topic it fetches, until fn returns false. follower reports a
// replica's fetch (a replica id of 0 or more; from v15, any top-level
// tagged field, where the replica state lives, counts as one, so that
// such a request is decoded and checked in full). Forgotten topics are not
// reported: a consumer leaving a partition reads nothing. ok is false if
// the body does not parse to its end, or the version is older than 4.
func SkimFetch(body []byte, version int16, fn func(FetchTopic) bool) (follower, ok bool) {
	if version < 4 {
		return false, false
	}
	flex := version >= 12
	c := cursor{b: body}
	if version < 15 {
		follower = c.int32() >= 0
	}
	c.skip(4 + 4 + 4 + 1) // max wait, min bytes, max bytes, isolation level
	if version >= 7 {
		c.skip(4 + 4) // session id and epoch
	}
	topics := c.arrayLen(flex)
	more := true
	for i := 0; i < topics && !c.bad; i++ {
		var t FetchTopic
		if version >= 13 {
			t.ID = c.uuid()
		} else {
			t.Name, _ = c.str(flex)
		}
		if more && !c.bad {
			more = fn(t)
		}
		parts := c.arrayLen(flex)
		for j := 0; j < parts && !c.bad; j++ {
			n := 4 + 8 + 4 // partition, fetch offset, partition max bytes
			if version >= 9 {
				n += 4 // current leader epoch
			}
			if version >= 12 {
				n += 4 // last fetched epoch
			}
			if version >= 5 {
				n += 8 // log start offset
			}
			c.skip(n)
			if flex {
				c.tags()
			}
		}
		if flex {
			c.tags()
		}
	}
	if version >= 7 {
		forgotten := c.arrayLen(flex)
		for i := 0; i < forgotten && !c.bad; i++ {
			if version >= 13 {
				c.skip(16)
			} else {
				c.str(flex)
			}
			c.skip(4 * c.arrayLen(flex))
			if flex {
				c.tags()
			}
		}
	}
	if version >= 11 {
		c.str(flex) // rack id
	}
	if flex && c.tags() > 0 && version >= 15 {
		follower = true
	}
	if c.bad || c.off != len(body) {
		return false, false
	}
	return follower, true
}
