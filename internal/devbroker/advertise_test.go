package devbroker

import (
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A client that bootstraps from the advertised address reaches the broker
// only through what listens there (here a byte relay): every connection it
// makes, to bootstrap and to the broker it learns of, goes through it.
func TestAdvertisedAddressRoutesClientsThroughARelay(t *testing.T) {
	t.Parallel()
	relay, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	var c *Cluster
	var port int
	// The broker needs a fixed port; take a free one, and try again if
	// something else takes it first.
	for try := 0; ; try++ {
		port = freePort(t)
		c, err = Start(Options{Brokers: 1, Listen: "127.0.0.1:" + strconv.Itoa(port), Advertise: relay.Addr().String(), AutoCreateTopics: true})
		if err == nil {
			break
		}
		if try == 4 || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("Start: %v", err)
		}
	}
	t.Cleanup(c.Close)
	if got := c.Addrs(); !slices.Equal(got, []string{relay.Addr().String()}) {
		t.Fatalf("Addrs() = %v, want the advertised %s", got, relay.Addr())
	}
	var relayed atomic.Int32
	go func() {
		for {
			cc, err := relay.Accept()
			if err != nil {
				return
			}
			relayed.Add(1)
			go pipe(cc, "127.0.0.1:"+strconv.Itoa(port))
		}
	}()

	cl := client(t, c, kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("via-relay"))
	produce(t, cl, "via-relay", "a", "b")
	if got := values(consume(t, cl, 2)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("consumed %v", got)
	}
	meta := metadata(t, cl, "via-relay")
	if len(meta.Brokers) != 1 || net.JoinHostPort(meta.Brokers[0].Host, strconv.Itoa(int(meta.Brokers[0].Port))) != relay.Addr().String() {
		t.Fatalf("metadata brokers %+v, want only %s", meta.Brokers, relay.Addr())
	}
	if relayed.Load() < 2 {
		t.Errorf("%d connections went through the relay, want the bootstrap one and the broker's", relayed.Load())
	}
}

func TestAdvertiseRejectsBadAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ listen, advertise, want string }{
		{"127.0.0.1:0", "127.0.0.1:9000", "fixed listen port"},
		{"127.0.0.1:19092", "127.0.0.1", "host:port"},
		{"127.0.0.1:19092", ":9000", "host is missing"},
		{"127.0.0.1:19092", "127.0.0.1:65535", "port must be"},
		{"127.0.0.1:19092", "127.0.0.1:x", "port must be"},
	} {
		c, err := Start(Options{Brokers: 2, Listen: tc.listen, Advertise: tc.advertise})
		if err == nil {
			c.Close()
			t.Fatalf("Start(listen %s, advertise %s) succeeded", tc.listen, tc.advertise)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(listen %s, advertise %s): %q does not say %q", tc.listen, tc.advertise, err, tc.want)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func pipe(client net.Conn, target string) {
	defer client.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(up, client)
	io.Copy(client, up)
}
