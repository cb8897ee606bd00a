package rawsock

import (
	"errors"
	"syscall"
	"unsafe"
)

// Poller waits, when a loop has nothing to do, until one of its sockets
// has something to read or Wake is called. A busy loop does not use it: it
// polls its sockets on its own schedule instead.
type Poller struct {
	ep    int
	wake  int // an eventfd, readable once woken
	evs   []syscall.EpollEvent
	ready []int
}

// NewPoller returns a poller watching nothing.
func NewPoller() (*Poller, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, uintptr(syscall.O_CLOEXEC|syscall.O_NONBLOCK), 0)
	if errno != 0 {
		syscall.Close(ep)
		return nil, errno
	}
	p := &Poller{ep: ep, wake: int(r), evs: make([]syscall.EpollEvent, 256)}
	if err := p.Add(p.wake); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Add watches fd for input (or its end).
func (p *Poller) Add(fd int) error {
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	return syscall.EpollCtl(p.ep, syscall.EPOLL_CTL_ADD, fd, &ev)
}

// Remove stops watching fd; call it before closing fd.
func (p *Poller) Remove(fd int) {
	_ = syscall.EpollCtl(p.ep, syscall.EPOLL_CTL_DEL, fd, nil)
}

// Wait blocks until a watched socket is readable, Wake is called, or
// timeoutMs passes (-1: no timeout; 0: just look), and returns the sockets
// that are readable (or at their end), valid until the next Wait. It tells
// the runtime it blocks, so the goroutine's processor serves others
// meanwhile. It reports at most 256 sockets: the rest stay readable and
// come with the next Wait.
func (p *Poller) Wait(timeoutMs int) ([]int, error) {
	var n int
	var err error
	if timeoutMs == 0 {
		// Nothing to wait for: no need to hand the processor over.
		r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(p.ep), uintptr(unsafe.Pointer(&p.evs[0])), uintptr(len(p.evs)), 0, 0, 0)
		n = int(r)
		if errno != 0 {
			n, err = 0, errno
		}
	} else {
		n, err = syscall.EpollWait(p.ep, p.evs, timeoutMs)
	}
	if err != nil && !errors.Is(err, syscall.EINTR) {
		return nil, err
	}
	p.ready = p.ready[:0]
	for _, ev := range p.evs[:max(n, 0)] {
		if int(ev.Fd) == p.wake {
			var b [8]byte
			_, _ = syscall.Read(p.wake, b[:])
			continue
		}
		p.ready = append(p.ready, int(ev.Fd))
	}
	return p.ready, nil
}

// Wake ends a Wait in progress, or the next one.
func (p *Poller) Wake() {
	one := uint64(1)
	_, _ = syscall.Write(p.wake, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// Close releases the poller.
func (p *Poller) Close() error {
	return errors.Join(syscall.Close(p.wake), syscall.Close(p.ep))
}
