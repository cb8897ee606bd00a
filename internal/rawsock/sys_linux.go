package rawsock

import (
	"syscall"
	"unsafe"
)

// readFD and writeFD make their system call without telling the Go
// runtime, as a sleep of Sleep does. On a non-blocking socket the call
// never waits, so there is nothing to hand the processor over for, and
// what telling costs is not nothing: the bookkeeping on the way in and
// out, and the runtime's monitor thread, which finds the goroutine "in a
// system call" now and then, takes its processor away and then polls at
// its fastest for a while.
func readFD(fd int, p []byte) (int, error) {
	return rawIO(syscall.SYS_READ, fd, p)
}

func writeFD(fd int, p []byte) (int, error) {
	return rawIO(syscall.SYS_WRITE, fd, p)
}

func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, errno := syscall.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
