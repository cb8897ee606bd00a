package gateway

import (
	"runtime"
	"sync"
)

// Translating a request decodes its JSON several levels deep. On the
// goroutine x/net's server starts for each request, which begins with a
// small stack, that depth makes the runtime grow the stack, copying it each
// time it doubles; the garbage collector shrinks it again while the
// request waits on its provider. A gateway CPU profile at 1,000 translated
// requests/s put those copies at 7% of the gateway's CPU, 32 µs per
// request against 9 on the fast path. So translations run on a few
// long-lived goroutines whose stacks stay grown, handed over with two
// channel operations; when all of them are busy the caller does the work
// itself, as before.

// grownStacks is the pool of long-lived goroutines, one per P, started on
// first use and kept for the life of the process (they hold no state).
var grownStacks struct {
	once sync.Once
	jobs chan *grownJob
}

type grownJob struct {
	fn       func()
	done     chan struct{}
	panicked any
}

var grownJobs = sync.Pool{New: func() any { return &grownJob{done: make(chan struct{}, 1)} }}

// onGrownStack runs fn on a pooled goroutine if one is idle, else on the
// caller's, and returns when fn has. A panic in fn is raised again on the
// caller's goroutine, where the handler's recovery sees it.
func onGrownStack(fn func()) {
	grownStacks.once.Do(startGrownStacks)
	j := grownJobs.Get().(*grownJob)
	j.fn = fn
	select {
	case grownStacks.jobs <- j:
		<-j.done
	default:
		j.fn = nil
		grownJobs.Put(j)
		fn()
		return
	}
	p := j.panicked
	j.fn, j.panicked = nil, nil
	grownJobs.Put(j)
	if p != nil {
		panic(p)
	}
}

func startGrownStacks() {
	grownStacks.jobs = make(chan *grownJob) // unbuffered: only an idle worker takes a job
	for range runtime.GOMAXPROCS(0) {
		go runGrownJobs()
	}
}

func runGrownJobs() {
	for j := range grownStacks.jobs {
		runGrownJob(j)
	}
}

func runGrownJob(j *grownJob) {
	defer func() {
		j.panicked = recover()
		j.done <- struct{}{}
	}()
	j.fn()
}
