package interop

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requireInteropEnv is the variable that turns a missing client from a skip
// into a failure. CI sets it so interop tests never silently skip there.
const requireInteropEnv = "STRAIT_REQUIRE_INTEROP"

// clientTimeout bounds every client process.
const clientTimeout = 60 * time.Second

// needDep skips the test when a client dependency is missing (err != nil),
// naming how to install it; with STRAIT_REQUIRE_INTEROP=1 it fails instead.
func needDep(t *testing.T, what string, err error, hint string) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s is not available (%v); install it with: %s (or run test/interop/install-deps.sh)", what, err, hint)
	if os.Getenv(requireInteropEnv) == "1" {
		t.Fatalf("%s; %s=1 requires every interop client", msg, requireInteropEnv)
	}
	t.Skip(msg)
}

// pythonBin is the interpreter that sees Debian's python3-* packages (the
// python3 first on PATH may be another build that does not).
func pythonBin() string {
	if p := os.Getenv("STRAIT_INTEROP_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

var (
	depMu    sync.Mutex
	depCache = map[string]error{}
)

// checkDep runs probe once per name and remembers the answer.
func checkDep(name string, probe func() error) error {
	depMu.Lock()
	defer depMu.Unlock()
	if err, ok := depCache[name]; ok {
		return err
	}
	err := probe()
	depCache[name] = err
	return err
}

func probeCmd(name string, args ...string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			if out := strings.TrimSpace(string(out)); out != "" {
				lines := strings.Split(out, "\n")
				return fmt.Errorf("%s: %w: %s", name, err, lines[len(lines)-1])
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
}

func needKcat(t *testing.T) {
	t.Helper()
	err := checkDep("kcat", func() error { _, err := exec.LookPath("kcat"); return err })
	needDep(t, "kcat", err, "apt-get install kcat")
}

// needPython checks that pythonBin can import module, which Debian package
// pkg provides.
func needPython(t *testing.T, module, pkg string) {
	t.Helper()
	err := checkDep("python:"+module, probeCmd(pythonBin(), "-c", "import "+module))
	needDep(t, "Python module "+module, err, "apt-get install "+pkg)
}

// runClient runs a client process with a timeout and returns its stdout.
// Its stderr is printed if the test fails, now or later.
func runClient(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1", "PYTHONUNBUFFERED=1")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	line := strings.Join(append([]string{name}, args...), " ")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr of %s:\n%s", line, tail(stderr.String(), 8000))
		}
	})
	if ctx.Err() != nil {
		t.Fatalf("%s: timed out after %s; stdout:\n%s", line, clientTimeout, tail(stdout.String(), 2000))
	}
	if err != nil {
		t.Fatalf("%s: %v (after %s); stdout:\n%s", line, err, time.Since(start).Round(time.Millisecond), tail(stdout.String(), 2000))
	}
	t.Logf("%s: done in %s", filepath.Base(name), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// scriptSpec is what a client script is told to do: produce records to
// topic with the codec, then consume them back in group. Scripts read it
// from the JSON file named by their one argument.
type scriptSpec struct {
	Bootstrap   string   `json:"bootstrap"`
	Topic       string   `json:"topic"`
	Group       string   `json:"group"`
	Compression string   `json:"compression"`
	CAFile      string   `json:"ca_file,omitempty"`
	TimeoutSec  int      `json:"timeout_s"`
	Records     []record `json:"records"`
}

// scriptResult is what a client script prints on stdout.
type scriptResult struct {
	Client   string   `json:"client"`
	Produced int      `json:"produced"`
	Errors   []string `json:"errors"`
	Consumed []record `json:"consumed"`
}

// scriptClient is a client driven through a script.
type scriptClient struct {
	cmd []string // the script's command line, without the spec file
	// precreate creates the topic through the gateway first, for clients
	// whose metadata requests kfake never auto-creates from.
	precreate bool
	checks    checkOpts
}

// scriptRoundTrip has a client script produce records through the gateway
// with codec and consume them in a group, then checks everything.
func scriptRoundTrip(t *testing.T, e *env, c scriptClient, codec string, n int) {
	t.Helper()
	topic := topicName(t, "t")
	recs := makeRecords(recordSpec{prefix: topic, n: n, headers: c.checks.headers})
	if c.precreate {
		createTopicVia(t, e, topic)
	}
	spec := scriptSpec{
		Bootstrap:   e.addr,
		Topic:       topic,
		Group:       topic + "-g",
		Compression: codec,
		CAFile:      e.caFile,
		TimeoutSec:  int(clientTimeout/time.Second) - 15,
		Records:     recs,
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, nil, c.cmd[0], slices.Concat(c.cmd[1:], []string{specFile})...)
	var res scriptResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("client printed no result (%v):\n%s", err, tail(string(out), 2000))
	}
	t.Logf("%s: produced %d, consumed %d with %s", res.Client, res.Produced, len(res.Consumed), codec)
	for _, msg := range res.Errors {
		t.Errorf("%s reported: %s", res.Client, msg)
	}
	if res.Produced != len(recs) {
		t.Errorf("%s acknowledged %d of %d records produced", res.Client, res.Produced, len(recs))
	}
	verify(t, recs, res.Consumed, c.checks)
	checkStored(t, e, topic, recs, c.checks, codec)
}

