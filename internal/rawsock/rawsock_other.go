//go:build !unix

package rawsock

import (
	"errors"
	"net"
)

// ErrUnsupported is what every function returns where sockets cannot be
// read without the runtime's poller.
var ErrUnsupported = errors.New("non-blocking socket access is available only on Unix systems")

func Detach(net.Conn) (int, error)      { return -1, ErrUnsupported }
func ReadNow(int, []byte) (int, error)  { return 0, ErrUnsupported }
func WriteNow(int, []byte) (int, error) { return 0, ErrUnsupported }
func ReadOnce(int, *[]byte, *int) (int, bool, error) {
	return 0, false, ErrUnsupported
}
func Close(int) error { return ErrUnsupported }
