package cli

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// selfCommand is how to run this strait again, for the commands we print
// for the user to copy: see invokedAs.
var selfCommand = sync.OnceValue(func() string { return invokedAs(os.Args[0]) })

// invokedAs turns the program name strait was started with into a command
// that starts it again from the same directory. Under `go run` that name is
// a binary in the go command's temporary build directory or its build
// cache, so the command is `go run ./cmd/strait` (run from the
// module root, as the README does). Otherwise it is the name as typed:
// "strait" when the shell found it on the PATH, "./strait" or a full path
// when it was given one.
func invokedAs(argv0 string) string {
	if argv0 == "" {
		return "strait"
	}
	slashed := filepath.ToSlash(argv0)
	dir := filepath.ToSlash(filepath.Dir(argv0))
	// Before Go 1.24 `go run` built into $TMPDIR/go-buildNNN/bNNN/exe/;
	// since then it keeps the binary in the build cache,
	// $GOCACHE/xx/<hash>-d/strait, where it outlives the run but is not
	// a command anyone would type.
	if strings.Contains(slashed, "/go-build") && (strings.HasSuffix(dir, "/exe") || strings.HasSuffix(dir, "-d") && strings.Contains(slashed, "/go-build/")) {
		return "go run ./cmd/strait"
	}
	return shellQuote(argv0)
}

// shellQuote quotes s for a POSIX shell if it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:=@%,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