// createTopicVia creates topic with numPartitions partitions through the
// gateway, with franz-go.
func createTopicVia(t *testing.T, e *env, topic string) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(e.addr)}
	if e.caPool != nil {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: e.caPool}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	createTopic(ctx, t, cl, topic)
}

// checkStored reads the topic straight from kfake, not through the
// gateway, and checks that it holds exactly want (so a duplicate written on
// the produce path is caught even if a consumer would not notice) and that
// the producer compressed its batches with codec.
func checkStored(t *testing.T, e *env, topic string, want []record, o checkOpts, codec string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker.ListenAddrs()...),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Records produced with acks=0 may still be on their way.
	total := endOffsets(ctx, t, cl, topic)
	for total < int64(len(want)) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		total = endOffsets(ctx, t, cl, topic)
	}
	if total != int64(len(want)) {
		t.Errorf("topic %s holds %d records, want %d", topic, total, len(want))
	}
	var got []record
	codecs := map[string]int{}
	for int64(len(got)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("read %d of the %d records stored in %s", len(got), total, topic)
			break
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s/%d from kfake: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			codecs[codecName(r.Attrs.CompressionType())]++
			rec := record{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, header{Key: h.Key, Value: h.Value})
			}
			got = append(got, rec)
		})
	}
	if e.encrypted {
		verifyCiphertext(t, want, got)
	} else {
		verify(t, want, got, o)
	}
	// Clients send a batch uncompressed when compressing does not shrink
	// it (a lone small record, say), so some plain batches are fine; a
	// batch in another codec, or mostly plain ones, are not.
	plain := codecs["none"]
	if codec == "none" {
		plain = 0
	}
	if codecs[codec]+plain != len(got) || codecs[codec] < len(got)/2 {
		t.Errorf("stored records by codec: %v; want (nearly) all %s", codecs, codec)
	}
}

func codecName(c uint8) string {
	switch c {
	case 0:
		return "none"
	case 1:
		return "gzip"
	case 2:
		return "snappy"
	case 3:
		return "lz4"
	case 4:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", c)
}

// endOffsets returns the sum of the topic's partitions' end offsets.
func endOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < numPartitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // end offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var total int64
	for _, s := range cl.RequestSharded(ctx, req) {
		if s.Err != nil {
			t.Errorf("list offsets of %s: %v", topic, s.Err)
			continue
		}
		for _, rt := range s.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Errorf("list offsets of %s/%d: %v", topic, rp.Partition, err)
				}
				total += rp.Offset
			}
		}
	}
	return total
}

// verifyCiphertext checks what the broker stores for an encrypting
// gateway: every record is there with its key in clear, but its value is
// not the plaintext (nor contains it), its headers are hidden, and it
// carries the encryption marker.
func verifyCiphertext(t *testing.T, want, got []record) {
	t.Helper()
	byKey := make(map[string]record, len(want))
	for _, r := range want {
		byKey[string(r.Key)] = r
	}
	if len(got) != len(want) {
		t.Errorf("the broker holds %d records, want %d", len(got), len(want))
	}
	bad := 0
	for _, g := range got {
		w, ok := byKey[string(g.Key)]
		switch {
		case !ok:
			t.Errorf("the broker holds a record with key %q, which was not produced (keys must stay in clear)", g.Key)
		case bytes.Equal(g.Value, w.Value) || len(w.Value) >= 8 && bytes.Contains(g.Value, w.Value):
			// (A value of a few bytes may turn up in ciphertext by chance.)
			t.Errorf("record %q: the broker holds the plaintext value", g.Key)
		case len(g.Headers) != 1 || g.Headers[0].Key != "strait.enc":
			t.Errorf("record %q: stored headers %v, want only the encryption marker", g.Key, g.Headers)
		default:
			continue
		}
		if bad++; bad > 5 {
			t.Fatal("more than 5 bad records")
		}
	}
}
