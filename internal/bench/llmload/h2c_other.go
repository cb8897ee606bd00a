//go:build !unix

package llmload

import (
	"errors"
	"net"
)

var errNoRawIO = errors.New("--h2c needs non-blocking socket access, which the generator has only on Unix systems; use HTTP/1.1")

func detach(net.Conn) (int, error)      { return -1, errNoRawIO }
func readNow(int, []byte) (int, error)  { return 0, errNoRawIO }
func writeNow(int, []byte) (int, error) { return 0, errNoRawIO }
func closeFD(int) error                 { return errNoRawIO }
