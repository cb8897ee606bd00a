package result

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// CollectMeta describes this process and machine, with args (os.Args) as
// the command and now as the start. The caller may set Start again when
// the measurement proper begins.
func CollectMeta(args []string) Meta {
	host, _ := os.Hostname()
	return Meta{
		Commit:    commit(),
		GoVersion: runtime.Version(),
		CPUModel:  cpuModel("/proc/cpuinfo"),
		CPUs:      runtime.NumCPU(),
		Start:     time.Now().UTC(),
		Host:      host,
		Command:   commandLine(args),
	}
}

// commit returns the source revision: the one the go command stamped into
// the binary, or else (go run and go test do not stamp one) what git says
// about the working directory, or "unknown".
func commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if dirty {
				rev += "+dirty"
			}
			return rev
		}
	}
	if rev := gitCommit(); rev != "" {
		return rev
	}
	return "unknown"
}

// gitCommit asks git for HEAD and whether tracked files changed, giving up
// after two seconds: the metadata is not worth a slow start.
func gitCommit() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return rev
	}
	if len(strings.TrimSpace(string(status))) > 0 {
		rev += "+dirty"
	}
	return rev
}

// cpuModel returns the first "model name" of a /proc/cpuinfo file, or the
// architecture where there is none (ARM kernels often leave it out).
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			if v := strings.TrimSpace(value); v != "" {
				return v
			}
		}
	}
	return runtime.GOARCH
}

// commandLine joins args as a shell would need them typed, quoting those
// with spaces or shell metacharacters, so the command can be run again.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
