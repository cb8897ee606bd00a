package devbroker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// helperDataDirEnv makes the test binary run a cluster on the named data
// directory instead of the tests (TestMain), so that a test can kill it with
// SIGKILL: a crash, with no Close and so no save of kfake's state.
const helperDataDirEnv = "STRAIT_DEVBROKER_HELPER_DATA_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDataDirEnv); dir != "" {
		os.Exit(runHelperCluster(dir))
	}
	os.Exit(m.Run())
}

// runHelperCluster starts a cluster, prints its addresses on one line of
// stdout and runs until stdin closes (the test process died) or it is killed.
func runHelperCluster(dir string) int {
	c, err := Start(Options{Listen: "127.0.0.1:0", DataDir: dir, AutoCreateTopics: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("addrs", strings.Join(c.Addrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
	return 0
}

// startHelperCluster runs the helper cluster on dir in a child process and
// returns its addresses and a function that kills it with SIGKILL.
func startHelperCluster(t *testing.T, dir string) (addrs []string, kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDataDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill() // SIGKILL
			_ = cmd.Wait()
			stdin.Close()
		})
	}
	t.Cleanup(kill)

	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		a, found := strings.CutPrefix(l, "addrs ")
		if !ok || !found {
			t.Fatalf("helper cluster did not print its addresses (got %q)", l)
		}
		return strings.Split(a, ","), kill
	case <-time.After(testTimeout):
		t.Fatalf("helper cluster did not start within %v", testTimeout)
	}
	return nil, nil
}

// A cluster killed with SIGKILL while a producer runs comes back with every
// record it acknowledged (acks=all), in the topic the producer's Metadata
// request auto-created. kfake saved an auto-created topic to topics.json only
// on Close, so after a crash the topic was unknown and its records on disk
// unreadable.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const topic = "crash"
	addrs, kill := startHelperCluster(t, dir)

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryTimeout(testTimeout),
		kgo.RecordRetries(3),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Some records acknowledged one by one, then a stream in flight when
	// the cluster dies.
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
	)
	for i := range 50 {
		v := fmt.Sprintf("sync-%03d", i)
		if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		acked[v] = true
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("async-%06d", i)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[v] = true
					mu.Unlock()
				}
			})
		}
	})
	waitFor(t, func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 1000 {
			return fmt.Sprintf("%d records acknowledged, want 1000 before the crash", len(acked))
		}
		return ""
	})
	kill()
	stop()
	wg.Wait()
	cl.Close() // fails what is still buffered
	mu.Lock()
	want := maps.Clone(acked)
	mu.Unlock()

	c := start(t, Options{DataDir: dir})
	if c.Kfake().TopicInfo(topic) == nil {
		raw, _ := os.ReadFile(filepath.Join(dir, "topics.json"))
		t.Fatalf("after the crash the cluster does not know topic %q, which held %d acknowledged records (topics.json: %s)", topic, len(want), raw)
	}
	if got := len(c.Kfake().PartitionInfos(topic)); got != DefaultPartitions {
		t.Errorf("after the crash topic %q has %d partitions, want %d", topic, got, DefaultPartitions)
	}
	cons := client(t, c, kgo.ConsumeTopics(topic))
	cctx := testContext(t)
	missing := len(want)
	for missing > 0 {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("after the crash %d of %d acknowledged records are missing", missing, len(want))
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		for _, r := range fs.Records() {
			if want[string(r.Value)] {
				want[string(r.Value)] = false
				missing--
			}
		}
	}
}

// When the topic metadata cannot be saved, records are refused with a
// retriable storage error rather than acknowledged and lost in a crash.
func TestProduceRefusedWhenTopicsCannotBeSaved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := start(t, Options{Brokers: 1, DataDir: dir, AutoCreateTopics: true})
	// A directory where topics.json belongs cannot be read or replaced.
	path := filepath.Join(dir, "topics.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) }) // lets Close save

	cl, closeClient := closedClient(t, c, kgo.AllowAutoTopicCreation(), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1),
		kgo.MetadataMinAge(50*time.Millisecond)) // the retry waits for a metadata refresh
	defer closeClient()
	err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "unsaved", Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce with topics.json unwritable: got %v, want KAFKA_STORAGE_ERROR", err)
	}
}

// A topic once saved is not looked up in topics.json again: produce requests
// to it cost no file read and no fsync.
func TestSavedTopicIsNotSavedAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := start(t, Options{Brokers: 1, DataDir: dir, AutoCreateTopics: true})
	cl, closeClient := closedClient(t, c, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1))
	defer closeClient()
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "saved", Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	// topics.json can no longer be read: only a save would notice.
	path := filepath.Join(dir, "topics.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) }) // lets Close save
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "saved", Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatalf("produce to a saved topic with topics.json unreadable: %v", err)
	}
}
