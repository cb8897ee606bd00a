package writebatch

import (
	"net"
	"sync"
)

// Locked is a connection's write lock for writers that build frames under
// it, as an HTTP/2 connection's do. Write, under the lock, queues p
// (Queue) when the connection is a *Conn, or writes it to any other; and
// Unlock releases the lock and then, if this holder's writes began a
// batch, writes the batch on the caller's goroutine (Flush). Keeping the
// flush in Unlock means no holder can queue a batch and forget it, which
// would leave the bytes unwritten and Close waiting for them.
type Locked struct {
	mu   sync.Mutex
	w    net.Conn
	b    *Conn
	owed bool // the holder's writes began a batch
}

// Init sets the connection written to.
func (l *Locked) Init(w net.Conn) {
	l.w = w
	l.b, _ = w.(*Conn)
}

// Lock takes the lock.
func (l *Locked) Lock() { l.mu.Lock() }

// Unlock releases the lock, then writes the batch its holder owes.
func (l *Locked) Unlock() {
	owed := l.owed
	l.owed = false
	l.mu.Unlock()
	if owed {
		l.b.Flush()
	}
}

// Write writes or queues p; the lock is held.
func (l *Locked) Write(p []byte) (int, error) {
	if l.b == nil {
		return l.w.Write(p)
	}
	flush, err := l.b.Queue(p)
	l.owed = l.owed || flush
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Owed reports whether the holder's writes began a batch not yet
// written; the lock is held.
func (l *Locked) Owed() bool { return l.owed }
