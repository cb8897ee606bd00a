// Package procstat measures what Linux processes use while a benchmark
// runs: CPU time from /proc/PID/stat and resident memory from
// /proc/PID/status. The harness watches the gateway (and brokers) with it
// to turn a run into sizing figures: CPU per MB/s of traffic and peak
// memory.
//
// It imports only internal/bench/result of ours, whose Process it fills.
package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/PID/stat: USER_HZ,
// which Linux fixes at 100 on every architecture whatever the kernel's own
// tick rate, so the resolution is 10 ms.
const clockTicks = 100

// procRoot is where the proc file system is; tests point it elsewhere.
var procRoot = "/proc"

// Sample is what a process had used at one moment.
type Sample struct {
	// CPU is the user plus system CPU time the process has used since it
	// started, to 10 ms.
	CPU time.Duration
	// RSS is its resident memory now, PeakRSS the most it has had since it
	// started or since its peak was last reset; both in bytes.
	RSS, PeakRSS int64
}

// Read samples process pid.
func Read(pid int) (Sample, error) {
	cpu, _, err := readCPU(pid)
	if err != nil {
		return Sample{}, err
	}
	rss, peak, err := readMemory(pid)
	if err != nil {
		return Sample{}, err
	}
	return Sample{CPU: cpu, RSS: rss, PeakRSS: peak}, nil
}

// readCPU returns the CPU time of pid and when it started (in clock ticks
// since boot: with the PID, it names one process, as PIDs are reused) from
// /proc/PID/stat.
func readCPU(pid int) (cpu time.Duration, started int64, err error) {
	data, err := os.ReadFile(procPath(pid, "stat"))
	if err != nil {
		return 0, 0, procError(pid, err)
	}
	cpu, started, err = parseStat(data)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %s: %w", pid, procPath(pid, "stat"), err)
	}
	return cpu, started, nil
}

// parseStat returns utime+stime and starttime from the contents of a
// /proc/PID/stat file.
func parseStat(data []byte) (cpu time.Duration, started int64, err error) {
	// The second field is the command name in parentheses, and the name
	// may itself hold spaces and parentheses: the fields after it start
	// after the last ')'.
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, 0, errors.New("no ')' after the command name")
	}
	fields := strings.Fields(string(data[end+1:]))
	// fields[0] is field 3 (state); utime, stime and starttime are fields
	// 14, 15 and 22 (proc(5)).
	const utime, stime, starttime = 14 - 3, 15 - 3, 22 - 3
	if len(fields) <= starttime {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least %d", len(fields), starttime+1)
	}
	var v [3]int64
	for j, i := range []int{utime, stime, starttime} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("field %d: %w", i+3, err)
		}
		v[j] = n
	}
	return time.Duration(v[0]+v[1]) * time.Second / clockTicks, v[2], nil
}

// readMemory returns VmRSS and VmHWM of pid, in bytes.
func readMemory(pid int) (rss, peak int64, err error) {
	data, err := os.ReadFile(procPath(pid, "status"))
	if err != nil {
		return 0, 0, procError(pid, err)
	}
	rss, peak, err = parseStatus(data)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %s: %w", pid, procPath(pid, "status"), err)
	}
	return rss, peak, nil
}

// parseStatus returns VmRSS and VmHWM, in bytes, from the contents of a
// /proc/PID/status file. A kernel thread has neither and gets 0.
func parseStatus(data []byte) (rss, peak int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		// "VmRSS:	   12345 kB"
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("%s: %q, want a number of kB", key, strings.TrimSpace(value))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmRSS" {
			rss = kb * 1024
		} else {
			peak = kb * 1024
		}
	}
	return rss, peak, sc.Err()
}

// readName returns the command name of pid from /proc/PID/comm.
func readName(pid int) (string, error) {
	data, err := os.ReadFile(procPath(pid, "comm"))
	if err != nil {
		return "", procError(pid, err)
	}
	return strings.TrimSpace(string(data)), nil
}

func procPath(pid int, file string) string {
	return procRoot + "/" + strconv.Itoa(pid) + "/" + file
}

// procError explains a failure to read a process's /proc file.
func procError(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("process %d does not exist (no %s/%d): check the PID; it must be a process on this machine: %w", pid, procRoot, pid, ErrNoProcess)
	}
	return fmt.Errorf("process %d: %w", pid, err)
}

// ErrNoProcess is wrapped by errors about a process that does not exist,
// or no longer does.
var ErrNoProcess = errors.New("no such process")
