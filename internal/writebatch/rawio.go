//go:build unix

package writebatch

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/straitgw/strait/internal/rawsock"
)

// The socket's reads and writes are made as raw system calls
// (syscall.RawSyscall) through the connection's RawConn, as the Kafka
// relay makes its own: on a non-blocking socket they never wait, so the
// runtime's bookkeeping for a system call that might is pure cost, and on
// a gateway that idles between requests the first one after each idle
// moment also woke the runtime's monitor thread (a futex wake-up, 4% of
// the LLM gateway's CPU at 3,000 requests/s). RawConn keeps deadlines and
// the poller's waits as they were.

// rawSock is a TCP socket's raw access, and the state of the one read and
// the one write each side may have in progress (the callbacks are bound
// once, so a call allocates nothing).
type rawSock struct {
	rc    syscall.RawConn
	local net.Addr
	peer  net.Addr

	readFn  func(fd uintptr) bool
	rdst    []byte  // read into this, or, if nil, into a pooled buffer:
	rpool   *[]byte // the pooled buffer read into
	rn      int
	rerr    error
	writeFn func(fd uintptr) bool
	wsrc    []byte
	wdone   int
	werr    error
}

func newRawSock(c net.Conn) *rawSock {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &rawSock{rc: rc, local: tc.LocalAddr(), peer: tc.RemoteAddr()}
	s.readFn, s.writeFn = s.readRaw, s.writeRaw
	return s
}

// read reads once, waiting (in the poller) until there is something to
// read, as net.Conn.Read does: into p, or, if p is nil, into a buffer from
// readBufs, taken for each try and given back when the socket had nothing,
// so that none is held while the poller waits; b is that buffer when it
// holds the n bytes read. One reader at a time.
func (s *rawSock) read(p []byte) (b *[]byte, n int, err error) {
	if p != nil && len(p) == 0 {
		return nil, 0, nil
	}
	s.rdst, s.rpool, s.rn, s.rerr = p, nil, 0, nil
	err = s.rc.Read(s.readFn)
	b, s.rdst, s.rpool = s.rpool, nil, nil
	if err != nil {
		return nil, 0, rename(err, "read")
	}
	return b, s.rn, s.rerr
}

func (s *rawSock) readRaw(fd uintptr) bool {
	p, b := s.rdst, (*[]byte)(nil)
	if p == nil {
		b = readBufs.Get().(*[]byte)
		p = *b
	}
	n, err := rawsock.ReadNow(int(fd), p)
	if n > 0 {
		s.rpool, s.rn = b, n
		return true
	}
	if b != nil {
		readBufs.Put(b)
	}
	switch {
	case err == io.EOF:
		s.rerr = io.EOF
	case err != nil:
		s.rerr = &net.OpError{Op: "read", Net: "tcp", Source: s.local, Addr: s.peer, Err: os.NewSyscallError("read", err)}
	default:
		return false // nothing yet: the poller waits, holding no pooled buffer
	}
	return true
}

// write writes all of p, waiting for the socket as net.Conn.Write does.
// One writer at a time.
func (s *rawSock) write(p []byte) (int, error) {
	s.wsrc, s.wdone, s.werr = p, 0, nil
	err := s.rc.Write(s.writeFn)
	s.wsrc = nil
	if err != nil {
		return s.wdone, rename(err, "write")
	}
	return s.wdone, s.werr
}

func (s *rawSock) writeRaw(fd uintptr) bool {
	for s.wdone < len(s.wsrc) {
		n, err := rawsock.WriteNow(int(fd), s.wsrc[s.wdone:])
		if err != nil {
			s.werr = &net.OpError{Op: "write", Net: "tcp", Source: s.local, Addr: s.peer, Err: os.NewSyscallError("write", err)}
			return true
		}
		if n == 0 {
			return false // the socket is full: the poller waits
		}
		s.wdone += n
	}
	return true
}

// rename names a wait's failure (a deadline, the connection closed) as
// the read's or write's, as net.Conn's methods do, rather than RawConn's
// "raw-read".
func rename(err error, op string) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		oe.Op = op
	}
	return err
}

// quietSock reads once from c's socket without waiting and reports that
// it held nothing, and had not ended. It reads through RawConn even under
// the race detector: what it reads is thrown away with the connection.
func quietSock(c net.Conn) bool {
	rc := rawConnOf(c)
	if rc == nil {
		return true
	}
	return quietRaw(rc)
}

// quiet is quietSock for the raw socket.
func (s *rawSock) quiet() bool { return quietRaw(s.rc) }

func quietRaw(rc syscall.RawConn) bool {
	var one [1]byte
	held := false
	err := rc.Read(func(fd uintptr) bool {
		n, err := rawsock.ReadNow(int(fd), one[:])
		held = n > 0 || err != nil
		return true
	})
	return err == nil && !held
}
