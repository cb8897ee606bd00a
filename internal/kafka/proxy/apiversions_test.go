package proxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/straitgw/strait/internal/kafka/wire"
)

func apiVersionsV3(name string) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = name
	req.ClientSoftwareVersion = "1.0"
	return req
}

// versionRanges maps key to [min, max] from an ApiVersions response.
func versionRanges(resp *kmsg.ApiVersionsResponse) map[int16][2]int16 {
	m := make(map[int16][2]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return m
}

// TestApiVersionsIntersection checks that what a client is offered through
// the gateway is exactly what both the broker and kmsg (Strait's decoder)
// support, with the broker emulating an older Kafka for some keys.
func TestApiVersionsIntersection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit map[int16]int16 // broker max versions lowered from kfake's own
	}{
		{name: "default"},
		{name: "older broker", limit: map[int16]int16{
			int16(kmsg.Metadata): 7, int16(kmsg.Fetch): 11, int16(kmsg.Produce): 8, int16(kmsg.ApiVersions): 3,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var kopts []kfake.Opt
			if tc.limit != nil {
				vs := kversion.Tip()
				for k, v := range tc.limit {
					vs.SetMaxKeyVersion(k, v)
				}
				kopts = append(kopts, kfake.MaxVersions(vs))
			}
			g := startGateway(t, nil, kopts...)

			// What the broker itself says, asked directly.
			up := dialRaw(t, g.broker.ListenAddrs()[0])
			direct := versionRanges(up.roundTrip(apiVersionsV3("strait-test"), 1).(*kmsg.ApiVersionsResponse))

			c := dialRaw(t, g.addr)
			resp := c.roundTrip(apiVersionsV3("strait-test"), 1).(*kmsg.ApiVersionsResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				t.Fatalf("ApiVersions through the gateway: %v", err)
			}
			got := versionRanges(resp)
			for key, r := range got {
				kreq := kmsg.RequestForKey(key)
				if kreq == nil {
					t.Errorf("key %d is offered but kmsg cannot decode it", key)
					continue
				}
				if r[1] > kreq.MaxVersion() {
					t.Errorf("%s offered up to v%d, newer than kmsg's v%d", kmsg.NameForKey(key), r[1], kreq.MaxVersion())
				}
			}
			for key, d := range direct {
				want := d
				if kreq := kmsg.RequestForKey(key); kreq == nil {
					want = [2]int16{-1, -1}
				} else {
					want[1] = min(want[1], kreq.MaxVersion())
				}
				g, ok := got[key]
				switch {
				case want[0] == -1 || want[1] < want[0]:
					if ok {
						t.Errorf("%s: offered %v, want it dropped", kmsg.NameForKey(key), g)
					}
				case !ok:
					t.Errorf("%s: not offered, want %v", kmsg.NameForKey(key), want)
				case g != want:
					t.Errorf("%s: offered v%d-v%d, want v%d-v%d", kmsg.NameForKey(key), g[0], g[1], want[0], want[1])
				}
			}
			for key := range got {
				if _, ok := direct[key]; !ok {
					t.Errorf("%s offered by the gateway but not by the broker", kmsg.NameForKey(key))
				}
			}
			for k, v := range tc.limit {
				if got[k][1] != v {
					t.Errorf("%s: offered up to v%d, want the broker's v%d", kmsg.NameForKey(k), got[k][1], v)
				}
			}
		})
	}
}

