package mockllm

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// HTTP/1.1 "Upgrade: h2c" (RFC 7540 section 3.2; dropped by RFC 9113, but
// some load generators still use it). net/http serves prior-knowledge
// HTTP/2 but not this upgrade, so the server does the upgrade itself and
// hands the connection to a net/http server of its own that speaks only
// cleartext HTTP/2, as if the client had used prior knowledge: the client's
// preface and SETTINGS, then, injected, the upgrading request as stream 1,
// then the rest of what the client sends. The injected HEADERS carry no
// body and use literals that never enter the HPACK dynamic table, so the
// client's view of the connection's flow control and header compression
// stays right; the body, already read, is handed over through upgrades,
// keyed by a header only the injected request carries.

const upgradeMarker = "X-Strait-Mock-Upgrade"

// isH2CUpgrade reports whether r asks to upgrade to cleartext HTTP/2.
func isH2CUpgrade(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.TLS != nil || len(r.Header["Upgrade"]) == 0 || len(r.Header["Http2-Settings"]) != 1 {
		return false
	}
	return headerHasToken(r.Header["Upgrade"], "h2c") && headerHasToken(r.Header["Connection"], "upgrade")
}

func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// upgradeH2C switches the connection of r to HTTP/2.
//
// If the server cannot upgrade (the request's headers are too big for one
// frame, the server is closing, the connection cannot be taken over), it
// answers over HTTP/1.1 instead, as RFC 9110 lets a server that ignores an
// Upgrade do.
func (s *Server) upgradeH2C(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes))
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body)) // the HTTP/1.1 answer reports it
		s.serve(w, r)
		return
	}
	token := make([]byte, 16)
	_, _ = crand.Read(token)
	key := hex.EncodeToString(token)
	block, err := upgradeHeaders(r, key)
	var b *bridge
	if err == nil {
		b, err = s.bridge()
	}
	var conn net.Conn
	var brw *bufio.ReadWriter
	if err == nil {
		conn, brw, err = http.NewResponseController(w).Hijack()
	}
	if err != nil {
		s.log.Debug("answering over HTTP/1.1 instead of upgrading to h2c", "err", err)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.serve(w, r)
		return
	}
	s.upgrades.Store(key, body)
	if err := s.handOver(b, conn, brw, block); err != nil {
		s.upgrades.Delete(key)
		s.log.Debug("h2c upgrade failed", "remote", conn.RemoteAddr().String(), "err", err)
		conn.Close()
	}
}

// handOver answers 101, reads the client's preface and SETTINGS, and
// hands the connection to the bridge with the upgrading request injected.
func (s *Server) handOver(b *bridge, conn net.Conn, brw *bufio.ReadWriter, block []byte) error {
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"); err != nil {
		return err
	}
	if err := brw.Flush(); err != nil {
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	head := make([]byte, len(preface)+9)
	if _, err := io.ReadFull(brw, head); err != nil {
		return fmt.Errorf("reading the client preface: %w", err)
	}
	if string(head[:len(preface)]) != preface || head[len(preface)+3] != 0x4 {
		return errors.New("the client did not send the HTTP/2 preface and SETTINGS after the 101")
	}
	n := int(head[len(preface)])<<16 | int(head[len(preface)+1])<<8 | int(head[len(preface)+2])
	settings := make([]byte, n)
	if _, err := io.ReadFull(brw, settings); err != nil {
		return fmt.Errorf("reading the client SETTINGS: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})

	prefix := make([]byte, 0, len(head)+n+9+len(block))
	prefix = append(prefix, head...)
	prefix = append(prefix, settings...)
	l := len(block)
	// HEADERS on stream 1 with END_STREAM and END_HEADERS.
	prefix = append(prefix, byte(l>>16), byte(l>>8), byte(l), 0x1, 0x1|0x4, 0, 0, 0, 1)
	prefix = append(prefix, block...)
	if !b.hand(&prefixConn{Conn: conn, r: io.MultiReader(bytes.NewReader(prefix), brw.Reader)}) {
		return ErrClosed
	}
	return nil
}

// upgradeHeaders encodes the HEADERS block of the upgrading request, with
// the marker that lets the injected request find its body.
func upgradeHeaders(r *http.Request, key string) ([]byte, error) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	field := func(name, value string) {
		// Sensitive: a never-indexed literal, which leaves the dynamic
		// table as the client's encoder believes it is.
		_ = enc.WriteField(hpack.HeaderField{Name: name, Value: value, Sensitive: true})
	}
	field(":method", r.Method)
	field(":scheme", "http")
	field(":authority", r.Host)
	field(":path", r.RequestURI)
	for name, values := range r.Header {
		switch name {
		case "Connection", "Upgrade", "Http2-Settings", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Content-Length", "Host", upgradeMarker:
			continue
		}
		for _, v := range values {
			field(strings.ToLower(name), v)
		}
	}
	field(strings.ToLower(upgradeMarker), key)
	if buf.Len() > 16384 {
		return nil, errors.New("the upgrading request's headers do not fit in one HTTP/2 frame; send them over HTTP/1.1 or with prior knowledge")
	}
	return buf.Bytes(), nil
}

// restoreUpgraded gives the request injected by an upgrade the body read
// before the upgrade.
func (s *Server) restoreUpgraded(r *http.Request) {
	key := r.Header.Get(upgradeMarker)
	r.Header.Del(upgradeMarker)
	v, ok := s.upgrades.LoadAndDelete(key)
	if !ok {
		return
	}
	body := v.([]byte)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
}

// prefixConn is a connection whose first bytes read are replaced.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// bridge returns the listener upgraded connections are handed to, starting
// the HTTP/2-only server behind it on first use.
func (s *Server) bridge() (*bridge, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.upgraded != nil {
		return s.upgraded, nil
	}
	b := &bridge{conns: make(chan net.Conn), done: make(chan struct{})}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler:   s,
		Protocols: p,
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: s.opt.MaxConcurrentStreams},
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if err := configureHTTP2(hs); err != nil {
		return nil, err
	}
	s.servers = append(s.servers, hs)
	s.upgraded = b
	go func() { _ = hs.Serve(b) }()
	return b, nil
}

// bridge is a net.Listener fed with upgraded connections.
type bridge struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (b *bridge) hand(c net.Conn) bool {
	select {
	case b.conns <- c:
		return true
	case <-b.done:
		return false
	}
}

func (b *bridge) Accept() (net.Conn, error) {
	select {
	case c := <-b.conns:
		return c, nil
	case <-b.done:
		return nil, net.ErrClosed
	}
}

func (b *bridge) Close() error {
	b.once.Do(func() { close(b.done) })
	return nil
}

func (b *bridge) Addr() net.Addr { return bridgeAddr{} }

type bridgeAddr struct{}

func (bridgeAddr) Network() string { return "h2c-upgrade" }
func (bridgeAddr) String() string  { return "h2c-upgrade" }
