package writebatch

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRawSocketReadsAsNetConnDoes: over TCP the Conn reads and writes
// with raw system calls, and what a reader sees is what net.Conn gives:
// the bytes, a read deadline as a timeout named "read", and the peer's
// close as io.EOF.
func TestRawSocketReadsAsNetConnDoes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			peer <- c
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := New(nc)
	defer c.Close()
	if c.raw == nil && !raceEnabled {
		t.Fatal("a TCP connection is not read and written raw")
	}
	c.raw = newRawSock(nc) // under the race detector too
	p := <-peer
	defer p.Close()

	// Both ways, more than a read buffer's worth.
	want := bytes.Repeat([]byte("strait "), 10000)
	go func() { p.Write(want) }()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %v, equal %v", err, bytes.Equal(got, want))
	}
	if flush, err := c.Queue(want); !flush || err != nil {
		t.Fatalf("Queue %v %v", flush, err)
	}
	c.Flush()
	if _, err := io.ReadFull(p, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("peer read %v", err)
	}

	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = c.Read(make([]byte, 10))
	var oe *net.OpError
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("a read past its deadline: %v, want a read deadline error", err)
	}
	c.SetReadDeadline(time.Time{})

	p.Close()
	if n, err := c.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// TestAWaitingReaderHoldsNoBuffer: a read waiting for bytes that have not
// come does not hold a read buffer, so idle connections (an HTTP/1.1
// client between requests) cost none: 200 waiting reads take far less
// heap than 200 buffers.
func TestAWaitingReaderHoldsNoBuffer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const conns = 200
	accepted := make(chan net.Conn, conns)
	go func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var servers []*Conn
	for range conns {
		nc := <-accepted
		s := New(nc)
		s.raw = newRawSock(nc) // under the race detector too
		defer s.Close()
		servers = append(servers, s)
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // and the pools' victim caches
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	done := make(chan struct{}, conns)
	for _, s := range servers {
		go func() {
			s.Read(make([]byte, 10))
			done <- struct{}{}
		}()
	}
	waitingReads(t, conns)
	grew := int64(heap()) - int64(before)
	if limit := int64(conns * readChunk / 4); grew > limit {
		t.Errorf("%d waiting reads grew the heap by %d bytes; one buffer each would be %d", conns, grew, conns*readChunk)
	}
	for _, c := range clients {
		c.Write([]byte("x"))
	}
	for range conns {
		<-done
	}
}

// Quiet tells a silent connection from one its peer wrote to or closed,
// without waiting, and a Direct Conn's writes reach the peer at once.
func TestQuiet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() (*Conn, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		return NewDirect(c), s
	}
	// Loopback delivers in its own time: a connection that should turn
	// not quiet is asked until it does.
	turns := func(c *Conn, what string) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); c.Quiet(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal(what + " stays quiet")
			}
		}
	}

	c, s := dial()
	if !c.Quiet() {
		t.Fatal("a silent connection is not quiet")
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "ping" {
		t.Fatalf("the peer read %q, %v", got, err)
	}
	if !c.Quiet() {
		t.Error("writing made the connection not quiet")
	}
	s.Write([]byte("x"))
	turns(c, "a connection with a byte waiting")

	c, s = dial()
	s.Close()
	turns(c, "a connection its peer closed")
}

// replaying is a connection whose first bytes were read by someone else
// and are read again, as a sniffing listener hands it over.
type replaying struct {
	net.Conn
	head []byte
	read int // Reads of this wrapper itself
}

func (r *replaying) Read(p []byte) (int, error) {
	r.read++
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}

func (r *replaying) Replayed() (net.Conn, []byte) { return r.Conn, r.head }

// A Replayer's socket is read raw, its replayed bytes first, and the
// sniffed bytes still decide that an HTTP/1.1 connection's writes go
// straight out.
func TestReplayerIsReadRaw(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	r := &replaying{Conn: sc, head: []byte("POST / HT")}
	c := newConn(r, true) // under the race detector too
	c.sniff = true        // as Listener sets it
	defer c.Close()
	if c.raw == nil {
		t.Fatal("a Replayer over TCP is not read raw")
	}
	if c.Quiet() {
		t.Error("a connection with replayed bytes unread is quiet")
	}
	peer.Write([]byte("TP/1.1\r\n"))
	got := make([]byte, 0, 64)
	buf := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < len("POST / HTTP/1.1\r\n") {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "POST / HTTP/1.1\r\n" || r.read != 0 {
		t.Errorf("read %q, the wrapper itself %d times; want the replayed bytes then the socket's, and no read of the wrapper", got, r.read)
	}
	c.mu.Lock()
	direct := c.direct
	c.mu.Unlock()
	if !direct {
		t.Error("an HTTP/1.1 connection's writes are batched")
	}
}

// waitingReads waits until n goroutines wait in the poller inside a
// Conn's Read, as the goroutine dump shows them.
func waitingReads(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		buf := make([]byte, 1<<20)
		dump := string(buf[:runtime.Stack(buf, true)])
		k := 0
		for _, g := range strings.Split(dump, "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "writebatch.(*Conn).Read(") {
				k++
			}
		}
		if k >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d reads are waiting", k, n)
		}
	}
}
