//go:build linux

package rawsock

import (
	"io"
	"net"
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
