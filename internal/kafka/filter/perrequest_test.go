package filter

import (
	"context"
	"testing"
	"time"
)

func TestPerRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Context{Ctx: ctx}
	other := &Context{Ctx: context.Background()}
	var a, b PerRequest[string]

	a.Add(c, 7, "x", "y")
	a.Add(c, 7, "z")
	a.Add(other, 7, "elsewhere")
	b.Add(c, 7, "b's")
	if a.Len() != 4 || b.Len() != 1 {
		t.Fatalf("Len = %d, %d; want 4, 1", a.Len(), b.Len())
	}
	// Two instances on one connection keep their own entries.
	if got := a.Take(c, 7); len(got) != 3 || got[0] != "x" || got[2] != "z" {
		t.Fatalf("Take = %v", got)
	}
	if got := a.Take(c, 7); got != nil {
		t.Fatalf("second Take = %v, want nothing", got)
	}
	if got := b.Take(c, 7); len(got) != 1 || got[0] != "b's" {
		t.Fatalf("b's Take = %v", got)
	}
	// Entries of a connection that ends are dropped from the count.
	a.Add(c, 8, "never answered")
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for a.Len() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d after the connection ended, want 1 (the other connection's)", a.Len())
		}
		time.Sleep(time.Millisecond)
	}
	if got := a.Take(other, 7); len(got) != 1 {
		t.Fatalf("other connection's Take = %v", got)
	}
}
