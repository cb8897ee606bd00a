package writebatch

import (
	"testing"
)

// TestQueueLetsTheCallerWrite: the first writer on an idle connection
// writes its batch itself; writers that queue while that write is in
// progress leave in the next batch, which the first writer also writes;
// past ownBatches the writer goroutine takes over.
func TestQueueLetsTheCallerWrite(t *testing.T) {
	s := newStuck()
	c := New(s)
	flush, err := c.Queue([]byte("a"))
	if !flush || err != nil {
		t.Fatalf("Queue on an idle connection = %v, %v; want the caller to write", flush, err)
	}
	if flush, _ := c.Queue([]byte("b")); flush {
		t.Fatal("a second writer was asked to write while the first has not")
	}
	flushed := make(chan struct{})
	go func() { c.Flush(); close(flushed) }()
	<-s.entered // "ab" is in write(2)
	for _, p := range []string{"c", "d"} {
		if flush, err := c.Queue([]byte(p)); flush || err != nil {
			t.Fatalf("Queue during a write = %v, %v", flush, err)
		}
	}
	s.gate <- struct{}{}
	<-s.entered // "cd", by the same Flush
	if flush, _ := c.Queue([]byte("e")); flush {
		t.Fatal("asked to write while a batch is in progress")
	}
	s.gate <- struct{}{}
	<-flushed // two batches written: Flush hands "e" on
	<-s.entered
	close(s.gate)
	if err := c.Flushed(); err != nil {
		t.Fatal(err)
	}
	if len(s.writes) != 3 || string(s.writes[0]) != "ab" || string(s.writes[1]) != "cd" || string(s.writes[2]) != "e" {
		t.Fatalf("writes %q, want ab, cd, e", s.writes)
	}
	if flush, _ := c.Queue([]byte("f")); !flush {
		t.Fatal("an idle connection again did not give the write to its caller")
	}
	c.Flush()
}

// TestCloseWaitsForAQueuedBatch: a batch queued and not yet flushed is
// its caller's to write, and Close waits for it rather than dropping it.
func TestCloseWaitsForAQueuedBatch(t *testing.T) {
	s := newStuck()
	close(s.gate)
	c := New(s)
	waits := make(chan struct{}, 1)
	c.waits = waits
	if flush, _ := c.Queue([]byte("last words")); !flush {
		t.Fatal("not asked to write")
	}
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	select {
	case <-waits:
	case <-closed:
		t.Fatal("Close returned with a batch queued and not written")
	}
	c.Flush()
	<-closed
	if s.count() != 1 || string(s.writes[0]) != "last words" {
		t.Fatalf("writes %q", s.writes)
	}
}

// TestLockedUnlockWritesWhatItsHolderQueued: the holder whose write began
// a batch writes it in Unlock; over a connection that does not batch,
// Write writes at once.
func TestLockedUnlockWritesWhatItsHolderQueued(t *testing.T) {
	s := newStuck()
	close(s.gate)
	var l Locked
	l.Init(New(s))
	l.Lock()
	if _, err := l.Write([]byte("frames")); err != nil {
		t.Fatal(err)
	}
	if !l.Owed() || s.count() != 0 {
		t.Fatalf("owed %v, %d writes, before Unlock", l.Owed(), s.count())
	}
	l.Unlock()
	if s.count() != 1 || string(s.writes[0]) != "frames" {
		t.Fatalf("after Unlock: writes %q", s.writes)
	}

	plain := newStuck()
	close(plain.gate)
	var p Locked
	p.Init(plain)
	p.Lock()
	p.Write([]byte("now"))
	if p.Owed() || plain.count() != 1 {
		t.Fatalf("over a plain connection: owed %v, %d writes", p.Owed(), plain.count())
	}
	p.Unlock()
}
