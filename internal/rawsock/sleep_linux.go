package rawsock

import (
	"syscall"
	"time"
	"unsafe"
)

// Sleep sleeps up to d on the calling thread without telling the Go
// runtime. A goroutine that sleeps the usual way parks, and its thread
// then waits in the network poller while the runtime's monitor thread
// wakes beside it; measured in the benchmark generator, that made each
// 2 ms poll cost about twice as much (and a nanosleep through
// syscall.Nanosleep, which hands the runtime its processor, more still).
// A signal ends the sleep early and it is not resumed: that is how the
// runtime asks a goroutine to stop, for a garbage collection or to let
// another run, and the caller only polls a little sooner.
func Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
