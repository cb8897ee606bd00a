package procstat

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 250 and stime 130
	// ticks (3.8 s), starttime 696716.
	stat := "28041 (my (odd) proc) R 27967 27967 21406 0 -1 4194304 97 0 0 0 250 130 0 0 20 0 1 0 696716 3133440 358 18446744073709551615\n"
	cpu, started, err := parseStat([]byte(stat))
	if err != nil || cpu != 3800*time.Millisecond || started != 696716 {
		t.Errorf("parseStat = %v, %d, %v; want 3.8s, 696716", cpu, started, err)
	}
	for _, bad := range []string{"28041 no parenthesis 1 2 3", "28041 (short) R 1 2", "28041 (x) R 1 1 1 0 -1 0 0 0 0 0 ten 1 0 0 20 0 1 0 5"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tstrait\nVmPeak:\t  900000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n"
	rss, peak, err := parseStatus([]byte(status))
	if err != nil || rss != 40960*1024 || peak != 51200*1024 {
		t.Errorf("parseStatus = %d, %d, %v; want 40 MiB, 50 MiB", rss, peak, err)
	}
	// A kernel thread has no Vm lines.
	if rss, peak, err := parseStatus([]byte("Name:\tkthreadd\nState:\tS\n")); err != nil || rss != 0 || peak != 0 {
		t.Errorf("kernel thread: %d, %d, %v; want 0, 0, nil", rss, peak, err)
	}
	if _, _, err := parseStatus([]byte("VmRSS:\t12 MB\n")); err == nil {
		t.Error("a size not in kB was accepted")
	}
}

// burn uses at least want of CPU time, as the kernel counts it, giving up
// after ten seconds of wall time.
func burn(t *testing.T, want time.Duration) {
	t.Helper()
	before, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := uint64(1)
	for time.Now().Before(deadline) {
		for range 1_000_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		now, err := Read(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now.CPU-before.CPU >= want {
			return
		}
	}
	t.Fatalf("could not use %v of CPU in 10s (x=%d)", want, x)
}

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.PeakRSS < s.RSS {
		t.Errorf("Read(self) = %+v: want RSS > 0 and peak >= RSS", s)
	}
}

func TestReadMissingProcess(t *testing.T) {
	pid := exitedPID(t)
	_, err := Read(pid)
	if !errors.Is(err, ErrNoProcess) || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("Read of an exited process: %v, want ErrNoProcess naming %d", err, pid)
	}
	if _, err := NewWatch([]int{os.Getpid(), pid}); err == nil || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("NewWatch with an exited process: %v, want an error naming %d", err, pid)
	}
}

// exitedPID returns the PID of a process that has exited and been reaped.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

func TestNewWatchRejects(t *testing.T) {
	self := os.Getpid()
	for _, pids := range [][]int{{self, self}, {0}, {-3}} {
		if _, err := NewWatch(pids); err == nil {
			t.Errorf("NewWatch(%v) succeeded, want an error", pids)
		}
	}
}

func TestWatchSelf(t *testing.T) {
	w, err := NewWatch([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Stop(); err == nil {
		t.Error("Stop before Start succeeded")
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
	burn(t, 50*time.Millisecond)
	// Touch 64 MiB so that the peak must include it.
	big := make([]byte, 64<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	procs, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(big)
	if len(procs) != 1 {
		t.Fatalf("Stop returned %d processes, want 1", len(procs))
	}
	p := procs[0]
	comm, _ := os.ReadFile("/proc/self/comm")
	if p.PID != os.Getpid() || p.Name != strings.TrimSpace(string(comm)) {
		t.Errorf("process %d %q, want %d %q", p.PID, p.Name, os.Getpid(), strings.TrimSpace(string(comm)))
	}
	if p.CPUSeconds < 0.05 {
		t.Errorf("CPU %v s, want at least the 0.05 s burnt", p.CPUSeconds)
	}
	if p.PeakRSSBytes < 64<<20 {
		t.Errorf("peak RSS %d, want at least the 64 MiB touched", p.PeakRSSBytes)
	}
	if _, err := w.Stop(); err == nil {
		t.Error("a second Stop succeeded")
	}
}

func TestWatchProcessThatExits(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot run sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	w, err := NewWatch([]int{os.Getpid(), cmd.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	procs, err := w.Stop()
	if !errors.Is(err, ErrNoProcess) || !strings.Contains(err.Error(), "sleep") {
		t.Errorf("Stop after the process exited: %v, want ErrNoProcess naming sleep", err)
	}
	if len(procs) != 1 || procs[0].PID != os.Getpid() {
		t.Errorf("Stop returned %+v, want the process still running", procs)
	}
}

func TestWatchDetectsReusedPID(t *testing.T) {
	// A fake /proc where process 7 is replaced by another between Start
	// and Stop.
	root := t.TempDir()
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	dir := filepath.Join(root, "7")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(utime, start int) string {
		return "7 (gw) S 1 1 1 0 -1 0 0 0 0 0 " + strconv.Itoa(utime) + " 0 0 0 20 0 1 0 " + strconv.Itoa(start) + " 0 0\n"
	}
	write("stat", stat(100, 5000))
	write("status", "VmHWM:\t2048 kB\nVmRSS:\t1024 kB\n")
	write("comm", "gw\n")
	w, err := NewWatch([]int{7})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	write("stat", stat(350, 5000))
	procs, err := w.Stop()
	// 250 ticks = 2.5 s. The fake /proc has no clear_refs to reset the
	// peak with, so the peak is the sampled RSS, not the lifetime VmHWM.
	if err != nil || len(procs) != 1 || procs[0].CPUSeconds != 2.5 || procs[0].Name != "gw" || procs[0].PeakRSSBytes != 1024*1024 {
		t.Fatalf("Stop = %+v, %v; want gw with 2.5 s of CPU and a 1 MiB peak", procs, err)
	}

	w, _ = NewWatch([]int{7})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	write("stat", stat(10, 9000)) // a new process with the same PID
	if _, err := w.Stop(); !errors.Is(err, ErrNoProcess) || !strings.Contains(err.Error(), "another process") {
		t.Errorf("Stop with a reused PID: %v, want an error saying so", err)
	}
}
