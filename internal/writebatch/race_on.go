//go:build race

package writebatch

// raceEnabled: under the race detector sockets are read and written
// through net.Conn, whose reads and writes tell the detector that what a
// goroutine did before writing happened before what the reader does after
// reading (a test that changes state and then sends a request relies on
// it); raw system calls would hide that and make it report races that
// are not there.
const raceEnabled = true
