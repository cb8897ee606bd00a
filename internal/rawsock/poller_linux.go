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
	ep   int
	wake int // an eventfd, readable once woken
	evs  []syscall.EpollEvent
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
	p := &Poller{ep: ep, wake: int(r), evs: make([]syscall.EpollEvent, 64)}
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
// timeoutMs passes (-1: no timeout). It tells the runtime it blocks, so the
// goroutine's processor serves others meanwhile.
func (p *Poller) Wait(timeoutMs int) error {
	n, err := syscall.EpollWait(p.ep, p.evs, timeoutMs)
	if err != nil && !errors.Is(err, syscall.EINTR) {
		return err
	}
	for _, ev := range p.evs[:max(n, 0)] {
		if int(ev.Fd) == p.wake {
			var b [8]byte
			_, _ = syscall.Read(p.wake, b[:])
		}
	}
	return nil
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
