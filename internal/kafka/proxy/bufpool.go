package proxy

import (
	"math/bits"
	"sync"
)

// Frame buffers for frames the proxy must hold whole (decoded or skimmed
// ones, such as Fetch responses of many megabytes) come from power-of-two
// size classes, shared by all connections: a busy connection reuses
// memory instead of allocating a fresh buffer per frame, and an idle one
// holds none.
const (
	minClassBits = 12 // 4 KiB
	maxClassBits = 27 // 128 MiB, above the largest legal frame
)

var bufPools [maxClassBits + 1]sync.Pool

func classOf(n int) int {
	if n <= 1<<minClassBits {
		return minClassBits
	}
	return bits.Len(uint(n - 1))
}

// getBuf returns a buffer of length n.
func getBuf(n int) []byte {
	c := classOf(n)
	if c > maxClassBits {
		return make([]byte, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuf returns a buffer from getBuf. The caller must not use it after.
func putBuf(b []byte) {
	c := classOf(cap(b))
	if c > maxClassBits || cap(b) != 1<<c {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}
