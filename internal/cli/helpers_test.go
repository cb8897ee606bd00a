package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
)

// The binary the end-to-end tests run, built once by TestMain, and the
// module root, their working directory (so examples/... paths work as the
// README writes them).
var (
	straitBin  string
	moduleRoot string
)

const (
	// readyTimeout bounds waiting for a subprocess to listen or log.
	readyTimeout = 20 * time.Second
	// killGrace is how long a subprocess gets after SIGTERM at cleanup
	// before it is killed.
	killGrace = 5 * time.Second
	// kcatTimeout bounds one kcat run.
	kcatTimeout = 30 * time.Second
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if testing.Short() {
		return m.Run() // end-to-end tests skip themselves
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		fmt.Fprintf(os.Stderr, "cannot find the module root with 'go env GOMOD': %v\n", err)
		return 1
	}
	moduleRoot = filepath.Dir(strings.TrimSpace(string(gomod)))
	dir, err := os.MkdirTemp("", "strait-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	straitBin = filepath.Join(dir, "strait")
	build := exec.Command("go", "build", "-o", straitBin, "./cmd/strait")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/strait: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// needBinary skips end-to-end tests in -short mode.
func needBinary(t *testing.T) {
	t.Helper()
	if straitBin == "" {
		t.Skip("end-to-end test: skipped in -short mode")
	}
}

// requireInterop reports whether interop tests must not be skipped (CI).
func requireInterop() bool { return os.Getenv("STRAIT_REQUIRE_INTEROP") == "1" }

// needKcat skips the test when kcat is missing, or fails it when
// STRAIT_REQUIRE_INTEROP=1.
func needKcat(t *testing.T) {
	t.Helper()
	needBinary(t)
	if _, err := exec.LookPath("kcat"); err != nil {
		if requireInterop() {
			t.Fatalf("kcat is not installed and STRAIT_REQUIRE_INTEROP=1 (apt-get install kcat): %v", err)
		}
		t.Skipf("kcat is not installed (apt-get install kcat): %v", err)
	}
}

// proc is a strait subprocess.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout *testkit.SyncBuffer
	stderr *testkit.SyncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before done is closed
}

// startStrait starts the strait binary with args in the module root. At
// cleanup the process gets SIGTERM, then SIGKILL after killGrace; if the
// test failed its output is logged.
func startStrait(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{
		t:      t,
		name:   "strait " + strings.Join(args, " "),
		stdout: &testkit.SyncBuffer{},
		stderr: &testkit.SyncBuffer{},
		done:   make(chan struct{}),
	}
	p.cmd = exec.Command(straitBin, args...)
	p.cmd.Dir = moduleRoot
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s (%s)\n--- stdout:\n%s--- stderr:\n%s", p.name, p.state(), p.stdout, p.stderr)
		}
	})
	return p
}

// stop ends the process if it is still running: SIGTERM, then SIGKILL.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(killGrace):
	}
	p.t.Logf("%s did not stop within %v of SIGTERM; killing it", p.name, killGrace)
	p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) state() string {
	if !p.exited() {
		return "running"
	}
	if p.err == nil {
		return "exit 0"
	}
	return p.err.Error()
}

// exitCode returns the exit code; the process must have exited.
func (p *proc) exitCode() int {
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}

// signalAndWait sends sig and fails the test unless the process exits 0
// within timeout.
func (p *proc) signalAndWait(sig os.Signal, timeout time.Duration) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of %v", p.name, timeout, sig)
	}
	if code := p.exitCode(); code != 0 {
		p.t.Fatalf("%s exited with %s after %v, want exit 0", p.name, p.state(), sig)
	}
}

