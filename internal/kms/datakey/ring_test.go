package datakey

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/kms"
)

func testRing(k kms.KMS, maxRecords uint64, c *clock) *Ring {
	return NewRing(RingOptions{KMS: k, MaxRecords: maxRecords, MaxAge: time.Hour, Timeout: time.Second, Now: c.Now})
}

func reserve(t *testing.T, r *Ring, kek string, n int) (*DEK, uint64, int) {
	t.Helper()
	d, first, got, err := r.Reserve(context.Background(), kek, n)
	if err != nil {
		t.Fatalf("reserving %d IVs of %s: %v", n, kek, err)
	}
	return d, first, got
}

func TestRingHandsOutCountersThenRenews(t *testing.T) {
	k := newTestKMS("orders")
	var made []*DEK
	r := NewRing(RingOptions{KMS: k, MaxRecords: 6, MaxAge: time.Hour, Timeout: time.Second,
		OnNew: func(d *DEK) { made = append(made, d) }})
	d1, first, got := reserve(t, r, "orders", 4)
	if first != 0 || got != 4 {
		t.Errorf("first reservation: counters %d+%d, want 0+4", first, got)
	}
	d, first, got := reserve(t, r, "orders", 4)
	if d != d1 || first != 4 || got != 2 {
		t.Errorf("second reservation: counters %d+%d of the same DEK %v, want 4+2, what is left of it", first, got, d == d1)
	}
	d2, first, got := reserve(t, r, "orders", 1)
	if d2 == d1 || first != 0 || got != 1 {
		t.Errorf("a used-up DEK was not replaced: counters %d+%d, new DEK %v", first, got, d2 != d1)
	}
	if bytes.Equal(d1.Wrapped(), d2.Wrapped()) || d1.KEK() != "orders" || d2.KEK() != "orders" {
		t.Errorf("two DEKs with the wrapped bytes %x and %x, KEKs %q and %q", d1.Wrapped(), d2.Wrapped(), d1.KEK(), d2.KEK())
	}
	if k.wraps.Load() != 2 || len(made) != 2 || made[0] != d1 || made[1] != d2 {
		t.Errorf("%d wraps, OnNew told of %d DEKs; want 2 of each, in order", k.wraps.Load(), len(made))
	}
}

func TestRingRenewsAfterMaxAge(t *testing.T) {
	k, c := newTestKMS("orders"), newClock()
	r := testRing(k, 1000, c)
	d1, _, _ := reserve(t, r, "orders", 1)
	c.add(time.Hour - time.Second)
	if d, first, _ := reserve(t, r, "orders", 1); d != d1 || first != 1 {
		t.Errorf("within max age: same DEK %v, counter %d; want the same DEK, counter 1", d == d1, first)
	}
	c.add(time.Second)
	if d, first, _ := reserve(t, r, "orders", 1); d == d1 || first != 0 {
		t.Errorf("at max age: same DEK %v, counter %d; want a new DEK from counter 0", d == d1, first)
	}
}

