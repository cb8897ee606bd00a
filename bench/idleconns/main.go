// Command idleconns measures the gateway's memory per idle Kafka
// connection: it starts `strait broker` and `strait run` (plain relay, no
// filters) as subprocesses of a built strait binary, opens -conns client
// connections to the gateway, sends one ApiVersions request on each and
// reads its answer (so each is a live client and broker socket pair), then
// leaves them idle and reports the gateway's resident memory before and
// after, and per connection pair.
//
//	go build -o bin/strait ./cmd/strait && go run ./bench/idleconns -strait bin/strait -conns 5000
//
// Each connection costs four file descriptors on this host (client, the
// gateway's two sockets, the broker's), so -conns is bounded by the open
// files limit of the processes.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/straitgw/strait/bench/internal/stack"
	"github.com/straitgw/strait/internal/bench/procstat"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	strait := flag.String("strait", "bin/strait", "path to a built strait binary")
	conns := flag.Int("conns", 5000, "idle connections to open")
	brokerPort := flag.Int("broker-port", 29092, "broker port")
	gatewayPort := flag.Int("gateway-port", 29192, "gateway bootstrap port")
	settle := flag.Duration("settle", 5*time.Second, "wait before measuring, after the last connection")
	gc := flag.Bool("gc", false, "have the gateway collect garbage (through /debug/pprof/heap?gc=1) before each measurement, so the heap figures count live objects only")
	flag.Parse()
	if err := run(*strait, *conns, *brokerPort, *gatewayPort, *settle, *gc); err != nil {
		fmt.Fprintln(os.Stderr, "idleconns:", err)
		os.Exit(1)
	}
}

func run(strait string, n, brokerPort, gatewayPort int, settle time.Duration, gc bool) error {
	st, err := stack.Start(strait, brokerPort, gatewayPort)
	if err != nil {
		return err
	}
	defer st.Stop()
	gw, admin := st.Gateway, st.Admin
	req := kmsg.NewRequestFormatter(kmsg.FormatterClientID("idle")).AppendRequest(nil, &kmsg.ApiVersionsRequest{Version: 0}, 1)
	// One connection first, so the gateway's one-time state (the
	// broker's metadata, pools) is in the baseline.
	first, err := openOne(gw, req)
	if err != nil {
		return err
	}
	defer first.Close()
	time.Sleep(settle)
	if gc {
		collect(admin)
	}
	before := rss(st.GatewayPID())
	mBefore := goMem(admin)
	open := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for len(open) < n {
		c, err := openOne(gw, req)
		if err != nil {
			return fmt.Errorf("connection %d: %w", len(open)+1, err)
		}
		open = append(open, c)
	}
	time.Sleep(settle)
	if gc {
		collect(admin)
	}
	after := rss(st.GatewayPID())
	mAfter := goMem(admin)
	fmt.Printf("gateway RSS: %d KiB with 1 connection, %d KiB with %d more idle connections: %.1f KiB per connection pair\n",
		before>>10, after>>10, n, float64(after-before)/1024/float64(n))
	for _, k := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines"} {
		fmt.Printf("  %s: %.0f -> %.0f (%.1f per pair)\n", k, mBefore[k], mAfter[k], (mAfter[k]-mBefore[k])/float64(n))
	}
	return nil
}

// openOne connects, sends req (ApiVersions), and reads the answer.
func openOne(addr string, req []byte) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, err
	}
	r := bufio.NewReader(c)
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := r.Discard(int(binary.BigEndian.Uint32(sz[:]))); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// collect makes the gateway run a garbage collection: the heap profile
// handler does one first when asked with gc=1.
func collect(admin string) {
	resp, err := http.Get("http://" + admin + "/debug/pprof/heap?gc=1")
	if err != nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// goMem reads the Go runtime's memory gauges from the admin listener.
func goMem(admin string) map[string]float64 {
	m := map[string]float64{}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.HasPrefix(f[0], "go_") {
			m[f[0]], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return m
}

// rss is the resident set size of pid in bytes (0 if it cannot be read).
func rss(pid int) int64 {
	sample, _ := procstat.Read(pid)
	return sample.RSS
}
