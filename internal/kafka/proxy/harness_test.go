package proxy

// Helpers shared by the integration tests in this package: a gateway in
// front of a kfake cluster with its own metrics, raw Kafka frames over a
// net.Conn, record batches built by hand, and polling with deadlines.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

// gateway is a virtual cluster under test with the broker behind it.
type gateway struct {
	broker *kfake.Cluster // nil when the test brings its own broker
	vc     *VirtualCluster
	addr   string               // bootstrap address
	reg    *prometheus.Registry // holds only this gateway's metrics
}

// startGateway starts a three-broker kfake cluster and a virtual cluster in
// front of it. mod may adjust the options before New.
func startGateway(t testing.TB, mod func(*Options), kopts ...kfake.Opt) *gateway {
	t.Helper()
	kopts = append([]kfake.Opt{kfake.NumBrokers(3), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3)}, kopts...)
	b, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	g := startGatewayTo(t, b.ListenAddrs(), mod)
	g.broker = b
	if g.vc.opts.SNI == nil { // SNI routing serves every node on the one port
		waitNodeListeners(t, g.vc, 3)
	}
	return g
}

// startGatewayTo starts a virtual cluster in front of the given bootstrap
// servers (a fake broker, say).
func startGatewayTo(t testing.TB, bootstrap []string, mod func(*Options)) *gateway {
	t.Helper()
	base := testkit.PortBlock(t, 11)
	lvl := slog.LevelError
	if testing.Verbose() {
		lvl = slog.LevelDebug
	}
	reg := prometheus.NewRegistry()
	m := telemetry.NewKafkaMetrics(reg)
	opts := Options{
		Name:          "test",
		Listen:        fmt.Sprintf("127.0.0.1:%d", base),
		NodePortStart: base + 1,
		NodePortEnd:   base + 10,
		Target:        Target{Bootstrap: bootstrap},
		Log:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
		Metrics:       m,
	}
	if mod != nil {
		mod(&opts)
	}
	vc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		vc.Shutdown(ctx)
	})
	return &gateway{vc: vc, addr: vc.Addr().String(), reg: reg}
}

// nodeAddr is where the gateway serves broker id.
func (g *gateway) nodeAddr(id int32) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(g.vc.opts.NodePortStart+int(id)))
}

// gatewayAddrs is every address the gateway may tell a client to dial.
func (g *gateway) gatewayAddrs() map[string]bool {
	m := map[string]bool{g.addr: true}
	for p := g.vc.opts.NodePortStart; p <= g.vc.opts.NodePortEnd; p++ {
		m[net.JoinHostPort("127.0.0.1", strconv.Itoa(p))] = true
	}
	return m
}

func (g *gateway) errCount(kind string) float64 {
	return g.metric("strait_kafka_errors_total", "kind", kind)
}

// errCounts snapshots every error kind the proxy records.
func (g *gateway) errCounts() map[string]float64 {
	m := map[string]float64{}
	for _, k := range []string{errFrameTooLarge, errMalformed, errUnknownAPI, errUpstreamConnect, errUpstreamClosed,
		errUpstreamTimeout, errUpstreamProto, errTLSHandshake, errFilter, errClientIO, errFrameTimeout} {
		m[k] = g.errCount(k)
	}
	return m
}

// waitErr waits until the error counter of kind has grown to want.
func (g *gateway) waitErr(t *testing.T, kind string, want float64) {
	t.Helper()
	pollUntil(t, 5*time.Second, func() bool { return g.errCount(kind) >= want },
		func() string { return fmt.Sprintf("errors{kind=%q} = %v, want %v", kind, g.errCount(kind), want) })
	if got := g.errCount(kind); got != want {
		t.Errorf("errors{kind=%q} = %v, want %v", kind, got, want)
	}
}

// metric returns the value of the counter or gauge name of this virtual
// cluster with the given label pairs; 0 if it was never touched.
func (g *gateway) metric(name string, labels ...string) float64 {
	mfs, err := g.reg.Gather()
	if err != nil {
		panic(err)
	}
	want := map[string]string{"virtual_cluster": g.vc.opts.Name}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			n := 0
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok {
					if v != lp.GetValue() {
						continue next
					}
					n++
				}
			}
			if n != len(want) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func (g *gateway) connsOpen() float64 { return g.metric("strait_kafka_connections_open") }

// waitNodeListeners waits for the gateway to open a listener for each of n
// nodes (broker discovery at Start runs in the background).
func waitNodeListeners(t testing.TB, v *VirtualCluster, n int) {
	t.Helper()
	pollUntil(t, 10*time.Second, func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return len(v.listeners) >= n+1
	}, func() string { return fmt.Sprintf("gateway did not open %d node listeners", n) })
}

