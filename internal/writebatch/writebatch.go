// Package writebatch batches a connection's writes into fewer system
// calls. HTTP/2 multiplexes many requests on one connection, and Go's
// HTTP/2 client and server flush after each frame group they write: a
// HEADERS frame, then a DATA frame, then a WINDOW_UPDATE, each its own
// write(2) when requests on a connection arrive independently. On
// loopback a write also pays for delivering the bytes to the peer and
// waking it, so those flushes, and the reads they cause on the other
// side, are most of a busy gateway's system time.
//
// A Conn's Write copies the bytes into a buffer and returns; one
// goroutine writes whatever has gathered, so writes made while a
// write(2) is in progress leave together in the next one. An idle
// connection has no goroutine. Errors of the batched write are
// returned by the next Write (and the connection is closed, so the
// reader sees them too), as a socket reports a peer's reset late.
//
// A writer that can spend its own goroutine on the system call uses Queue
// and Flush instead: the first writer of a batch writes it (after letting
// go of its own locks), writers that queue meanwhile join the next batch,
// and no goroutine is started, nor thread woken, for an uncontended write.
// Locked pairs the two with its user's write lock, so that Unlock writes
// what its holder began.
//
// Reads are buffered too: x/net's HTTP/2 server reads each frame's
// 9-byte header and then its payload straight from the connection, two
// read(2)s a frame. A Conn reads what has arrived in one, into a pooled
// buffer that goes back as soon as it is empty, so an idle connection
// holds none. Over TCP both are raw system calls (rawio.go).
package writebatch

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// maxPending bounds the bytes buffered and not yet written: a Write that
// would go past it waits for the socket, as a plain write would.
const maxPending = 1 << 20

// closeGrace bounds how long Close waits to write what is buffered.
const closeGrace = time.Second

// Conn is a net.Conn whose writes are batched.
type Conn struct {
	net.Conn

	mu       sync.Mutex
	drained  sync.Cond // signalled when a batch is written or fails
	pending  []byte
	spare    []byte
	flushing bool
	err      error
	closed   bool
	direct   bool // writes go straight to the socket (HTTP/1.1)

	// Read side, used by one reader at a time.
	rbuf *[]byte
	rpos int
	rend int
	// sniff: the first read decides between batched and direct writes.
	sniff bool

	// raw is the socket's raw reads and writes, for a TCP connection;
	// nil for any other, which is written and read through net.Conn.
	raw *rawSock
	// head is what a listener that sniffed the connection read from the
	// socket before it, read again first (see Replayer).
	head []byte
	// dmu serialises direct writes, which share raw's write state.
	dmu sync.Mutex

	// waits, when set (by tests), is told each time a Write or Close
	// starts waiting for the socket.
	waits chan<- struct{}
}

// wait waits for the writer, under c.mu.
func (c *Conn) wait() {
	if c.waits != nil {
		c.waits <- struct{}{}
	}
	c.drained.Wait()
}

// readChunk is the read buffer's size; reads at least this large go
// straight to the socket.
const readChunk = 16 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// Read reads from the buffer, refilling it with one read(2) when empty.
func (c *Conn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		c.sniffed(c.head)
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	if c.rbuf == nil {
		if len(p) >= readChunk {
			_, n, err := c.readSock(p)
			c.sniffed(p[:n])
			return n, err
		}
		b, n, err := c.readSock(nil)
		if n <= 0 {
			return 0, err
		}
		// An error with data comes again on the next read of the socket.
		c.rbuf, c.rpos, c.rend = b, 0, n
		c.sniffed((*b)[:n])
	}
	n := copy(p, (*c.rbuf)[c.rpos:c.rend])
	c.rpos += n
	if c.rpos == c.rend {
		readBufs.Put(c.rbuf)
		c.rbuf = nil
	}
	return n, nil
}

// sniffed decides, from the connection's first bytes, between batched
// and direct writes, if it is still to (see Listener).
func (c *Conn) sniffed(first []byte) {
	if c.sniff && len(first) > 0 {
		c.sniff = false
		c.decide(first)
	}
}

