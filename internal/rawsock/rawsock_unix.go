//go:build unix

package rawsock

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// Detach takes a connection's socket out of the Go runtime's network
// poller and returns it as a plain non-blocking descriptor; nc is closed.
func Detach(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("the connection offers no raw access")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	syscall.CloseOnExec(fd)
	// The duplicate shares the socket and its non-blocking mode; closing
	// the original takes it out of the poller (Go deregisters it first).
	nc.Close()
	return fd, nil
}

// ReadNow reads what the socket holds without waiting: 0 and no error if
// it holds nothing, io.EOF once the peer closed its side.
func ReadNow(fd int, p []byte) (int, error) {
	n, ready, err := now(readFD, fd, p)
	if ready && n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, err
}

// minRoom is the least free space ReadOnce reads into.
const minRoom = 4096

// ReadOnce reads once from fd, without waiting, into the free end of
// *buf, whose bytes from *off on are still unread. First it makes room:
// the unread bytes move to the front when the read ones are worth
// reclaiming, and the buffer doubles when less than 4 KiB is free. full
// reports that the read filled the room, so the socket may hold more.
func ReadOnce(fd int, buf *[]byte, off *int) (n int, full bool, err error) {
	in := *buf
	if *off > 0 && (*off == len(in) || cap(in)-len(in) < minRoom) {
		k := copy(in[:cap(in)], in[*off:])
		in, *off = in[:k], 0
	}
	if cap(in)-len(in) < minRoom {
		in = append(in[:len(in):len(in)], make([]byte, max(cap(in), minRoom))...)[:len(in)]
	}
	room := in[len(in):cap(in)]
	n, err = ReadNow(fd, room)
	*buf = in[:len(in)+n]
	return n, n == len(room), err
}

// WriteNow writes what the socket takes without waiting.
func WriteNow(fd int, p []byte) (int, error) {
	n, _, err := now(writeFD, fd, p)
	return n, err
}

// now makes one non-blocking read or write, again if a signal cut it
// short. ready is false, with no error, when the socket was not ready.
func now(op func(int, []byte) (int, error), fd int, p []byte) (n int, ready bool, err error) {
	for {
		n, err := op(fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, false, nil
		case err != nil:
			return 0, false, err
		}
		return n, true, nil
	}
}

// Close closes a descriptor Detach returned.
func Close(fd int) error { return syscall.Close(fd) }
