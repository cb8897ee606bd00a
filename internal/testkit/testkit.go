// Package testkit holds helpers shared by Strait's tests across packages:
// free loopback port blocks, a goroutine-safe log buffer, and a throwaway
// certificate authority. Only test code may import it (internal/archtest
// enforces that); it imports nothing of Strait's.
package testkit

import (
	"bytes"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Range is a closed range of ports.
type Range struct{ Lo, Hi int }

var taken = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// PortBlock returns the first of n consecutive ports on 127.0.0.1 that are
// free now and inside none of the avoid ranges. Blocks come from
// 20000-31999: below Linux's ephemeral range (32768 and up), so outgoing
// connections, whose ports linger in TIME_WAIT, never take them between
// this check and the caller's bind, with room for a gateway's default 1000
// node ports above a bootstrap port. No port is handed out twice in one
// test binary.
func PortBlock(tb testing.TB, n int, avoid ...Range) int {
	tb.Helper()
	taken.Lock()
	defer taken.Unlock()
	usable := func(p int) bool {
		for _, r := range avoid {
			if p >= r.Lo && p <= r.Hi {
				return false
			}
		}
		if taken.m[p] {
			return false
		}
		ln, err := net.Listen("tcp", Addr(p))
		if err != nil {
			return false
		}
		ln.Close()
		return true
	}
	for range 500 {
		base := 20000 + rand.IntN(12000-n)
		ok := true
		for p := base; p < base+n && ok; p++ {
			ok = usable(p)
		}
		if !ok {
			continue
		}
		for p := base; p < base+n; p++ {
			taken.m[p] = true
		}
		return base
	}
	tb.Fatalf("found no %d consecutive free ports", n)
	return 0
}

// Addr is 127.0.0.1:port.
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// SyncBuffer is a bytes.Buffer that goroutines (a logger, a subprocess's
// output) may write while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Len returns the number of bytes written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
