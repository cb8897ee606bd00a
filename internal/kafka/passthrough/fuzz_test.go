package passthrough

import (
	"bytes"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// bytesConn is a connection whose peer sent b and then closed.
type bytesConn struct {
	r *bytes.Reader
	net.Conn
}

func (c bytesConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c bytesConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c bytesConn) SetReadDeadline(time.Time) error  { return nil }
func (c bytesConn) SetWriteDeadline(time.Time) error { return nil }
func (c bytesConn) SetDeadline(time.Time) error      { return nil }
func (c bytesConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (c bytesConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// clientHello records the ClientHello a Go TLS client sends for name.
func clientHello(t testing.TB, name string) []byte {
	c, s := net.Pipe()
	go func() {
		tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
		c.Close()
	}()
	buf := make([]byte, 4096)
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := s.Read(buf)
	s.Close()
	return buf[:n]
}

// FuzzReadServerName: any bytes a client sends are read without a panic;
// a name is reported only from a ClientHello, and the bytes to replay are
// exactly those read.
func FuzzReadServerName(f *testing.F) {
	f.Add(clientHello(f, "broker-1.kafka.example.com"))
	f.Add(clientHello(f, ""))
	f.Add([]byte{0, 0, 0, 20, 0, 18, 0, 3})
	f.Add([]byte{22, 3, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		name, hello, err := readServerName(bytesConn{r: bytes.NewReader(data)})
		if err != nil {
			return
		}
		if name == "" || !bytes.HasPrefix(data, hello) {
			t.Fatalf("name %q, replay of %d bytes not a prefix of what was sent", name, len(hello))
		}
	})
}
