// Package prefacelisten sorts the connections of a cleartext listener by
// their first bytes: those that open with HTTP/2's client preface (RFC 9113
// section 3.4, prior knowledge) go to a server of the caller's, every other
// one (HTTP/1.1, its Upgrade: h2c included) is returned by Accept for
// net/http, with the bytes read to tell them apart handed back first.
//
// Both `strait mock llm` and the LLM gateway's own h2c server serve HTTP/2
// this way next to net/http on one port.
package prefacelisten

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Preface is how an HTTP/2 client with prior knowledge begins.
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Listener sorts a listener's connections. Each new connection is read on
// a goroutine of its own until it is sorted, so a slow client delays no
// other.
type Listener struct {
	net.Listener
	serve   func(net.Conn) bool
	timeout time.Duration
	ready   chan net.Conn
	done    chan struct{}
	once    sync.Once
	err     error         // the Accept error, once ended is closed
	ended   chan struct{} // closed when the accept loop returns

	mu       sync.Mutex
	sniffing map[net.Conn]struct{}
	wg       sync.WaitGroup // the accept loop and the sorting goroutines
}

// New starts sorting ln's connections. serve is called with each
// connection whose preface has been read; it must hand the connection on
// and return (Close waits for it), true if it took the connection, false
// to have it go to Accept instead, preface included. A connection must show which it is within timeout; one that
// ends or stalls inside the preface is closed.
func New(ln net.Listener, timeout time.Duration, serve func(c net.Conn) bool) *Listener {
	l := &Listener{Listener: ln, serve: serve, timeout: timeout, ready: make(chan net.Conn),
		done: make(chan struct{}), ended: make(chan struct{}), sniffing: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	defer close(l.ended)
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.err = err
			return
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			c.Close()
			continue
		default:
		}
		l.sniffing[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.sort(c)
	}
}

// sort reads the connection's first bytes, no further than the preface,
// and sends the connection where they say it belongs.
func (l *Listener) sort(c net.Conn) {
	defer l.wg.Done()
	_ = c.SetReadDeadline(time.Now().Add(l.timeout))
	var head [len(Preface)]byte
	n := 0
	var err error
	for n < len(head) {
		var k int
		k, err = c.Read(head[n:])
		n += k
		if string(head[:n]) != Preface[:n] || err != nil {
			break
		}
	}
	l.mu.Lock()
	delete(l.sniffing, c)
	l.mu.Unlock()
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case n == len(head) && string(head[:]) == Preface && l.serve(c):
		return
	case n == 0, err != nil && string(head[:n]) == Preface[:n]:
		c.Close() // closed, silent or stalled inside the preface
		return
	}
	rc := &replayConn{Conn: c, head: append([]byte(nil), head[:n]...)}
	select {
	case l.ready <- rc:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection that is not HTTP/2 with prior
// knowledge.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ended:
		return nil, l.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, drops the connections not yet sorted and waits
// for the goroutines sorting them. The connections serve took are its to
// end.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.sniffing {
			c.Close()
		}
		l.mu.Unlock()
		err = l.Listener.Close()
		l.wg.Wait()
	})
	return err
}

// replayConn is a connection whose first bytes, already read, are read
// again.
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// Replayed returns the connection beneath and the bytes read from it
// and not yet read again, for a wrapper that reads the socket itself
// (writebatch.Replayer): it replays them, and reads this connection no
// more.
func (c *replayConn) Replayed() (net.Conn, []byte) { return c.Conn, c.head }

// CloseWrite lets net/http half-close the connection, as it does with a
// plain TCP connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

var _ io.Reader = (*replayConn)(nil)

// OpensWithPreface reports whether c, a connection Accept returned,
// opened with HTTP/2's preface: one serve declined, for another server on
// the same port to take.
func OpensWithPreface(c net.Conn) bool {
	r, ok := c.(*replayConn)
	return ok && string(r.head) == Preface
}
