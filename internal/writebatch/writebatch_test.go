package writebatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// stuckConn is a net.Conn whose writes wait for release and are counted.
type stuckConn struct {
	net.Conn
	mu      sync.Mutex
	writes  [][]byte
	gate    chan struct{}
	entered chan struct{}
	fail    error
}

func newStuck() *stuckConn {
	a, _ := net.Pipe()
	return &stuckConn{Conn: a, gate: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func (s *stuckConn) Write(p []byte) (int, error) {
	s.entered <- struct{}{}
	<-s.gate
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	s.writes = append(s.writes, bytes.Clone(p))
	return len(p), nil
}

func (s *stuckConn) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.writes) }

func TestWritesMadeDuringAWriteLeaveTogether(t *testing.T) {
	s := newStuck()
	c := New(s)
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	<-s.entered // the first batch is in write(2), held
	for _, p := range []string{"b", "c", "d"} {
		if n, err := c.Write([]byte(p)); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	close(s.gate)
	if err := c.Flushed(); err != nil {
		t.Fatal(err)
	}
	if got := s.count(); got != 2 {
		t.Fatalf("%d writes, want 2 (one, then the three that came while it was held)", got)
	}
	if string(s.writes[0]) != "a" || string(s.writes[1]) != "bcd" {
		t.Fatalf("writes %q", s.writes)
	}
}

func TestAFailedBatchFailsTheNextWriteAndClosesTheConnection(t *testing.T) {
	s := newStuck()
	s.fail = errors.New("connection reset by peer")
	close(s.gate)
	c := New(s)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err) // reported late, as a socket would
	}
	if err := c.Flushed(); err == nil || err.Error() != "connection reset by peer" {
		t.Fatalf("Flushed = %v", err)
	}
	if _, err := c.Write([]byte("y")); err == nil {
		t.Fatal("a write after a failed batch succeeded")
	}
	// The reader sees it too: the underlying pipe is closed.
	if _, err := s.Conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection was not closed after the failed batch")
	}
}

func TestWritesBeyondTheBoundWaitForTheSocket(t *testing.T) {
	s := newStuck()
	c := New(s)
	waits := make(chan struct{}, 1)
	c.waits = waits
	c.Write(make([]byte, 10))
	<-s.entered
	c.Write(make([]byte, maxPending-10))
	done := make(chan struct{})
	go func() { c.Write(make([]byte, 100)); close(done) }()
	select {
	case <-waits: // the write past the bound waits for the socket
	case <-done:
		t.Fatal("a write past the bound returned while the socket was stuck")
	}
	if got := s.count(); got != 0 {
		t.Fatalf("%d writes reached the socket while it was stuck", got)
	}
	close(s.gate)
	<-done
	if err := c.Flushed(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, w := range s.writes {
		total += len(w)
	}
	if total != maxPending+100 {
		t.Fatalf("%d bytes written, want %d", total, maxPending+100)
	}
}

// TestConcurrentWritersOverTCP checks that every write arrives whole and
// in its writer's order through a real socket.
// TestConcurrentWritersOverTCP: records written from many goroutines,
// each under the caller's own lock as an HTTP/2 framer's are, all arrive
// in each writer's order, whether they go by Write or by Queue and Flush
// or both.
func TestConcurrentWritersOverTCP(t *testing.T) {
	byWrite := func(c *Conn, w int, rec []byte, mu *sync.Mutex) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := c.Write(rec)
		return err
	}
	byQueue := func(c *Conn, w int, rec []byte, mu *sync.Mutex) error {
		mu.Lock()
		flush, err := c.Queue(rec)
		mu.Unlock()
		if flush {
			c.Flush()
		}
		return err
	}
	mixed := func(c *Conn, w int, rec []byte, mu *sync.Mutex) error {
		if w%2 == 0 {
			return byQueue(c, w, rec, mu)
		}
		return byWrite(c, w, rec, mu)
	}
	var l Locked // over the connection of the "Locked" run
	byLocked := func(c *Conn, w int, rec []byte, _ *sync.Mutex) error {
		l.Lock()
		defer l.Unlock()
		_, err := l.Write(rec)
		return err
	}
	for name, write := range map[string]func(*Conn, int, []byte, *sync.Mutex) error{"Write": byWrite, "Queue": byQueue, "mixed": mixed, "Locked": byLocked} {
		t.Run(name, func(t *testing.T) { concurrentWritersOverTCP(t, write, &l) })
	}
}

