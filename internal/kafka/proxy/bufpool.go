package proxy

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Frame buffers for frames the proxy must hold whole (decoded or skimmed
// ones, such as Fetch responses of many megabytes) come from power-of-two
// size classes, shared by all connections: a busy connection reuses
// memory instead of allocating (and zeroing) a fresh buffer per frame, and
// an idle one holds none.
//
// Small classes use sync.Pool. Large ones keep buffers on free lists
// instead: sync.Pool empties at every GC, and re-faulting a 16 MiB buffer
// after each cycle cost measurable CPU per MB relayed. The free lists
// together keep at most bigRetain bytes, counted as buffers go on and off
// them, so that a burst of big frames leaves at most that much behind; a
// buffer that would take them past it is left to the GC. Frames larger
// than bigRetain could never be kept, so their buffers are allocated to
// size rather than rounded up to a class.
const (
	minClassBits = 12 // 4 KiB
	bigClassBits = 20 // 1 MiB: from here, free lists
	maxClassBits = 26 // 64 MiB, bigRetain: bigger buffers are not pooled
	bigRetain    = 64 << 20
)

var (
	smallPools [bigClassBits]sync.Pool
	bigFree    [maxClassBits + 1]chan []byte
	bigHeld    atomic.Int64 // bytes on the free lists
)

func init() {
	for c := bigClassBits; c <= maxClassBits; c++ {
		bigFree[c] = make(chan []byte, bigRetain>>c)
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
			bigHeld.Add(-int64(cap(b)))
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
		n := int64(cap(b))
		if bigHeld.Add(n) > bigRetain {
			bigHeld.Add(-n)
			return
		}
		select {
		case bigFree[c] <- b[:0]:
		default:
			bigHeld.Add(-n)
		}
		return
	}
	b = b[:0]
	smallPools[c].Put(&b)
}
