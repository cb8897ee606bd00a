package llmload

import (
	"syscall"
	"time"
	"unsafe"
)

// pollSleep sleeps d on the calling thread without telling the Go
// runtime. A goroutine that sleeps the usual way parks, and its thread
// then waits in the network poller while the runtime's monitor thread
// wakes beside it; measured here, that made each 2 ms poll cost three
// context switches instead of one. The runtime can still preempt the
// sleeper: a signal ends nanosleep early.
func pollSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), uintptr(unsafe.Pointer(&ts)), 0)
		if e != syscall.EINTR {
			return
		}
	}
}
