package procstat

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/bench/result"
)

// sampleEvery is how often a Watch samples resident memory when it cannot
// reset the kernel's peak. A spike shorter than this can be missed.
const sampleEvery = 100 * time.Millisecond

// Watch measures what a set of processes use between Start and Stop: their
// CPU time, and their peak resident memory.
//
// The kernel keeps each process's peak (VmHWM) since it started, which
// would count start-up and earlier runs. So Start resets it, by writing 5
// to /proc/PID/clear_refs, which needs the right to ptrace the process
// (the same user, usually). Where that is refused, the Watch samples
// VmRSS every 100 ms instead and takes the largest sample.
type Watch struct {
	procs []*watched

	mu      sync.Mutex // guards the fields below and the watched peaks
	started bool
	stopped bool
	stop    chan struct{}
	done    chan struct{}
}

type watched struct {
	pid      int
	name     string
	started  int64 // its start time: a different one means the PID was reused
	startCPU time.Duration
	hwmReset bool  // the kernel's peak was reset at Start
	peak     int64 // the largest RSS sampled
}

// NewWatch prepares to watch the processes pids. It fails, naming the
// process, if one does not exist or cannot be read, or is listed twice.
func NewWatch(pids []int) (*Watch, error) {
	w := &Watch{}
	seen := map[int]bool{}
	for _, pid := range pids {
		if pid <= 0 {
			return nil, fmt.Errorf("cannot watch process %d: a PID is a positive number", pid)
		}
		if seen[pid] {
			return nil, fmt.Errorf("process %d is listed twice", pid)
		}
		seen[pid] = true
		if _, err := Read(pid); err != nil {
			return nil, fmt.Errorf("cannot watch: %w", err)
		}
		w.procs = append(w.procs, &watched{pid: pid})
	}
	return w, nil
}

// Start begins the measurement: it notes each process's name and CPU time
// and resets its peak memory.
func (w *Watch) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("procstat: Watch started twice")
	}
	for _, p := range w.procs {
		name, err := readName(p.pid)
		if err != nil {
			return err
		}
		p.name = name
		p.hwmReset = resetPeak(p.pid)
		cpu, started, err := readCPU(p.pid)
		if err != nil {
			return err
		}
		rss, _, err := readMemory(p.pid)
		if err != nil {
			return err
		}
		p.startCPU, p.started, p.peak = cpu, started, rss
	}
	w.started = true
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.sample()
	return nil
}

// resetPeak asks the kernel to reset pid's VmHWM to its current RSS and
// reports whether it could.
func resetPeak(pid int) bool {
	f, err := os.OpenFile(procPath(pid, "clear_refs"), os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_, err = f.Write([]byte("5"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil
}

// sample records each process's RSS every sampleEvery until Stop.
func (w *Watch) sample() {
	defer close(w.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		for _, p := range w.procs {
			// A process that exited is reported by Stop; here it just
			// has no sample.
			if rss, _, err := readMemory(p.pid); err == nil {
				p.peak = max(p.peak, rss)
			}
		}
		w.mu.Unlock()
	}
}

// Stop ends the measurement and returns, for each process in the order
// given to NewWatch, the CPU time used since Start and the peak resident
// memory. The sizing coefficients are left for the caller, which knows the
// traffic (result.Process.SetTraffic). A process that exited in between
// makes Stop fail: its CPU time is gone with it.
func (w *Watch) Stop() ([]result.Process, error) {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.mu.Unlock()
		return nil, errors.New("procstat: Watch stopped twice, or without a Start")
	}
	w.stopped = true
	close(w.stop)
	w.mu.Unlock()
	<-w.done

	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]result.Process, 0, len(w.procs))
	var errs []error
	for _, p := range w.procs {
		cpu, started, err := readCPU(p.pid)
		if err == nil && started != p.started {
			err = fmt.Errorf("PID %d now belongs to another process: %w", p.pid, ErrNoProcess)
		}
		var rss, hwm int64
		if err == nil {
			rss, hwm, err = readMemory(p.pid)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("process %d (%s) ended during the measurement, so its CPU time is lost: %w", p.pid, p.name, err))
			continue
		}
		peak := max(p.peak, rss)
		if p.hwmReset {
			peak = max(peak, hwm)
		}
		out = append(out, result.Process{
			PID:          p.pid,
			Name:         p.name,
			CPUSeconds:   (cpu - p.startCPU).Seconds(),
			PeakRSSBytes: peak,
		})
	}
	return out, errors.Join(errs...)
}
