package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// An emptied reader and a flushed writer hold no buffer: that is what
// keeps an idle connection pair small.
func TestConnBuffersOnlyWhileHoldingBytes(t *testing.T) {
	a, b := tcpPair(t)
	w := newConnWriter(a)
	r := newConnReader(b, readBufSize)
	if w.raw == nil || r.raw == nil {
		t.Fatal("plain TCP sockets should take the raw path")
	}
	if _, err := w.Write([]byte("hello, broker")); err != nil {
		t.Fatal(err)
	}
	if w.bp == nil || w.Buffered() != 13 {
		t.Fatalf("a written writer holds %d bytes, buffer %v", w.Buffered(), w.bp != nil)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.bp != nil {
		t.Fatal("a flushed writer still holds its buffer")
	}
	got, err := r.Peek(5)
	if err != nil || string(got) != "hello" {
		t.Fatalf("Peek(5) = %q, %v", got, err)
	}
	if r.bp == nil {
		t.Fatal("a reader with bytes in it holds no buffer")
	}
	rest := make([]byte, 13)
	if _, err := io.ReadFull(r, rest); err != nil || string(rest) != "hello, broker" {
		t.Fatalf("read %q, %v", rest, err)
	}
	if r.bp != nil || r.Buffered() != 0 {
		t.Fatal("an emptied reader still holds its buffer")
	}
	if r.n != 13 {
		t.Fatalf("reader counted %d bytes, want 13", r.n)
	}
}

// A read deadline and the peer's close surface as net.Conn.Read's errors
// would, which the relay classifies by.
func TestConnReaderErrors(t *testing.T) {
	a, b := tcpPair(t)
	r := newConnReader(b, readBufSize)
	b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := r.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Peek past the deadline: %v, want a timeout", err)
	}
	if r.bp != nil {
		t.Fatal("a reader that timed out waiting holds a buffer")
	}
	b.SetReadDeadline(time.Time{})
	a.Write([]byte{1, 2, 3})
	a.Close()
	got := make([]byte, 8)
	n, err := io.ReadFull(r, got)
	if n != 3 || err != io.ErrUnexpectedEOF {
		t.Fatalf("ReadFull after the peer wrote 3 bytes and closed: %d, %v", n, err)
	}
}

// A write larger than the buffer goes out whole and in order.
func TestConnWriterLargeWrite(t *testing.T) {
	a, b := tcpPair(t)
	w := newConnWriter(a)
	big := make([]byte, 3*writeBufSize+17)
	for i := range big {
		big[i] = byte(i)
	}
	go func() {
		w.Write([]byte{0xff})
		w.Write(big)
		w.Flush()
	}()
	got := make([]byte, 1+len(big))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 0xff {
		t.Fatal("the first byte was not first")
	}
	for i := range big {
		if got[1+i] != big[i] {
			t.Fatalf("byte %d differs", i)
		}
	}
}

// sizeRecordingConn notes the largest read asked of it.
type sizeRecordingConn struct {
	net.Conn
	largest int
}

func (c *sizeRecordingConn) Read(p []byte) (int, error) {
	c.largest = max(c.largest, len(p))
	return c.Conn.Read(p)
}

// A read at least as large as the buffer, with the buffer empty, goes
// straight into the caller's slice (a big frame read whole is not copied
// twice), and the stream comes out the same whether bytes were buffered
// first or not, over the raw path and the other.
func TestConnReaderReadsBigSlicesDirectly(t *testing.T) {
	const big = 3*readBufSize + 123
	data := make([]byte, 7+big)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, raw := range []bool{true, false} {
		a, b := tcpPair(t)
		rec := &sizeRecordingConn{Conn: b}
		var r *connReader
		if raw {
			r = newConnReader(b, readBufSize)
		} else {
			r = newConnReader(rec, readBufSize)
		}
		go func() { a.Write(data) }()
		head, err := r.Peek(7)
		if err != nil || string(head) != string(data[:7]) {
			t.Fatalf("raw=%v: Peek = %q, %v", raw, head, err)
		}
		got := make([]byte, 7+big)
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("raw=%v: %v", raw, err)
		}
		if string(got) != string(data) {
			t.Fatalf("raw=%v: the bytes read differ from the bytes sent", raw)
		}
		if r.n != int64(len(data)) || r.Buffered() != 0 || r.bp != nil {
			t.Errorf("raw=%v: counted %d bytes (want %d), %d still buffered, buffer held %v", raw, r.n, len(data), r.Buffered(), r.bp != nil)
		}
		if !raw && rec.largest <= readBufSize {
			t.Errorf("the largest read asked of the socket was %d bytes: the big slice went through the %d-byte buffer", rec.largest, readBufSize)
		}
	}
}
