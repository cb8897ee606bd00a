// Package redistest starts a real redis-server for tests, on a free
// loopback port with its files in a temporary directory.
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Stop kills the server (to test what happens when Redis goes away).
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// Start starts redis-server for the test and stops it at cleanup. Without
// redis-server on the PATH the test is skipped, or fails under
// STRAIT_REQUIRE_INTEROP=1 (test/interop/install-deps.sh installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (apt-get install redis-server; test/interop/install-deps.sh installs it)"
		if os.Getenv("STRAIT_REQUIRE_INTEROP") == "1" {
			t.Fatal(msg + "; STRAIT_REQUIRE_INTEROP=1 forbids skipping")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
		if err := waitUp(s.Addr, cmd); err == nil {
			t.Cleanup(s.Stop)
			return s
		} else if try >= 3 {
			s.Stop()
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server did not start: %v\n%s", err, log)
		}
		s.Stop()
	}
}

// waitUp waits until the server answers PING.
func waitUp(addr string, cmd *exec.Cmd) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			buf := make([]byte, 7)
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return nil
			}
		}
		if cmd.ProcessState != nil {
			return fmt.Errorf("exited: %v", cmd.ProcessState)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no answer on %s", addr)
}
