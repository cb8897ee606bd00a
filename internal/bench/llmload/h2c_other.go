//go:build !unix

package llmload

import (
	"errors"
	"syscall"
)

var errNoRawIO = errors.New("--h2c needs non-blocking socket access, which this system does not offer to the generator; use HTTP/1.1")

func readNow(syscall.RawConn, []byte) (int, error)  { return 0, errNoRawIO }
func writeNow(syscall.RawConn, []byte) (int, error) { return 0, errNoRawIO }
