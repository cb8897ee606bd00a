package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// The relay's buffered reader and writer differ from bufio's in one way
// that matters at thousands of idle connections: they hold a buffer only
// while it has bytes in it. A reader gives its buffer back to a shared pool
// once emptied, and over a plain TCP socket also while it waits for bytes
// (the read that found nothing, EAGAIN, gives it back before the wait); a
// writer gives its buffer back on every flush. So an idle connection pair
// holds no buffer at all, where bufio's four came to 192 KiB per pair.

var (
	readBufs  = newIOBufPool(readBufSize)
	writeBufs = newIOBufPool(writeBufSize)
)

// ioBufPool hands out buffers of one size. A few stay on a free list that
// garbage collection does not empty (sync.Pool does, at every cycle, and a
// busy relay then allocated fresh 32–64 KiB buffers after each one); the
// rest go through a sync.Pool.
type ioBufPool struct {
	free chan *[]byte
	pool sync.Pool
}

// keepIOBufs is how many buffers of each size the free list keeps.
const keepIOBufs = 16

func newIOBufPool(size int) *ioBufPool {
	return &ioBufPool{
		free: make(chan *[]byte, keepIOBufs),
		pool: sync.Pool{New: func() any { b := make([]byte, size); return &b }},
	}
}

func (p *ioBufPool) get() *[]byte {
	select {
	case b := <-p.free:
		return b
	default:
		return p.pool.Get().(*[]byte)
	}
}

func (p *ioBufPool) put(b *[]byte) {
	select {
	case p.free <- b:
	default:
		p.pool.Put(b)
	}
}

// errNegativeRead guards against a reader that breaks io.Reader's contract.
var errNegativeRead = errors.New("negative read count")

// connReader is a buffered reader over one connection, with bufio.Reader's
// methods the relay uses (Peek, Discard, Read, Buffered, Size). Peeked
// bytes stay valid until the next call that reads or discards.
type connReader struct {
	conn net.Conn
	raw  syscall.RawConn // set for plain TCP sockets
	size int
	bp   *[]byte // the pooled buffer, nil while empty
	buf  []byte
	r, w int
	err  error
	n    int64 // bytes read from conn
	// For readRaw, which runs as a RawConn callback without allocating.
	rawFn  func(fd uintptr) bool
	rawN   int
	rawErr error
	rawDst []byte // readRaw reads here when set, else into buf
}

func newConnReader(c net.Conn, size int) *connReader {
	r := &connReader{conn: c, size: size}
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			r.raw = raw
			r.rawFn = r.readRaw
		}
	}
	return r
}

// Size is the most Peek can return.
func (r *connReader) Size() int { return r.size }

// Buffered is how many bytes can be read without touching the socket.
func (r *connReader) Buffered() int { return r.w - r.r }

func (r *connReader) release() {
	if r.bp != nil {
		readBufs.put(r.bp)
		r.bp, r.buf = nil, nil
	}
	r.r, r.w = 0, 0
}

func (r *connReader) acquire() {
	if r.bp == nil {
		r.bp = readBufs.get()
		r.buf = (*r.bp)[:r.size]
	}
}

func (r *connReader) readErr() error {
	err := r.err
	r.err = nil
	return err
}

// fill reads once from the socket into the free end of the buffer.
func (r *connReader) fill() {
	if r.r == r.w {
		// Empty: wait (in readConn) without holding a buffer.
		r.release()
	} else if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.w -= r.r
		r.r = 0
	}
	n, err := r.readConn()
	r.w += n
	r.err = err
}

// readConn reads into r.buf[r.w:], taking a buffer first if it has none.
func (r *connReader) readConn() (int, error) {
	if r.raw == nil {
		r.acquire()
		n, err := r.conn.Read(r.buf[r.w:])
		r.n += int64(n)
		if n < 0 {
			return 0, errNegativeRead
		}
		return n, err
	}
	return r.readRawInto(nil)
}

// readDirect reads once from the socket into p, past the buffer, which
// must be empty.
func (r *connReader) readDirect(p []byte) (int, error) {
	if r.raw == nil {
		n, err := r.conn.Read(p)
		r.n += int64(n)
		if n < 0 {
			return 0, errNegativeRead
		}
		return n, err
	}
	return r.readRawInto(p)
}

// readRawInto reads with readRaw into dst, or into the buffer if dst is nil.
func (r *connReader) readRawInto(dst []byte) (int, error) {
	r.rawN, r.rawErr, r.rawDst = 0, nil, dst
	err := r.raw.Read(r.rawFn)
	r.rawDst = nil
	if err != nil {
		return 0, r.wrap(err)
	}
	r.n += int64(r.rawN)
	return r.rawN, r.rawErr
}

// readRaw is the RawConn callback: false means "wait until readable".
// It reads first, as net.Conn.Read does (the runtime forgets readiness
// reported before a read starts), but waits without the buffer if the
// buffer held nothing.
func (r *connReader) readRaw(fd uintptr) bool {
	p := r.rawDst
	if p == nil {
		r.acquire()
		p = r.buf[r.w:]
	}
	for {
		n, err := rawIO(syscall.SYS_READ, fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if r.w == 0 {
				r.release()
			}
			return false
		case err != nil:
			r.rawErr = &net.OpError{Op: "read", Net: "tcp", Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(), Err: os.NewSyscallError("read", err)}
		case n == 0:
			r.rawErr = io.EOF
		default:
			r.rawN = n
		}
		return true
	}
}