// fakeApiVersionsBroker answers every ApiVersions request with keys that
// are newer than kmsg or unknown to it.
func fakeApiVersionsBroker(t *testing.T) string {
	t.Helper()
	return stubBroker(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			var hdr [12]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			size := int(binary.BigEndian.Uint32(hdr[:]))
			version := int16(binary.BigEndian.Uint16(hdr[6:]))
			if _, err := r.Discard(size - 8); err != nil {
				return
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = version
			for _, k := range [][3]int16{
				{int16(kmsg.Produce), 3, 99},    // newer than kmsg
				{int16(kmsg.Metadata), 0, 7},    // older than kmsg
				{127, 0, 3},                     // unknown to kmsg
				{int16(kmsg.ApiVersions), 0, 3}, // older than kmsg
				{int16(kmsg.Fetch), 99, 120},    // nothing kmsg can read
			} {
				resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k[0], MinVersion: k[1], MaxVersion: k[2]})
			}
			out := encodeResponse(nil, int32(binary.BigEndian.Uint32(hdr[8:])), int16(kmsg.ApiVersions), resp)
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

// TestApiVersionsClippedToKmsg uses a broker that advertises versions and
// keys newer than Strait can read: the gateway must clip and drop them.
func TestApiVersionsClippedToKmsg(t *testing.T) {
	t.Parallel()
	g := startGatewayTo(t, []string{fakeApiVersionsBroker(t)}, func(o *Options) { o.SkipBrokerDiscovery = true })
	c := dialRaw(t, g.addr)
	got := versionRanges(c.roundTrip(apiVersionsV3("strait-test"), 1).(*kmsg.ApiVersionsResponse))
	want := map[int16][2]int16{
		int16(kmsg.Produce):     {3, wire.MaxVersion(wire.KeyProduce)},
		int16(kmsg.Metadata):    {0, 7},
		int16(kmsg.ApiVersions): {0, 3},
	}
	if len(got) != len(want) {
		t.Errorf("offered %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: offered %v, want %v", kmsg.NameForKey(k), got[k], w)
		}
	}
}

// TestApiVersionsTooNew sends an ApiVersions request newer than Strait
// reads, with a flexible (v2) header carrying tags: the gateway itself
// answers the KIP-511 way and the broker never sees it.
func TestApiVersionsTooNew(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)

	var mu sync.Mutex
	seen := map[string]int{}
	g.broker.ControlKey(int16(kmsg.ApiVersions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		req := kreq.(*kmsg.ApiVersionsRequest)
		mu.Lock()
		seen[req.ClientSoftwareName]++
		mu.Unlock()
		return nil, nil, false
	})
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[name]
	}

	// Header v2: key, version, correlation id, client id, then a tag
	// section holding one tag. The body is shaped like a v5 body so that a
	// broker that saw it could parse it and count it.
	frame := []byte{0, 0, 0, 0}
	frame = binary.BigEndian.AppendUint16(frame, uint16(kmsg.ApiVersions))
	frame = binary.BigEndian.AppendUint16(frame, 99)
	frame = binary.BigEndian.AppendUint32(frame, 4242)
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = append(frame, "raw"...)
	frame = append(frame, 1, 7, 2, 0xAB, 0xCD) // one tag: id 7, 2 bytes
	frame = append(frame, 8)                   // compact string, 7 bytes
	frame = append(frame, "probe99"...)
	frame = append(frame, 4)
	frame = append(frame, "1.0"...)
	frame = append(frame, 0)                                 // null cluster id
	frame = binary.BigEndian.AppendUint32(frame, 0xFFFFFFFF) // node id -1
	frame = append(frame, 0)                                 // no body tags
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))

	c := dialRaw(t, g.addr)
	c.write(frame)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	c.recv(4242, resp)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("error code %d, want UNSUPPORTED_VERSION (35)", resp.ErrorCode)
	}
	want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: wire.MaxVersion(wire.KeyApiVersions)}}
	if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != want[0].ApiKey ||
		resp.ApiKeys[0].MinVersion != want[0].MinVersion || resp.ApiKeys[0].MaxVersion != want[0].MaxVersion {
		t.Errorf("api keys %+v, want %+v", resp.ApiKeys, want)
	}

	// The same connection goes on: the retry at a version both read
	// reaches the broker, which proves the hook would have seen the first.
	ok := c.roundTrip(apiVersionsV3("probe3"), 4243).(*kmsg.ApiVersionsResponse)
	if ok.ErrorCode != 0 || len(ok.ApiKeys) < 10 {
		t.Errorf("ApiVersions v3 after the refusal: error %d, %d keys", ok.ErrorCode, len(ok.ApiKeys))
	}
	pollUntil(t, 5*time.Second, func() bool { return count("probe3") == 1 },
		func() string { return "broker never saw the v3 retry" })
	if n := count("probe99"); n != 0 {
		t.Errorf("broker saw the v99 request %d times, want 0", n)
	}
}
