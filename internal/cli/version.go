package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Version is set at build time with -ldflags "-X .../cli.Version=v1.2.3".
var Version = "dev"

// commit is the commit strait was built from, when the build stamps it:
//
//	go build -ldflags "-X github.com/straitgw/strait/internal/cli.commit=$(git rev-parse --short=12 HEAD)" ./cmd/strait
//
// scripts/test does. Without it the go command's own VCS stamp is used,
// which is missing with -buildvcs=false (some environments set it in
// GOFLAGS) and outside a git checkout.
var commit = ""

// commitHint says how to get a commit into `strait version`.
const commitHint = `commit unknown: the go command records it only when building in a git checkout without -buildvcs=false (check GOFLAGS); or stamp it:
  go build -ldflags "-X github.com/straitgw/strait/internal/cli.commit=$(git rev-parse --short=12 HEAD)" -o strait ./cmd/strait`

func versionString() string { return versionFrom(commit, buildSettings()) }

func buildSettings() []debug.BuildSetting {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Settings
	}
	return nil
}

// versionFrom formats the version line from the stamped commit, if any,
// else the go command's VCS settings.
func versionFrom(stamped string, settings []debug.BuildSetting) string {
	rev := revision(stamped, settings)
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("strait %s (commit %s, %s, %s/%s)", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// revision is the commit strait was built from: the stamped one, else the
// go command's (with "+dirty" for a modified tree), else "".
func revision(stamped string, settings []debug.BuildSetting) string {
	if stamped != "" {
		return stamped
	}
	rev, dirty := "", ""
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
			if len(rev) > 12 {
				rev = rev[:12]
			}
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stdout, stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionString())
	if revision(commit, buildSettings()) == "" {
		// On stderr: stdout stays the one line scripts read.
		fmt.Fprintln(stderr, commitHint)
	}
	return nil
}