func concurrentWritersOverTCP(t *testing.T, write func(c *Conn, w int, rec []byte, mu *sync.Mutex) error, l *Locked) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const writers, each = 8, 2000
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		got <- b
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := New(raw)
	l.Init(c)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := make([]byte, 64)
			for i := range each {
				binary.BigEndian.PutUint32(rec, uint32(w))
				binary.BigEndian.PutUint32(rec[4:], uint32(i))
				if err := write(c, w, rec, &mu); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if len(b) != writers*each*64 {
		t.Fatalf("%d bytes arrived, want %d", len(b), writers*each*64)
	}
	next := make([]uint32, writers)
	for off := 0; off < len(b); off += 64 {
		w, i := binary.BigEndian.Uint32(b[off:]), binary.BigEndian.Uint32(b[off+4:])
		if i != next[w] {
			t.Fatalf("writer %d: record %d arrived where %d was next", w, i, next[w])
		}
		next[w]++
	}
}

func TestCloseWritesWhatIsBuffered(t *testing.T) {
	s := newStuck()
	c := New(s)
	waits := make(chan struct{}, 1)
	c.waits = waits
	c.Write([]byte("last words"))
	<-s.entered
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	select {
	case <-waits: // Close waits for the batch in write(2)
	case <-closed:
		t.Fatal("Close returned before the buffered bytes were written")
	}
	close(s.gate)
	<-closed
	if s.count() != 1 || string(s.writes[0]) != "last words" {
		t.Fatalf("writes %q", s.writes)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
	}
}

func TestAWriteDeadlineStillBounds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(5 * time.Second) // never reads
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := New(raw)
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	chunk := make([]byte, 64<<10)
	for range 1000 { // far more than socket buffers hold
		if _, err = c.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing to a peer that does not read: %v, want a deadline error", err)
	}
}

// countingConn counts reads of the underlying connection.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) { c.reads++; return c.Conn.Read(p) }

func TestSmallReadsShareOneReadOfTheSocket(t *testing.T) {
	a, b := net.Pipe()
	cc := &countingConn{Conn: b}
	c := New(cc)
	go func() { a.Write(bytes.Repeat([]byte("0123456789"), 100)); a.Close() }()
	var got []byte
	hdr := make([]byte, 9) // an HTTP/2 frame header's size
	for {
		n, err := c.Read(hdr)
		got = append(got, hdr[:n]...)
		if err != nil {
			break
		}
	}
	if !bytes.Equal(got, bytes.Repeat([]byte("0123456789"), 100)) {
		t.Fatalf("read %d bytes, not what was written", len(got))
	}
	// net.Pipe delivers one write as one read: 1,000 bytes in 112 small
	// reads of the Conn, one read of the socket, and one for EOF.
	if cc.reads != 2 {
		t.Fatalf("%d reads of the socket, want 2", cc.reads)
	}
	if c.rbuf != nil {
		t.Fatal("the read buffer is held after it was emptied")
	}
}

func TestListenerBatchesHTTP2AndWritesHTTP1Directly(t *testing.T) {
	for _, tc := range []struct {
		first  string
		direct bool
	}{
		{h2Preface, false},
		{"PRI * HT", false}, // a preface split by the network
		{"POST /v1/chat/completions HTTP/1.1\r\n", true},
		{"G", true},
	} {
		s := newStuck()
		close(s.gate)
		a, b := net.Pipe()
		s.Conn = b
		l := Listener{Listener: &oneListener{c: s}}
		nc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go a.Write([]byte(tc.first))
		nc.Read(make([]byte, 4096))
		c := nc.(*Conn)
		c.mu.Lock()
		direct := c.direct
		c.mu.Unlock()
		if direct != tc.direct {
			t.Errorf("first bytes %q: direct writes %v, want %v", tc.first, direct, tc.direct)
		}
		a.Close()
	}
}

type oneListener struct {
	net.Listener
	c net.Conn
}

func (l *oneListener) Accept() (net.Conn, error) { return l.c, nil }
