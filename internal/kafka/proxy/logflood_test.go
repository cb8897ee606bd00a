package proxy

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

// One client that opens connection after connection and sends garbage must
// not write a warning per connection: with the process logger, the first
// is written in full and the rest are counted, in metrics and in a summary,
// so a misbehaving client cannot fill the gateway's disk.
func TestLogFloodFromOneClientIsFolded(t *testing.T) {
	t.Parallel()
	var out testkit.SyncBuffer
	log, err := telemetry.NewLogger(&out, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	const maxFrame = 1 << 20
	g := startGateway(t, func(o *Options) {
		o.MaxFrame = maxFrame
		o.Log = log
	})
	const conns = 300
	for range conns {
		c := dialRaw(t, g.addr)
		c.write(binary.BigEndian.AppendUint32(nil, maxFrame+1))
		c.expectClosed()
		c.Close()
	}
	g.waitErr(t, errFrameTooLarge, conns)
	logs := out.String()
	if n := strings.Count(logs, "level=WARN"); n > 2 {
		t.Fatalf("%d warnings written for %d bad connections from one client, want the first only (and at most one summary):\n%s",
			n, conns, logs[:min(len(logs), 2000)])
	}
	if n := strings.Count(logs, "frame"); n == 0 {
		t.Fatalf("the first occurrence was not written in full:\n%s", logs)
	}
}
