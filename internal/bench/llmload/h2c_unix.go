//go:build unix

package llmload

import (
	"io"
	"syscall"
)

// readNow reads what the socket holds without waiting: 0 and no error if
// it holds nothing.
func readNow(rc syscall.RawConn, p []byte) (int, error) {
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), p)
			if rerr != syscall.EINTR {
				return true
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case rerr == syscall.EAGAIN:
		return 0, nil
	case rerr != nil:
		return 0, rerr
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// writeNow writes what the socket takes without waiting.
func writeNow(rc syscall.RawConn, p []byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), p)
			if werr != syscall.EINTR {
				return true
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case werr == syscall.EAGAIN:
		return 0, nil
	case werr != nil:
		return 0, werr
	}
	return n, nil
}