// readSock reads once from the socket: into p, or, if p is nil, into a
// buffer from readBufs, returned as b when it holds the n bytes read.
// Over a raw socket that buffer is taken only once there are bytes to
// read: a connection waiting for its client's next request holds none
// (net/http's servers wait in Read between requests, and again while a
// request is served, to see the client leave).
func (c *Conn) readSock(p []byte) (b *[]byte, n int, err error) {
	if c.raw != nil {
		return c.raw.read(p)
	}
	if p != nil {
		n, err = c.Conn.Read(p)
		return nil, n, err
	}
	b = readBufs.Get().(*[]byte)
	if n, err = c.Conn.Read(*b); n <= 0 {
		readBufs.Put(b)
		return nil, 0, err
	}
	return b, n, err
}

// writeSock writes p to the socket; one batch writer, or direct writer
// under dmu, at a time.
func (c *Conn) writeSock(p []byte) (int, error) {
	if c.raw == nil {
		return c.Conn.Write(p)
	}
	return c.raw.write(p)
}

// Replayer is a connection whose first bytes were read from its socket
// by a listener that sniffed it, and are read again (prefacelisten's).
// Replayed returns the connection beneath and those bytes; New reads the
// socket itself, raw, replaying them first, and never reads the
// Replayer.
type Replayer interface {
	Replayed() (net.Conn, []byte)
}

// New wraps c.
func New(c net.Conn) *Conn { return newConn(c, !raceEnabled) }

// newConn wraps c, reading and writing its socket raw if raw is set and
// it has one.
func newConn(c net.Conn, raw bool) *Conn {
	b := &Conn{Conn: c}
	if raw {
		b.raw = newRawSock(c)
		if r, ok := c.(Replayer); ok && b.raw == nil {
			inner, head := r.Replayed()
			if b.raw = newRawSock(inner); b.raw != nil {
				b.head = head // the Replayer reads them no more
			}
		}
	}
	b.drained.L = &b.mu
	return b
}

// Write queues p for the connection's writer and returns len(p), or the
// error a previous batch met.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.direct && !c.flushing && c.err == nil {
		// Nothing is queued, so writing here keeps the order.
		c.mu.Unlock()
		if c.raw == nil {
			return c.Conn.Write(p)
		}
		c.dmu.Lock()
		defer c.dmu.Unlock()
		return c.raw.write(p)
	}
	start, err := c.queueLocked(p)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if start {
		go c.flush()
	}
	return len(p), nil
}

// Queue adds p to the next batch without writing it, for a caller that
// can spend its own goroutine on the system call instead of starting the
// writer goroutine (and waking a thread for it) as Write does. It reports
// whether the caller must write the batch: it must then call Flush, once
// it holds no lock that other writers need, so that those arriving while
// the write(2) is in progress add to the next batch instead of waiting.
// Until then the batch is the caller's: Close waits for its Flush.
func (c *Conn) Queue(p []byte) (flush bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queueLocked(p)
}

// queueLocked adds p to the next batch, waiting while the batch is full,
// and reports whether no writer is at work, so that the caller must start
// one (it is then counted as flushing); c.mu is held.
func (c *Conn) queueLocked(p []byte) (start bool, err error) {
	// pending is never left without a writer, so waiting here ends.
	for c.err == nil && len(c.pending) > 0 && len(c.pending)+len(p) > maxPending {
		c.wait()
	}
	if c.err != nil {
		return false, c.err
	}
	c.pending = append(c.pending, p...)
	if c.flushing {
		return false, nil
	}
	c.flushing = true
	return true, nil
}

// ownBatches bounds the batches Flush writes on its caller's goroutine;
// what gathers after them goes to the writer goroutine.
const ownBatches = 2

// Flush writes the batch Queue gave the caller.
//
// It first lets the goroutines that are ready to run go ahead of it. When
// one read from a provider wakes many streams at once, each appends its
// event to the batch and finds it owed by this writer, so they leave in
// one write(2) instead of one each; a goroutine yielding with nothing
// else to run costs well under a microsecond, a write tens of them. No
// timer is involved: the batch waits only for work that is already
// runnable, never for work that may come.
func (c *Conn) Flush() {
	runtime.Gosched()
	c.mu.Lock()
	c.writeBatches(ownBatches)
	if len(c.pending) > 0 && c.err == nil {
		c.mu.Unlock()
		go c.flush() // still flushing: the writer goroutine takes over
		return
	}
	c.doneFlushing()
	c.mu.Unlock()
}

// flush writes batches until none is left.
func (c *Conn) flush() {
	c.mu.Lock()
	c.writeBatches(-1)
	c.doneFlushing()
	c.mu.Unlock()
}