// listening waits until every addr accepts TCP connections. It fails if
// the process exits first or readyTimeout passes.
func (p *proc) listening(addrs ...string) error {
	deadline := time.Now().Add(readyTimeout)
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if p.exited() {
				return fmt.Errorf("%s exited (%s) before listening on %s", p.name, p.state(), addr)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s is not listening on %s after %v: %v", p.name, addr, readyTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// waitListening is listening that fails the test.
func (p *proc) waitListening(addrs ...string) {
	p.t.Helper()
	if err := p.listening(addrs...); err != nil {
		p.t.Fatal(err)
	}
}

// printed waits until out (the process's stdout or stderr) contains want.
// It fails if the process exits without printing it or timeout passes.
func (p *proc) printed(out *testkit.SyncBuffer, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		exited := p.exited() // before reading: output is complete once exited
		if strings.Contains(out.String(), want) {
			return nil
		}
		if exited {
			return fmt.Errorf("%s exited (%s) without printing %q", p.name, p.state(), want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not print %q within %v", p.name, want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitOutput is printed that fails the test.
func (p *proc) waitOutput(out *testkit.SyncBuffer, want string, timeout time.Duration) {
	p.t.Helper()
	if err := p.printed(out, want, timeout); err != nil {
		p.t.Fatal(err)
	}
}

// portClash reports whether the process exited because a port was taken.
func (p *proc) portClash() bool {
	s := p.stderr.String()
	return p.exited() && (strings.Contains(s, "address already in use") || strings.Contains(s, "port is already in use"))
}

// startOnFreePorts calls start, which picks free ports, starts a process on
// them and waits until it is ready. Ports are checked free before they are
// used, but another program may take one in between: then start is tried
// again with other ports, at most three times in all.
func startOnFreePorts(t *testing.T, start func() (*proc, error)) *proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := start()
		if err == nil {
			return p
		}
		if attempt == 3 || p == nil || !p.portClash() {
			t.Fatal(err)
		}
		t.Logf("attempt %d: a port was taken meanwhile, trying other ports: %v", attempt, err)
	}
}

// kcatResult is one kcat run.
type kcatResult struct {
	stdout, stderr string
	err            error
}

// kcat runs kcat with args and stdin, killing it after kcatTimeout.
func kcat(t *testing.T, stdin string, args ...string) kcatResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s did not finish within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), kcatTimeout, out.String(), errOut.String())
	}
	return kcatResult{out.String(), errOut.String(), err}
}

// mustKcat is kcat that fails the test unless kcat exits 0.
func mustKcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := kcat(t, stdin, args...)
	if r.err != nil {
		t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

var kcatBrokerRE = regexp.MustCompile(`(?m)^\s*broker (-?\d+) at (\S+)`)

// kcatBrokers returns the broker addresses in `kcat -L` output, by node id.
func kcatBrokers(t *testing.T, metadata string) map[int]string {
	t.Helper()
	brokers := map[int]string{}
	for _, m := range kcatBrokerRE.FindAllStringSubmatch(metadata, -1) {
		id, _ := strconv.Atoi(m[1])
		brokers[id] = m[2]
	}
	if len(brokers) == 0 {
		t.Fatalf("kcat -L listed no brokers:\n%s", metadata)
	}
	return brokers
}

// keyedRecords returns n "key:value" lines for kcat -P -K: and the
// "key=value" lines kcat -C -f '%k=%s\n' prints for them, sorted.
func keyedRecords(prefix string, n int) (input string, want []string) {
	var b strings.Builder
	for i := range n {
		k, v := fmt.Sprintf("%s-key-%02d", prefix, i), fmt.Sprintf("value %d of %s", i, prefix)
		fmt.Fprintf(&b, "%s:%s\n", k, v)
		want = append(want, k+"="+v)
	}
	slices.Sort(want)
	return b.String(), want
}

// consumeAll reads topic from the beginning to its end with kcat and
// returns the "key=value" lines, sorted.
func consumeAll(t *testing.T, bootstrap, topic string) []string {
	t.Helper()
	out := mustKcat(t, "", "-b", bootstrap, "-t", topic, "-C", "-e", "-o", "beginning", "-q", "-m", "10", "-f", `%k=%s\n`)
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	slices.Sort(got)
	return got
}

// httpGet fetches url with a short timeout.
func httpGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// canListen reports whether addr can be bound now.
func canListen(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// closedPort returns a port on 127.0.0.1 that nothing listens on: one the
// system just handed out and that was closed again.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
