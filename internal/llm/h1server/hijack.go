package h1server

import (
	"bufio"
	"errors"
	"net"
)

// Hijack implements http.Hijacker, for the HTTP/1.1 upgrade to h2c
// (x/net's h2c handler takes the connection over with it): the
// connection, and a reader holding whatever the client sent past the
// request, become the caller's. The server writes and closes nothing of
// it afterwards.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.done {
		return nil, nil, errFinished
	}
	if w.sentHead || (w.buf != nil && len(*w.buf) > 0) {
		return nil, nil, errors.New("h1server: Hijack after the answer began")
	}
	c := w.c
	c.mu.Lock()
	c.hijacked = true
	c.mu.Unlock()
	c.takeReader()
	br := c.br
	c.br = nil // the caller's now: not pooled
	w.done = true
	w.closeAfter = true
	return c.nc, bufio.NewReadWriter(br, bufio.NewWriter(c.nc)), nil
}
