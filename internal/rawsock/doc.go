// Package rawsock reads and writes sockets outside the Go runtime's network
// poller, for event loops that serve many connections from one goroutine on
// their own schedule: the benchmark generator's h2c client and the mock
// provider's lean HTTP/2 server. While the poller watches a socket, every
// segment that arrives on it wakes the process, even with no goroutine
// waiting to read; a loop that reads every few milliseconds pays for none
// of those wake-ups once its sockets are detached.
//
// ReadNow and WriteNow also serve sockets the poller still watches: called
// from a RawConn's Read or Write, they make writebatch's reads and writes
// raw system calls, without the runtime's bookkeeping for a call that
// might block (on a non-blocking socket none does).
//
// It imports nothing of Strait's.
package rawsock