// writeBatches writes pending batches, at most max of them (-1: all),
// under c.mu, which it releases during each write.
func (c *Conn) writeBatches(max int) {
	for ; max != 0 && len(c.pending) > 0 && c.err == nil; max-- {
		batch := c.pending
		c.pending = c.spare[:0]
		c.mu.Unlock()
		_, err := c.writeSock(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		if cap(c.spare) > maxPending {
			c.spare = nil // a burst's buffer is not kept for good
		}
		if err != nil && c.err == nil {
			c.err = err
			// The reader must see the failure too: the peer is gone or
			// the deadline passed with bytes unwritten.
			c.Conn.Close()
		}
		c.drained.Broadcast()
	}
}

// doneFlushing ends a writer's turn; c.mu is held.
func (c *Conn) doneFlushing() {
	c.flushing = false
	if len(c.pending) == 0 && cap(c.pending) > 64<<10 {
		c.pending = nil
	}
	c.drained.Broadcast()
}

// decide makes writes direct unless first, the connection's first
// bytes, begin HTTP/2's preface.
func (c *Conn) decide(first []byte) {
	k := min(len(first), len(h2Preface))
	if string(first[:k]) == h2Preface[:k] {
		return
	}
	c.mu.Lock()
	c.direct = true
	c.mu.Unlock()
}

// Close writes what is buffered (for at most a second) and closes the
// connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.Conn.Close()
	}
	c.closed = true
	if c.flushing && c.err == nil {
		c.Conn.SetWriteDeadline(time.Now().Add(closeGrace))
		for c.flushing {
			c.wait()
		}
	}
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// Flushed waits until everything written so far has reached the socket,
// and returns the error of that write if there was one.
func (c *Conn) Flushed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.flushing {
		c.drained.Wait()
	}
	if errors.Is(c.err, net.ErrClosed) && c.closed {
		return nil
	}
	return c.err
}

// h2Preface is how an HTTP/2 client with prior knowledge begins.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Listener wraps each accepted connection in a Conn. A plaintext
// connection whose client does not open with HTTP/2's preface is
// HTTP/1.1 (or h2c by Upgrade, which is rare): one answer at a time, so
// its writes gain nothing from batching and go straight to the socket.
// Reads are buffered either way.
type Listener struct {
	net.Listener
	// TLS says the listener's connections carry TLS, whose first bytes
	// say nothing of the protocol inside: their writes are batched.
	TLS bool
}

// Accept returns the next connection, wrapped.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	b := New(c)
	if !l.TLS {
		b.sniff = true
	}
	return b, nil
}

// CloseWrite writes what is buffered and shuts the connection's writing
// side, where the connection can (net/http's server half-closes before
// closing, so that a client's last bytes are not met with a reset).
func (c *Conn) CloseWrite() error {
	if err := c.Flushed(); err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NewDirect wraps c for a user that writes one message at a time and
// wants each to reach the socket at once (an HTTP/1.1 client): Writes go
// straight to the socket, never through a batch, and reads are buffered
// as New's are.
func NewDirect(c net.Conn) *Conn {
	b := New(c)
	b.direct = true
	return b
}

// Quiet reports, without waiting, that nothing has arrived on the
// connection: no bytes, and not its end. It is for a connection that
// should be silent, an HTTP/1.1 client's between requests, where anything
// at all (the server's close, or bytes nobody asked for) means it cannot
// be used again; what it reads is gone. Call it only while no Read is in
// progress. A connection that is not a socket cannot tell, and reports
// true.
func (c *Conn) Quiet() bool {
	if c.rbuf != nil || len(c.head) > 0 {
		return false
	}
	if c.raw != nil {
		return c.raw.quiet()
	}
	return quietSock(c.Conn)
}

// RawConn returns the socket's raw access, for a caller that watches the
// socket on its own (for its peer's hang-up, say) while this Conn reads
// and writes it; nil if the connection is not a socket.
func (c *Conn) RawConn() syscall.RawConn {
	if c.raw != nil {
		return c.raw.rc
	}
	inner := c.Conn
	if r, ok := inner.(Replayer); ok {
		inner, _ = r.Replayed()
	}
	return rawConnOf(inner)
}

// rawConnOf returns c's socket's raw access, or nil if c has none.
func rawConnOf(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
