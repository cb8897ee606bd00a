//go:build unix && !linux

package rawsock

import "syscall"

func readFD(fd int, p []byte) (int, error)  { return syscall.Read(fd, p) }
func writeFD(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }
