package cli

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	for _, tt := range []struct {
		name     string
		stamped  string
		settings []debug.BuildSetting
		want     string
	}{
		{"the go command's stamp", "", vcs, "(commit 0123456789ab+dirty, "},
		{"an ldflags stamp wins", "fedcba987654+dirty", vcs, "(commit fedcba987654+dirty, "},
		{"an ldflags stamp with -buildvcs=false", "fedcba987654", nil, "(commit fedcba987654, "},
		{"no stamp at all", "", nil, "(commit unknown, "},
	} {
		if got := versionFrom(tt.stamped, tt.settings); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q does not contain %q", tt.name, got, tt.want)
		}
	}
}

// `strait version` stamped with -ldflags -X .../cli.commit names the commit,
// also when the go command stamped none (-buildvcs=false); unstamped, it
// says on stderr how to stamp it, and stdout stays one line.
func TestVersionCommitStamp(t *testing.T) {
	saved := commit
	defer func() { commit = saved }()

	commit = "abcdef012345"
	var out, errOut bytes.Buffer
	if err := runVersion(context.Background(), nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(commit abcdef012345, ") || errOut.Len() != 0 {
		t.Errorf("stamped: stdout %q, stderr %q", out.String(), errOut.String())
	}

	commit = ""
	out.Reset()
	errOut.Reset()
	if err := runVersion(context.Background(), nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("stdout is not one line: %q", out.String())
	}
	if revision(commit, buildSettings()) != "" {
		if errOut.Len() != 0 {
			t.Errorf("the build has a VCS stamp, yet stderr says %q", errOut.String())
		}
		return
	}
	if !strings.Contains(out.String(), "(commit unknown, ") || !strings.Contains(errOut.String(), `-ldflags "-X github.com/straitgw/strait/internal/cli.commit=`) {
		t.Errorf("unstamped: stdout %q, stderr %q; want commit unknown and how to stamp it", out.String(), errOut.String())
	}
}
