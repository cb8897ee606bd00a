package recordbatch

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// Once the process's budget has held a burst and gone idle, freed memory
// is handed back to the OS, without waiting minutes for the GC.
func TestBudgetReclaimsAfterBurst(t *testing.T) {
	var runs atomic.Int64
	reclaim = func() { runs.Add(1) }
	t.Cleanup(func() { reclaim = debug.FreeOSMemory })
	b := ProcessBudget(DefaultDecompressionBudget)
	if err := b.Acquire(context.Background(), reclaimMin); err != nil {
		t.Fatal(err)
	}
	b.Release(reclaimMin)
	deadline := time.Now().Add(30 * time.Second)
	for runs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("memory not handed back 30 s after a burst")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
