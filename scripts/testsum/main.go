// Command testsum reads `go test -json` on stdin and prints what `go test`
// without -v would (package results, and the output of failing tests only),
// then lists the tests that were skipped and why. scripts/test uses it so
// that a missing interop client does not go unnoticed in a passing run.
//
//	go test -json ./... | testsum [-skipped FILE]
//
// With -skipped, the list is appended to FILE instead of printed, for a
// script that runs go test more than once and lists every skip at the end.
// It exits 1 if a test, a package or a build failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail events
}

type testKey struct{ pkg, test string }

// skip is a skipped test and the reason it logged.
type skip struct {
	pkg, test, reason string
}

type summarizer struct {
	out    io.Writer
	held   map[testKey][]string // the output of each test still running
	skips  []skip
	failed bool
}

func main() {
	skippedFile := flag.String("skipped", "", "append the list of skipped tests to this file instead of printing it")
	flag.Parse()
	s := newSummarizer(os.Stdout)
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(1)
	}
	if *skippedFile != "" {
		f, err := os.OpenFile(*skippedFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(1)
		}
		s.writeSkips(f)
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(1)
		}
	} else if len(s.skips) > 0 {
		fmt.Fprintf(os.Stdout, "\n%d tests skipped:\n", len(s.skips))
		s.writeSkips(os.Stdout)
	}
	if s.failed {
		os.Exit(1)
	}
}

func newSummarizer(out io.Writer) *summarizer {
	return &summarizer{out: out, held: make(map[testKey][]string)}
}

func (s *summarizer) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event (the go command's own messages): as is.
			fmt.Fprintf(s.out, "%s\n", line)
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

// progress lines that -json adds and plain `go test` does not print.
var progress = regexp.MustCompile(`^\s*=== (RUN|PAUSE|CONT|NAME)\s`)

func (s *summarizer) handle(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
		return
	case "build-fail":
		s.failed = true
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(s.out, e.Output)
			}
		case "fail":
			s.failed = true
			// A test binary that panicked or timed out ends tests
			// that never report their own end: show what they said.
			for k, lines := range s.held {
				if k.pkg == e.Package {
					s.print(lines)
					delete(s.held, k)
				}
			}
		}
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		if !progress.MatchString(e.Output) {
			s.held[k] = append(s.held[k], e.Output)
		}
	case "fail":
		s.failed = true
		s.print(s.held[k])
		delete(s.held, k)
	case "skip":
		s.skips = append(s.skips, skip{e.Package, e.Test, skipReason(s.held[k])})
		delete(s.held, k)
	case "pass":
		delete(s.held, k)
	}
}

func (s *summarizer) print(lines []string) {
	for _, l := range lines {
		fmt.Fprint(s.out, l)
	}
}

// fileLine is the file:line prefix the testing package puts on t.Log lines.
var fileLine = regexp.MustCompile(`^[\w./-]+\.go:\d+: `)

// skipReason is the last thing a skipped test logged (what it gave t.Skip,
// as a rule), without its file:line prefix, continuation lines joined.
func skipReason(lines []string) string {
	var entry []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || strings.HasPrefix(t, "--- SKIP: "):
		case fileLine.MatchString(t):
			entry = []string{fileLine.ReplaceAllString(t, "")}
		default:
			entry = append(entry, t)
		}
	}
	if len(entry) == 0 {
		return "(no reason given)"
	}
	return strings.Join(entry, " ")
}

func (s *summarizer) writeSkips(w io.Writer) {
	for _, sk := range s.skips {
		fmt.Fprintf(w, "  %s %s: %s\n", sk.pkg, sk.test, sk.reason)
	}
}