// wrap names a wait's failure as a read's, as net.Conn.Read does: a
// deadline, or the connection closed under the read.
func (r *connReader) wrap(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		oe.Op = "read"
		return oe
	}
	return err
}

// Peek returns the next n bytes without consuming them.
func (r *connReader) Peek(n int) ([]byte, error) {
	if n > r.size {
		n = r.size
	}
	for r.w-r.r < n && r.err == nil {
		r.fill()
	}
	if avail := r.w - r.r; avail < n {
		err := r.readErr()
		if err == nil {
			err = io.ErrNoProgress
		}
		return r.buf[r.r:r.w], err
	}
	return r.buf[r.r : r.r+n], nil
}

// Discard skips the next n bytes.
func (r *connReader) Discard(n int) (int, error) {
	done := 0
	for {
		k := min(n-done, r.w-r.r)
		r.r += k
		done += k
		if r.r == r.w {
			r.release()
		}
		if done == n {
			return done, nil
		}
		if r.err != nil {
			return done, r.readErr()
		}
		r.fill()
	}
}

// Read reads into p, from the buffer if it holds anything, else with one
// read from the socket: straight into p when p is at least as large as
// the buffer (a big frame read whole, such as a Fetch response a filter
// must see, is then not copied twice), else through the buffer.
func (r *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if r.Buffered() > 0 {
			return 0, nil
		}
		return 0, r.readErr()
	}
	if r.r == r.w {
		if r.err != nil {
			return 0, r.readErr()
		}
		if len(p) >= r.size {
			r.release()
			return r.readDirect(p)
		}
		r.fill()
		if r.r == r.w {
			return 0, r.readErr()
		}
	}
	n := copy(p, r.buf[r.r:r.w])
	r.r += n
	if r.r == r.w {
		r.release()
	}
	return n, nil
}

// connWriter is a buffered writer over one connection, with the methods
// of bufio.Writer the relay uses. It takes a buffer on the first write
// after a flush and gives it back on the next flush. Errors are sticky.
type connWriter struct {
	conn net.Conn
	raw  syscall.RawConn // set for plain TCP sockets
	// For writeRaw, which runs as a RawConn callback without allocating.
	rawFn   func(fd uintptr) bool
	rawBuf  []byte
	rawDone int
	rawErr  error
	bp      *[]byte
	buf     []byte
	n       int
	err     error
}

func newConnWriter(c net.Conn) *connWriter {
	w := &connWriter{conn: c}
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			w.raw = raw
			w.rawFn = w.writeRaw
		}
	}
	return w
}

// writeConn writes all of b to the connection, or fails.
func (w *connWriter) writeConn(b []byte) (int, error) {
	if w.raw == nil {
		return w.conn.Write(b)
	}
	w.rawBuf, w.rawDone, w.rawErr = b, 0, nil
	err := w.raw.Write(w.rawFn)
	w.rawBuf = nil
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			oe.Op = "write"
		}
		return w.rawDone, err
	}
	return w.rawDone, w.rawErr
}

// writeRaw is the RawConn callback: false means "wait until writable".
func (w *connWriter) writeRaw(fd uintptr) bool {
	for w.rawDone < len(w.rawBuf) {
		n, err := rawIO(syscall.SYS_WRITE, fd, w.rawBuf[w.rawDone:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			w.rawErr = &net.OpError{Op: "write", Net: "tcp", Source: w.conn.LocalAddr(), Addr: w.conn.RemoteAddr(), Err: os.NewSyscallError("write", err)}
			return true
		}
		w.rawDone += n
	}
	return true
}

// Buffered is how many bytes wait for a flush.
func (w *connWriter) Buffered() int { return w.n }

func (w *connWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > writeBufSize-w.n && w.err == nil {
		var k int
		if w.n == 0 {
			// Nothing buffered and more than a buffer's worth:
			// write it straight through.
			k, w.err = w.writeConn(p)
		} else {
			k = copy(w.buf[w.n:], p)
			w.n += k
			w.Flush()
		}
		done += k
		p = p[k:]
	}
	if w.err != nil {
		return done, w.err
	}
	if len(p) > 0 && w.bp == nil {
		w.bp = writeBufs.get()
		w.buf = *w.bp
	}
	k := copy(w.buf[w.n:], p)
	w.n += k
	return done + k, nil
}

// Flush writes what is buffered and gives the buffer back.
func (w *connWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	if w.n > 0 {
		k, err := w.writeConn(w.buf[:w.n])
		if k < w.n && err == nil {
			err = io.ErrShortWrite
		}
		if err != nil {
			if k > 0 && k < w.n {
				copy(w.buf, w.buf[k:w.n])
			}
			w.n -= k
			w.err = err
			return err
		}
		w.n = 0
	}
	if w.bp != nil {
		writeBufs.put(w.bp)
		w.bp, w.buf = nil, nil
	}
	return nil
}

// rawIO reads or writes a non-blocking socket with one system call, made
// without the scheduler's system call bookkeeping (syscall.RawSyscall):
// a read or write that cannot block is too short for the P to be handed
// off, and at low load that bookkeeping was the costliest part of it,
// since the first system call after the process idled woke the runtime's
// monitor thread (entersyscall → sysmon, a futex wakeup per request; 16%
// of the gateway's CPU on the small-batch workload).
func rawIO(trap, fd uintptr, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