// pollUntil calls cond every few milliseconds until it holds, failing the
// test after timeout.
func pollUntil(t testing.TB, timeout time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, msg())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testCtx is a context bounded by d and the test's end.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// rawConn is a Kafka connection driven frame by frame.
type rawConn struct {
	t *testing.T
	net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, Conn: c}
}

// requestFrame encodes req (at its set version) as a whole frame.
func requestFrame(req kmsg.Request, corr int32, clientID string) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, corr)
}

func (c *rawConn) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	c.write(requestFrame(req, corr, "strait-test"))
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one whole frame (without its size) within 10 s.
func (c *rawConn) readFrame() ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame size %d", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return b, err
}

// recv reads the response to the request with correlation id corr into
// resp, whose version must be set.
func (c *rawConn) recv(corr int32, resp kmsg.Response) {
	c.t.Helper()
	b, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading %s response: %v", kmsg.NameForKey(resp.Key()), err)
	}
	if err := decodeResponse(b, corr, resp); err != nil {
		c.t.Fatal(err)
	}
}

// roundTrip sends req and reads its response.
func (c *rawConn) roundTrip(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	c.send(req, corr)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	c.recv(corr, resp)
	return resp
}

// decodeResponse checks a response frame's correlation id and decodes its
// body into resp.
func decodeResponse(frame []byte, corr int32, resp kmsg.Response) error {
	if len(frame) < 4 {
		return errors.New("response frame too short")
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return fmt.Errorf("%s response has correlation id %d, want %d", kmsg.NameForKey(resp.Key()), got, corr)
	}
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		if len(body) == 0 || body[0] != 0 {
			return errors.New("unexpected response header tags")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decoding %s v%d response: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return nil
}

// expectClosed asserts that the peer closes the connection (EOF or reset)
// within 5 s, discarding anything it sends first.
func (c *rawConn) expectClosed() error {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		return io.EOF
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after 5 s")
	}
	return err
}

// metadataWorks proves a connection still serves requests.
func (c *rawConn) metadataWorks(corr int32) {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	resp := c.roundTrip(req, corr).(*kmsg.MetadataResponse)
	if len(resp.Brokers) == 0 {
		c.t.Fatal("metadata response lists no brokers")
	}
}

// recordBatch builds a v2 (magic 2) record batch holding values.
func recordBatch(values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // Length 0 took one byte
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(values) - 1),
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(values)),
		Records:              recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// produceRequest builds a Produce request of one partition of a topic named
// in the request (v0-v12).
func produceRequest(version int16, acks int16, txnID *string, topic string, partition int32, values ...string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 5000
	req.TransactionID = txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = recordBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// byteLog collects what clients dialed and read.
type byteLog struct {
	mu     sync.Mutex
	dialed []string
	reads  []*bytes.Buffer // one per connection, so frames stay contiguous
}

// dialer returns a kgo-compatible dialer that records addresses and reads.
func (l *byteLog) dialer() func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		l.mu.Lock()
		l.dialed = append(l.dialed, host)
		l.mu.Unlock()
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		buf := new(bytes.Buffer)
		l.mu.Lock()
		l.reads = append(l.reads, buf)
		l.mu.Unlock()
		return &connLog{Conn: c, l: l, buf: buf}, nil
	}
}

// connLog records one connection's reads into its own buffer.
type connLog struct {
	net.Conn
	l   *byteLog
	buf *bytes.Buffer
}

func (c *connLog) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.mu.Lock()
	c.buf.Write(b[:n])
	c.l.mu.Unlock()
	return n, err
}

func (l *byteLog) dials() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.dialed...)
}

// contains reports whether any connection's bytes contain pat.
func (l *byteLog) contains(pat []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.reads {
		if bytes.Contains(b.Bytes(), pat) {
			return true
		}
	}
	return false
}

// addressPatterns are the byte sequences a host:port takes in a Kafka
// response: a (compact or classic) string host immediately followed by a
// big-endian int32 port, and the text form "host:port".
func addressPatterns(hostport string) [][]byte {
	host, port, _ := net.SplitHostPort(hostport)
	p, _ := strconv.Atoi(port)
	bin := append([]byte(host), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(bin[len(host):], uint32(p))
	return [][]byte{bin, []byte(hostport)}
}

// stubBroker listens on a free loopback port and runs serve, on its own
// goroutine, for each connection it accepts, closing the connection when
// serve returns. The listener and any open connections close at cleanup.
func stubBroker(tb testing.TB, serve func(c net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}
