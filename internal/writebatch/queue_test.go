package writebatch

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
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

// TestQueueAndWriteTogetherOverTCP mixes Queue and Write from many
// goroutines; every record arrives, in each writer's order.
func TestQueueAndWriteTogetherOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const writers, each = 8, 2000
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		got <- b
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := New(raw)
	var wg sync.WaitGroup
	var mu sync.Mutex // the caller's own write lock, as h2server's
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := make([]byte, 64)
			for i := range each {
				binary.BigEndian.PutUint32(rec, uint32(w))
				binary.BigEndian.PutUint32(rec[4:], uint32(i))
				mu.Lock()
				var flush bool
				var err error
				if w%2 == 0 {
					flush, err = c.Queue(rec)
				} else {
					_, err = c.Write(rec)
				}
				mu.Unlock()
				if flush {
					c.Flush()
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if len(b) != writers*each*64 {
		t.Fatalf("%d bytes arrived, want %d", len(b), writers*each*64)
	}
	next := make([]uint32, writers)
	for off := 0; off < len(b); off += 64 {
		w, i := binary.BigEndian.Uint32(b[off:]), binary.BigEndian.Uint32(b[off+4:])
		if i != next[w] {
			t.Fatalf("writer %d: record %d arrived where %d was next", w, i, next[w])
		}
		next[w]++
	}
}
