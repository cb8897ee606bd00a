package gateway

import (
	"runtime"
	"strings"
	"sync"
	"testing"
)

// onPooledGoroutine reports whether the caller runs on one of the
// grownStacks goroutines.
func onPooledGoroutine() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "runGrownJobs")
}

func TestOnGrownStackRunsOnAPooledGoroutine(t *testing.T) {
	// A pooled goroutine takes a job only while it waits for one: one that
	// has just started or finished may not be waiting yet, so try a few
	// times.
	var pooled bool
	var got int
	for i := 0; i < 1000 && !pooled; i++ {
		onGrownStack(func() { pooled, got = onPooledGoroutine(), 42 })
		runtime.Gosched()
	}
	if !pooled {
		t.Error("fn never ran on a pooled goroutine")
	}
	if got != 42 {
		t.Errorf("fn's result is not visible to the caller after onGrownStack returned: got %d", got)
	}
}

func TestOnGrownStackRaisesAPanicOnTheCaller(t *testing.T) {
	defer func() {
		if p := recover(); p != "translation blew up" {
			t.Errorf("recovered %v on the caller, want the panic raised in fn", p)
		}
	}()
	onGrownStack(func() { panic("translation blew up") })
	t.Error("onGrownStack returned after fn panicked")
}

func TestOnGrownStackRunsOnTheCallerWhenThePoolIsBusy(t *testing.T) {
	grownStacks.once.Do(startGrownStacks)
	// Hold every pooled goroutine.
	release := make(chan struct{})
	var held, done sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		held.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			onGrownStack(func() { held.Done(); <-release })
		}()
	}
	held.Wait()
	var pooled bool
	onGrownStack(func() { pooled = onPooledGoroutine() })
	close(release)
	done.Wait()
	if pooled {
		t.Error("fn ran on a pooled goroutine while all of them were held")
	}
}
