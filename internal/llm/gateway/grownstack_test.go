package gateway

import (
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/straitgw/strait/internal/llm/translate"
)

// translateReference translates the reference request and its answer, as
// a translated JSON request through the gateway does.
func translateReference(tb testing.TB) {
	if _, err := translate.Request(translate.OpenAI, translate.Anthropic, []byte(referenceBody), "claude-upstream", translate.Options{}); err != nil {
		tb.Error(err)
	}
	if _, err := translate.Response(translate.Anthropic, translate.OpenAI, []byte(anthropicJSON("claude-upstream")), "alias-1"); err != nil {
		tb.Error(err)
	}
}

// onFreshGoroutine runs fn on a new goroutine, as x/net's server runs each
// request, and waits for it.
func onFreshGoroutine(fn func()) {
	var wg sync.WaitGroup
	wg.Go(fn)
	wg.Wait()
}

// stackMoved runs fn and reports whether the caller's stack was copied
// (grown) meanwhile: a variable on it is then at another address.
//
//go:noinline
func stackMoved(fn func()) bool {
	var mark int
	before := uintptr(unsafe.Pointer(&mark))
	fn()
	return uintptr(unsafe.Pointer(&mark)) != before
}

func TestOnGrownStackTranslatesWithoutGrowingTheStack(t *testing.T) {
	// A garbage collection may shrink a stack that is mostly unused, which
	// moves it too: none may run meanwhile.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 20 {
		var moved bool
		onFreshGoroutine(func() {
			onGrownStack(func() { moved = stackMoved(func() { translateReference(t) }) })
		})
		if moved {
			t.Fatalf("the stack grew while translating after onGrownStack grew it to %d bytes", grownStackBytes)
		}
	}
}

func TestOnGrownStackRunsFn(t *testing.T) {
	got := 0
	onGrownStack(func() { got = 42 })
	if got != 42 {
		t.Errorf("fn did not run: got %d", got)
	}
}

// processCPU is the CPU time the process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkTranslateOnFreshGoroutine is a translated request and its
// answer on a new goroutine each, as the gateway serves them: with the
// stack grown as the translation goes ("direct"), or first in one step
// (onGrownStack). "pooled" is the handover to a long-lived goroutine the
// gateway did before. Run with the runtime's adaptive initial stack size
// off, as a busy gateway's many small goroutines keep it low:
//
//	GODEBUG=adaptivestackstart=0 go test ./internal/llm/gateway/ -run '^$' -bench TranslateOnFreshGoroutine -benchmem
func BenchmarkTranslateOnFreshGoroutine(b *testing.B) {
	work := func() { translateReference(b) }
	jobs := make(chan func())
	done := make(chan struct{})
	go func() {
		for fn := range jobs {
			fn()
			done <- struct{}{}
		}
	}()
	defer close(jobs)
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"direct", work},
		{"onGrownStack", func() { onGrownStack(work) }},
		{"pooled", func() { jobs <- work; <-done }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				onFreshGoroutine(c.fn)
			}
			// ns/op is the time one request waits; a handover also
			// spends CPU on the thread it wakes, which this counts.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
