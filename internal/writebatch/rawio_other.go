//go:build !unix

package writebatch

import "net"

// rawSock is unused where rawsock has no raw system calls: sockets are
// read and written through net.Conn.
type rawSock struct{}

func newRawSock(net.Conn) *rawSock { return nil }

func (*rawSock) read([]byte) (*[]byte, int, error) { panic("unreachable") }
func (*rawSock) write([]byte) (int, error)         { panic("unreachable") }
func (*rawSock) quiet() bool                       { panic("unreachable") }

// quietSock cannot tell where there are no raw system calls.
func quietSock(net.Conn) bool { return true }
