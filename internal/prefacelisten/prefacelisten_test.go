package prefacelisten

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func listen(t *testing.T, serve func(net.Conn) bool) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, 10*time.Second, serve)
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, l *Listener, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, first); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll reads what c has until the sender closes it.
func readAll(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPrefaceGoesToServeAndTheRestToAccept(t *testing.T) {
	served := make(chan net.Conn, 1)
	l := listen(t, func(c net.Conn) bool { served <- c; return true })

	dial(t, l, Preface+"frames")
	sc := <-served
	buf := make([]byte, len("frames"))
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "frames" {
		t.Fatalf("serve's connection reads %q, %v: want what follows the preface", buf, err)
	}
	sc.Close()

	const h1 = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	c := dial(t, l, h1)
	ac, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	if got := readAll(t, ac); got != h1 {
		t.Errorf("Accept's connection reads %q, want every byte the client sent, %q", got, h1)
	}
	if err := ac.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Errorf("CloseWrite on the accepted connection: %v", err)
	}
	if got := readAll(t, c); got != "" {
		t.Errorf("the client read %q after the half-close", got)
	}
}

// A connection serve does not take goes to Accept, preface and all.
func TestRefusedPrefaceGoesToAccept(t *testing.T) {
	l := listen(t, func(net.Conn) bool { return false })
	c := dial(t, l, Preface+"x")
	ac, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	if got := readAll(t, ac); got != Preface+"x" {
		t.Errorf("Accept's connection reads %q, want the preface and what followed", got)
	}
}

// A client that ends inside the preface is closed, not handed anywhere.
func TestEndInsideThePrefaceIsClosed(t *testing.T) {
	l := listen(t, func(net.Conn) bool { t.Error("serve was called"); return true })
	c := dial(t, l, Preface[:10])
	c.(*net.TCPConn).CloseWrite()
	// Closed by the listener: handed to Accept, nothing would close it,
	// and the read would fail at its deadline.
	if got := readAll(t, c); got != "" {
		t.Errorf("the client read %q", got)
	}
}

// Close drops a connection still being sorted, and Accept then fails.
func TestCloseDropsConnectionsBeingSorted(t *testing.T) {
	l := listen(t, func(net.Conn) bool { t.Error("serve was called"); return true })
	c := dial(t, l, "PRI")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed whether or not it had been accepted yet (a connection left
	// in the backlog is reset).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c); len(b) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("the client read %q, %v: want the connection closed", b, err)
	}
	if _, err := l.Accept(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Accept after Close: %v, want a closed listener's error", err)
	}
}
