package mockllm

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// sniffTimeout bounds how long a new connection may take to show whether
// it opens with the HTTP/2 preface, as net/http's ReadHeaderTimeout bounds
// a request's headers.
const sniffTimeout = 30 * time.Second

// leanListener sorts the connections of a cleartext listener: those that
// open with the HTTP/2 client preface go to the lean engine, every other
// one to net/http through Accept, with the bytes read to tell them apart
// handed back first. Each new connection is read on a goroutine of its
// own until it is sorted, so that a slow client delays no other.
type leanListener struct {
	net.Listener
	e     *engine
	ready chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error         // the listener's Accept error, once ended is closed
	ended chan struct{} // closed when the accept loop returns

	mu       sync.Mutex
	sniffing map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func newLeanListener(l net.Listener, e *engine) *leanListener {
	ll := &leanListener{Listener: l, e: e, ready: make(chan net.Conn), done: make(chan struct{}),
		ended: make(chan struct{}), sniffing: map[net.Conn]struct{}{}}
	ll.wg.Add(1)
	go ll.acceptLoop()
	return ll
}

func (l *leanListener) acceptLoop() {
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
		go l.sniff(c)
	}
}

// sniff reads the connection's first bytes, no further than the preface,
// and sends the connection where they say it belongs.
func (l *leanListener) sniff(c net.Conn) {
	defer l.wg.Done()
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	var head [len(h2Preface)]byte
	n := 0
	var err error
	for n < len(head) {
		var k int
		k, err = c.Read(head[n:])
		n += k
		if string(head[:n]) != h2Preface[:n] || err != nil {
			break
		}
	}
	l.mu.Lock()
	delete(l.sniffing, c)
	l.mu.Unlock()
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case n == len(head) && string(head[:]) == h2Preface && l.e.add(c):
		return
	case n == 0, err != nil && !errors.Is(err, io.EOF) && string(head[:n]) == h2Preface[:n]:
		c.Close() // closed, silent or stalled inside the preface
		return
	}
	// HTTP/1.1, something net/http will reject as it always has, or
	// HTTP/2 on a connection that is not a socket.
	rc := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(append([]byte(nil), head[:n]...)), c)}
	select {
	case l.ready <- rc:
	case <-l.done:
		c.Close()
	}
}

// h2Preface is how an HTTP/2 client with prior knowledge begins.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Accept returns the next connection that is not for the lean engine.
func (l *leanListener) Accept() (net.Conn, error) {
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
// for the goroutines that sort them.
func (l *leanListener) Close() error {
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
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite lets net/http half-close the connection, as it does with a
// plain TCP connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
