package gateway

// Translating a request decodes its JSON several levels deep. On the
// goroutine x/net's server starts for each request, which begins with a
// small stack, that depth makes the runtime grow the stack, doubling it
// and copying it each time, and each copy walks every frame then on the
// stack; the garbage collector shrinks it again while the request waits
// on its provider. A gateway CPU profile at 1,000 translated requests/s
// put those copies at 7% of the gateway's CPU.
//
// Translations used to run on a few long-lived goroutines whose stacks
// stayed grown, handed over with two channel operations. The handover
// cost more than it saved once translation stopped decoding by reflection:
// waking the pooled goroutine wakes an idle thread too, and in
// BenchmarkServeHTTPTranslatedJSON it was about 12 µs of 30. Instead the
// caller's stack is grown before the translation, in one step, by a call
// whose frame is as large as a translation needs: the runtime sizes the
// new stack for that frame at once, and copies it while it is still
// shallow, which is cheap. On a grown stack the call costs clearing its
// frame. BenchmarkTranslateOnFreshGoroutine compares the ways.

// grownStackBytes is the stack a translation of an ordinary request and
// its answer runs in without growing it again: the hand decoders nest a
// dozen frames. An unusual body, decoded by reflection, may still grow it.
const grownStackBytes = 16 << 10

// onGrownStack runs fn, a translation, after growing the caller's stack to
// grownStackBytes if it is smaller.
func onGrownStack(fn func()) {
	growStack()
	fn()
}

// growStack needs a frame of grownStackBytes, so the runtime grows the
// stack to hold it before the call starts (a no-op if it is big enough).
//
//go:noinline
func growStack() byte {
	var frame [grownStackBytes]byte
	return lastByte(frame[:])
}

// lastByte keeps growStack's frame from being optimised away.
//
//go:noinline
func lastByte(b []byte) byte { return b[len(b)-1] }
