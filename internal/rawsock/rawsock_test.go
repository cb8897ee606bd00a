//go:build linux

package rawsock

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// A detached socket reads and writes without waiting, reports its end,
// and the poller sees it readable and can be woken.
func TestDetachedSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := Detach(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(fd)
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(fd); err != nil {
		t.Fatal(err)
	}

	buf := make([]byte, 64)
	if n, err := ReadNow(fd, buf); n != 0 || err != nil {
		t.Fatalf("nothing sent yet: read %d, %v", n, err)
	}
	if ready, _ := p.Wait(0); len(ready) != 0 {
		t.Fatalf("readable before anything was sent: %v", ready)
	}
	p.Wake()
	if ready, err := p.Wait(-1); err != nil || len(ready) != 0 {
		t.Fatalf("a wake: %v %v", ready, err)
	}

	if _, err := peer.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if ready, err := p.Wait(5000); err != nil || len(ready) != 1 || ready[0] != fd {
		t.Fatalf("want %d readable, got %v %v", fd, ready, err)
	}
	if n, err := ReadNow(fd, buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if n, err := WriteNow(fd, []byte("pong")); err != nil || n != 4 {
		t.Fatalf("wrote %d, %v", n, err)
	}
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(peer, buf[:4]); err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("the peer read %q, %v", buf[:4], err)
	}

	peer.Close()
	if _, err := p.Wait(5000); err != nil {
		t.Fatal(err)
	}
	if n, err := ReadNow(fd, buf); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// ReadOnce reclaims the bytes already used, grows the buffer when little
// room is left, and says when a read filled the room.
func TestReadOnce(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(fds[0])
	defer Close(fds[1])
	send := func(n int) {
		t.Helper()
		if _, err := WriteNow(fds[1], bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
	}

	var buf []byte
	off := 0
	if n, full, err := ReadOnce(fds[0], &buf, &off); n != 0 || full || err != nil {
		t.Fatalf("empty socket: n %d, full %v, err %v; want nothing read and not full", n, full, err)
	}
	if cap(buf) < 4096 {
		t.Fatalf("an empty buffer was given %d bytes of room, want at least 4096", cap(buf))
	}

	send(100)
	if n, full, err := ReadOnce(fds[0], &buf, &off); n != 100 || full || err != nil || len(buf) != 100 {
		t.Fatalf("100 bytes waiting: n %d, full %v, err %v, len %d", n, full, err, len(buf))
	}
	off = 100 // all used: the next read starts at the front again
	send(10)
	if n, _, _ := ReadOnce(fds[0], &buf, &off); n != 10 || off != 0 || len(buf) != 10 {
		t.Fatalf("after using everything: n %d, off %d, len %d; want the new bytes at the front", n, off, len(buf))
	}

	// More waiting than the room: a read fills it and says so; the next
	// one, with no room left, grows the buffer.
	buf, off = nil, 0
	send(10000)
	total := 0
	for i := 0; i < 2; i++ {
		n, full, err := ReadOnce(fds[0], &buf, &off)
		if err != nil || !full || n < 4096 {
			t.Fatalf("read %d of 10,000 waiting bytes: n %d, full %v, err %v; want a full room of at least 4096", i, n, full, err)
		}
		total += n
	}
	n, full, err := ReadOnce(fds[0], &buf, &off)
	if err != nil || full || total+n != 10000 || len(buf)-off != 10000 {
		t.Fatalf("last read: n %d, full %v, err %v; %d bytes unread, want the rest of 10,000 and not full", n, full, err, len(buf)-off)
	}
	if cap(buf) < 10000 {
		t.Fatalf("cap %d after reading 10,000 unconsumed bytes", cap(buf))
	}

	Close(fds[1])
	fds[1] = -1
	if _, _, err := ReadOnce(fds[0], &buf, &off); err != io.EOF {
		t.Fatalf("after the peer closed: err %v, want io.EOF", err)
	}
}
