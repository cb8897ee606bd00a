package h1server

import (
	"errors"
	"sync"
	"syscall"
	"unsafe"
)

// watcher learns from the kernel which clients have closed their side of
// the connection (or reset it): one epoll instance of its own, in which
// each connection's socket is registered once, edge-triggered, for its
// peer's hang-up only (EPOLLRDHUP; errors and full hang-ups are always
// reported). Go's own poller keeps watching the same sockets for reads and
// writes; the two do not meet. A registration carries the connection's
// id, never reused, so a report that arrives after its connection ended
// finds nothing, even if the descriptor number was given to another.
type watcher struct {
	s    *Server
	ep   int
	wake int // an eventfd, readable once close wants the loop to end

	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

func newWatcher(s *Server) (*watcher, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, uintptr(syscall.O_CLOEXEC|syscall.O_NONBLOCK), 0)
	if errno != 0 {
		syscall.Close(ep)
		return nil, errno
	}
	w := &watcher{s: s, ep: ep, wake: int(r), done: make(chan struct{})}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	setToken(&ev, 0)
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, w.wake, &ev); err != nil {
		syscall.Close(w.wake)
		syscall.Close(ep)
		return nil, err
	}
	go w.run()
	return w, nil
}

// setToken stores a connection id in the event's 64-bit data (the Fd and
// Pad fields together, on every Linux architecture).
func setToken(ev *syscall.EpollEvent, id uint64) {
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = id
}

func token(ev *syscall.EpollEvent) uint64 { return *(*uint64)(unsafe.Pointer(&ev.Fd)) }

// add registers c's socket; false if it cannot be (c then runs unwatched).
func (w *watcher) add(c *conn) bool {
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | 1<<31} // 1<<31: EPOLLET, which syscall types as a negative int
	setToken(&ev, c.id)
	var err error
	cerr := c.rc.Control(func(fd uintptr) {
		err = syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	return errors.Join(cerr, err) == nil
}

// remove deregisters c's socket; call it before the socket is closed.
func (w *watcher) remove(c *conn) {
	_ = c.rc.Control(func(fd uintptr) {
		_ = syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_DEL, int(fd), nil)
	})
}

func (w *watcher) run() {
	defer close(w.done)
	evs := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(w.ep, evs, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			w.s.log().Error("HTTP/1.1: watching for clients leaving failed; requests whose client left run on until they write", "err", err)
			return
		}
		for i := range evs[:n] {
			id := token(&evs[i])
			if id == 0 {
				w.mu.Lock()
				closed := w.closed
				w.mu.Unlock()
				if closed {
					return
				}
				continue
			}
			if c := w.s.byID(id); c != nil {
				c.hangUp()
			}
		}
	}
}

// close ends the loop and releases the epoll instance.
func (w *watcher) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	one := uint64(1)
	_, _ = syscall.Write(w.wake, (*[8]byte)(unsafe.Pointer(&one))[:])
	<-w.done
	syscall.Close(w.wake)
	syscall.Close(w.ep)
}

// ended is closed once the loop has returned.
func (w *watcher) ended() <-chan struct{} { return w.done }
