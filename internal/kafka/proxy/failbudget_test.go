package proxy

import (
	"net"
	"testing"
	"time"
)

// TestFailureBudget: an address may fail its budget's worth of times a
// minute at no extra cost; each failure past it waits a second more, up to
// 30 s; other addresses are not slowed; a quiet minute resets it.
func TestFailureBudget(t *testing.T) {
	b := &failureBudget{budget: 3}
	a := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1111}
	other := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 2222}
	now := time.Unix(1_700_000_000, 0)
	var got []time.Duration
	for i := range 6 {
		got = append(got, b.fail(&net.TCPAddr{IP: a.IP, Port: 1000 + i}, now.Add(time.Duration(i)*time.Second)))
	}
	want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 3 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("penalties %v, want %v (the port must not matter)", got, want)
		}
	}
	if d := b.fail(other, now); d != 0 {
		t.Errorf("another address was slowed by %s", d)
	}
	for range 40 {
		b.fail(a, now.Add(10*time.Second))
	}
	if d := b.fail(a, now.Add(11*time.Second)); d != maxPenalty {
		t.Errorf("penalty %s after many failures, want the cap %s", d, maxPenalty)
	}
	if d := b.fail(a, now.Add(11*time.Second+failureWindow+time.Second)); d != 0 {
		t.Errorf("penalty %s after a quiet minute, want none", d)
	}
	var none *failureBudget
	if d := none.fail(a, now); d != 0 {
		t.Errorf("no budget: penalty %s", d)
	}
}
