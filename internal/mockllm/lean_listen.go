package mockllm

import (
	"net"
	"time"

	"github.com/straitgw/strait/internal/prefacelisten"
)

// sniffTimeout bounds how long a new connection may take to show whether
// it opens with the HTTP/2 preface, as net/http's ReadHeaderTimeout bounds
// a request's headers.
const sniffTimeout = 30 * time.Second

// newLeanListener sorts the connections of a cleartext listener: those
// that open with the HTTP/2 client preface go to the lean engine, every
// other one (and one the engine cannot take: a connection that is not a
// socket) to net/http through Accept.
func newLeanListener(l net.Listener, e *engine) net.Listener {
	return prefacelisten.New(l, sniffTimeout, e.add)
}
