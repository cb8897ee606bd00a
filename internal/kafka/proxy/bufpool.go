package proxy

import (
	"math/bits"
	"sync"
)

// Frame buffers for frames the proxy must hold whole (decoded or skimmed
// ones, such as Fetch responses of many megabytes) come from power-of-two
// size classes, shared by all connections: a busy connection reuses
// memory instead of allocating (and zeroing) a fresh buffer per frame, and
// an idle one holds none.
//
// Small classes use sync.Pool. Large ones keep a few buffers on a free list
// instead: sync.Pool empties at every GC, and re-faulting a 16 MiB buffer
// after each cycle cost measurable CPU per MB relayed. The free lists
// together keep at most about bigRetain bytes.
const (
	minClassBits = 12 // 4 KiB
	bigClassBits = 20 // 1 MiB: from here, free lists
	maxClassBits = 27 // 128 MiB, above the default max_frame_bytes; bigger buffers are not pooled
	bigRetain    = 64 << 20
)

var (
	smallPools [bigClassBits]sync.Pool
	bigFree    [maxClassBits + 1]chan []byte
)

func init() {
	for c := bigClassBits; c <= maxClassBits; c++ {
		bigFree[c] = make(chan []byte, bigRetain>>c/(maxClassBits-bigClassBits+1)+1)
	}
}

func classOf(n int) int {
	if n <= 1<<minClassBits {
		return minClassBits
	}
	return bits.Len(uint(n - 1))
}

// getBuf returns a buffer of length n.
func getBuf(n int) []byte {
	c := classOf(n)
	switch {
	case c > maxClassBits:
		return make([]byte, n)
	case c >= bigClassBits:
		select {
		case b := <-bigFree[c]:
			return b[:n]
		default:
		}
	default:
		if p, ok := smallPools[c].Get().(*[]byte); ok {
			return (*p)[:n]
		}
	}
	return make([]byte, n, 1<<c)
}

// putBuf returns a buffer from getBuf. The caller must not use it after.
func putBuf(b []byte) {
	c := classOf(cap(b))
	if c > maxClassBits || cap(b) != 1<<c {
		return
	}
	if c >= bigClassBits {
		select {
		case bigFree[c] <- b[:0]:
		default:
		}
		return
	}
	b = b[:0]
	smallPools[c].Put(&b)
}
