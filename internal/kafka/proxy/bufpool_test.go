package proxy

import "testing"

// drainBig empties the big free lists through getBuf, as connections
// would, and returns how many bytes they held.
func drainBig(t *testing.T) int {
	t.Helper()
	total := 0
	for c := bigClassBits; c <= maxClassBits; c++ {
		for range cap(bigFree[c]) + 1 {
			if len(bigFree[c]) == 0 {
				break
			}
			total += cap(getBuf(1 << c))
		}
	}
	return total
}

// After a burst of big frames of every size, the free lists keep at most
// bigRetain bytes in all (they kept several times that, up to 287 MiB, when
// each class had its own count of buffers).
func TestBigFreeListsBounded(t *testing.T) {
	drainBig(t)
	// Buffers of every pooled size, cut from one allocation that is never
	// written: the pool only counts them.
	backing := make([]byte, 64<<20)
	for c := bigClassBits; c <= maxClassBits; c++ {
		for i := range (64 << 20) >> c {
			putBuf(backing[i<<c : i<<c : (i+1)<<c])
		}
	}
	if held := bigHeld.Load(); held > bigRetain {
		t.Errorf("the free lists count %d bytes, over %d", held, bigRetain)
	}
	if got := drainBig(t); got > bigRetain || got < bigRetain/2 {
		t.Errorf("the free lists held %d bytes; want at most %d, and some", got, bigRetain)
	}
	if held := bigHeld.Load(); held != 0 {
		t.Errorf("%d bytes counted after the free lists were emptied", held)
	}
	// Reuse still works once there is room.
	b := getBuf(3 << 20)
	putBuf(b)
	if got := getBuf(3 << 20); &got[:1][0] != &b[:1][0] {
		t.Error("a big buffer put back was not reused")
	}
}

// A frame bigger than the free lists could keep gets a buffer of its own
// size, not one rounded up to the next power of two.
func TestHugeFrameBufferExact(t *testing.T) {
	n := bigRetain + 1
	if got := cap(getBuf(n)); got != n {
		t.Errorf("a %d-byte frame got a %d-byte buffer", n, got)
	}
}
