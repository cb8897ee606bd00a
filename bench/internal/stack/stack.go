// Package stack runs what the programs under bench/ measure: `strait
// broker` and, in front of it, `strait run` with one virtual cluster and
// no filters, each a subprocess of a built strait binary.
package stack

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Stack is a broker and a gateway in front of it.
type Stack struct {
	// Direct is the broker's address, Gateway the virtual cluster's
	// bootstrap address and Admin the gateway's admin listener.
	Direct, Gateway, Admin string
	broker, gateway        *exec.Cmd
	dir                    string
}

// Start starts `strait broker --brokers 1 --listen 127.0.0.1:brokerPort`
// with brokerArgs added, and a gateway on gatewayPort (admin on
// gatewayPort+2000) in front of it, and waits until both accept
// connections. Stop ends them.
func Start(strait string, brokerPort, gatewayPort int, brokerArgs ...string) (*Stack, error) {
	dir, err := os.MkdirTemp("", "strait-bench-")
	if err != nil {
		return nil, err
	}
	s := &Stack{
		Direct:  fmt.Sprintf("127.0.0.1:%d", brokerPort),
		Gateway: fmt.Sprintf("127.0.0.1:%d", gatewayPort),
		Admin:   fmt.Sprintf("127.0.0.1:%d", gatewayPort+2000),
		dir:     dir,
	}
	fail := func(err error) (*Stack, error) { s.Stop(); return nil, err }
	s.broker = exec.Command(strait, append([]string{"broker", "--brokers", "1", "--listen", s.Direct}, brokerArgs...)...)
	s.broker.Stderr = os.Stderr
	if err := s.broker.Start(); err != nil {
		s.broker = nil
		return fail(err)
	}
	cfg := fmt.Sprintf(`log: {level: warn}
admin: {listen: %q}
clusters:
  bench: {bootstrap_servers: [%q]}
virtual_clusters:
  - {name: bench, cluster: bench, listen: %q}
`, s.Admin, s.Direct, s.Gateway)
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fail(err)
	}
	s.gateway = exec.Command(strait, "run", "-c", cfgPath)
	s.gateway.Stderr = os.Stderr
	if err := s.gateway.Start(); err != nil {
		s.gateway = nil
		return fail(err)
	}
	for _, addr := range []string{s.Direct, s.Gateway} {
		if err := waitPort(addr); err != nil {
			return fail(err)
		}
	}
	return s, nil
}

// GatewayPID is the gateway process's id.
func (s *Stack) GatewayPID() int { return s.gateway.Process.Pid }

// Stop ends the gateway and the broker and removes their files.
func (s *Stack) Stop() {
	for _, c := range []*exec.Cmd{s.gateway, s.broker} {
		if c != nil {
			stop(c)
		}
	}
	os.RemoveAll(s.dir)
}

func waitPort(addr string) error {
	for range 100 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s never came up", addr)
}

// stop asks c to end, and kills it if it has not within 10 s.
func stop(c *exec.Cmd) {
	c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.Process.Kill()
	}
}