func TestRingCountersNeverRepeat(t *testing.T) {
	k := newTestKMS("orders")
	r := testRing(k, 97, newClock())
	const workers, rounds = 8, 50
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				d, first, got, err := r.Reserve(context.Background(), "orders", 1+(w+i)%5)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for iv := first; iv < first+uint64(got); iv++ {
					id := fmt.Sprintf("%x/%d", d.Wrapped(), iv)
					if seen[id] || iv >= 97 {
						t.Errorf("counter %d handed out twice or past max records", iv)
					}
					seen[id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if k.wraps.Load() > int64(len(seen)/97+1) {
		t.Errorf("%d wraps for %d counters at 97 a DEK", k.wraps.Load(), len(seen))
	}
}

func TestRingCallersShareOneKMSCall(t *testing.T) {
	k := newTestKMS("orders")
	k.gate, k.entered = make(chan struct{}), make(chan struct{}, 1)
	r := testRing(k, 1000, newClock())
	// The first caller gives up while the KMS works: the call goes on
	// for the others.
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() {
		_, _, _, err := r.Reserve(ctx, "orders", 1)
		first <- err
	}()
	<-k.entered
	cancel()
	// A caller that gives up while waiting is told so, and makes no call.
	gone, stop := context.WithCancel(context.Background())
	stop()
	_, _, _, err := r.Reserve(gone, "orders", 1)
	wantErr(t, err, context.Canceled, `kms unavailable: waiting for a new data key for KEK "orders"`)
	close(k.gate)
	if err := <-first; err != nil {
		t.Errorf("the caller that started the KMS call: %v", err)
	}
	if _, first, _ := reserve(t, r, "orders", 1); first != 1 || k.wraps.Load() != 1 {
		t.Errorf("counter %d after %d wraps; want counter 1 after 1 wrap", first, k.wraps.Load())
	}
}

func TestRingMissingKEKAskedAgainAfterAWhile(t *testing.T) {
	k, c := newTestKMS(), newClock()
	r := testRing(k, 1000, c)
	for range 3 {
		if _, _, _, err := r.Reserve(context.Background(), "absent", 1); !errors.Is(err, kms.ErrKeyNotFound) {
			t.Fatalf("missing KEK: err %v", err)
		}
	}
	if k.wraps.Load() != 1 {
		t.Errorf("%d wraps for a KEK just found missing, want 1", k.wraps.Load())
	}
	c.add(negativeTTL)
	k.create("absent")
	reserve(t, r, "absent", 1)
	if k.wraps.Load() != 2 {
		t.Errorf("%d wraps; a KEK missing %v ago was not asked for again", k.wraps.Load(), negativeTTL)
	}
}

func TestRingBoundsItsKEKs(t *testing.T) {
	k, c := newTestKMS("present"), newClock()
	r := testRing(k, 1000, c)
	for i := range maxSlots - 1 {
		if _, _, _, err := r.Reserve(context.Background(), fmt.Sprint("absent-", i), 1); !errors.Is(err, kms.ErrKeyNotFound) {
			t.Fatal(err)
		}
	}
	d, _, _ := reserve(t, r, "present", 1)
	// Full: the slots of missing KEKs make room.
	k.create("another")
	reserve(t, r, "another", 1)
	if n := len(r.slots); n != 2 {
		t.Errorf("%d slots after the missing KEKs made room, want 2", n)
	}
	if again, _, _ := reserve(t, r, "present", 1); again != d {
		t.Error("a KEK in use lost its DEK while missing ones could make room")
	}
	// Full of KEKs in use: all go.
	for i := range maxSlots - 2 {
		k.create(fmt.Sprint("in-use-", i))
		reserve(t, r, fmt.Sprint("in-use-", i), 1)
	}
	k.create("one-more")
	reserve(t, r, "one-more", 1)
	if n := len(r.slots); n != 1 {
		t.Errorf("%d slots, want the one just added", n)
	}
	if again, first, _ := reserve(t, r, "present", 1); again == d || first != 0 {
		t.Error("the ring kept a DEK past its bound")
	}
}

func TestReserveDoesNotAllocate(t *testing.T) {
	r := testRing(newTestKMS("orders"), 1<<32, newClock())
	reserve(t, r, "orders", 1)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { r.Reserve(ctx, "orders", 100) }); n != 0 {
		t.Errorf("Reserve from a DEK in use: %v allocations, want 0", n)
	}
}

func TestNonce(t *testing.T) {
	want := [NonceLen]byte{0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	if got := Nonce(0x0102030405060708); got != want {
		t.Errorf("Nonce: %x, want %x", got, want)
	}
}

// TestRingNoCallerStarves: callers that keep coming back for DEKs of one
// counter each all get every counter they ask for; none gives up because
// others kept winning the race for each new DEK.
func TestRingNoCallerStarves(t *testing.T) {
	r := testRing(newTestKMS("orders"), 1, newClock())
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[[2]any]bool{}
	for range 8 {
		wg.Go(func() {
			for range 60 {
				d, first, got, err := r.Reserve(context.Background(), "orders", 1)
				if err != nil || got != 1 {
					t.Errorf("reserve: %d counters, %v", got, err)
					return
				}
				mu.Lock()
				key := [2]any{d, first}
				if seen[key] {
					t.Errorf("counter %d of one DEK handed out twice", first)
				}
				seen[key] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
