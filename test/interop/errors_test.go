package interop

// What each client tells its user when the record-encryption filter fails a
// partition, and that none of them is sent into a tight refetch loop by it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filters/encryption"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
	"github.com/straitgw/strait/internal/testkit"
)

const (
	// errorRecords is how many records the undecryptable topic holds.
	errorRecords = 5
	// wantConsumeErrors is how many fetch errors a consumer is run until
	// it has been told of, unless its expectations say otherwise (kcat
	// exits at the first; kafkajs tells of one only after five retries).
	wantConsumeErrors = 3
	// maxFailedFetches bounds the partition failures the gateway may log
	// for one consumer's topic while it runs until it has been told of
	// its errors. A client that backs off between fetches stays near the
	// number of errors (kafkajs, which retries five times before it
	// tells, at 6); one that cannot read the failed partition and
	// refetches at once made the gateway log thousands within a second.
	maxFailedFetches = 200
	// errorClientTimeout bounds each client's run; the clients stop
	// sooner, once told of their errors.
	errorClientTimeout = 45 * time.Second
)

// failedTopics are a client's two topics: produce is selected for
// encryption but has no KEK, so the gateway refuses every produce to it
// (POLICY_VIOLATION); consume holds errorRecords records encrypted under a
// KEK that has since been deleted, so the gateway fails every fetch of it
// (CORRUPT_MESSAGE).
type failedTopics struct {
	produce, consume string
}

// startFailingEnv starts an encrypting gateway whose topics each have their
// own KEK, named after the topic.
func startFailingEnv(t *testing.T) *env {
	t.Helper()
	return startEnv(t, withEncryptionConfig(func(c *encryption.Config) {
		c.KEK = "{topic}-kek"
	}))
}

// prepareFailures creates a client's two topics, one partition each, and
// makes the consume topic undecryptable: its records are encrypted under a
// fresh KEK by another gateway, and the KEK is then deleted from the vault.
// e's gateway never had the data key (the gateway that makes a data key
// keeps it), and no fetch goes through it before its vault has noticed.
func prepareFailures(t *testing.T, e *env) failedTopics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ft := failedTopics{produce: topicName(t, "nokek"), consume: topicName(t, "gone")}
	kek := ft.consume + "-kek"
	if _, err := vault.CreateKey(e.vaultDir, kek); err != nil {
		t.Fatal(err)
	}
	addr, stop := startSealingGateway(t, e)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(ft.consume),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{ft.produce, ft.consume} {
		createTopicN(ctx, t, cl, topic, 1)
	}
	var recs []*kgo.Record
	for i := range errorRecords {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "secret %d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", ft.consume, err)
	}
	if err := os.Remove(filepath.Join(e.vaultDir, kek+".json")); err != nil {
		t.Fatal(err)
	}
	waitForKEKGone(ctx, t, e, kek)
	return ft
}

// startSealingGateway starts a second gateway in front of e's broker, with
// its own encryption filter (same config, same vault, its own keys in
// memory), and returns its address and a function that stops it.
func startSealingGateway(t *testing.T, e *env) (string, func()) {
	t.Helper()
	v, err := vault.Open(e.vaultDir, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := encryption.New(encryption.Config{Topics: []string{"*"}, KEK: "{topic}-kek"}, v)
	if err != nil {
		t.Fatal(err)
	}
	base := testkit.PortBlock(t, nodePorts+1)
	vc, err := proxy.New(proxy.Options{
		Name:          "sealer",
		Listen:        testkit.Addr(base),
		NodePortStart: base + 1,
		NodePortEnd:   base + nodePorts,
		Target:        proxy.Target{Bootstrap: e.broker.ListenAddrs()},
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		Filters:       []filter.Filter{f},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	waitNodeListeners(t, base, nil)
	return vc.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		vc.Shutdown(ctx)
	}
}

// waitForKEKGone waits until e's vault no longer has the KEK. It asks the
// vault directly, so the filter caches nothing meanwhile.
func waitForKEKGone(ctx context.Context, t *testing.T, e *env, kek string) {
	t.Helper()
	for {
		_, err := e.keys.Wrap(ctx, kek, make([]byte, 32))
		if errors.Is(err, kms.ErrKeyNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("vault: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the gateway's vault still has KEK %s after it was deleted", kek)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// createTopicN creates topic with n partitions.
func createTopicN(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
}

// failedFetches counts the partition failures the gateway logged for topic.
func failedFetches(e *env, topic string) int {
	n := 0
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "cannot decrypt a fetched record") && strings.Contains(line+" ", " topic="+topic+" ") {
			n++
		}
	}
	return n
}

// clientReport is what a client told its user.
type clientReport struct {
	Client        string   `json:"client"`
	Produced      int      `json:"produced"`
	ProduceErrors []string `json:"produce_errors"`
	Consumed      int      `json:"consumed"`
	ConsumeErrors []string `json:"consume_errors"`
	// log is what the client wrote to stderr (its own log), if anything.
	log string
}

// errorExpectations say how a client names the two failures to its user.
type errorExpectations struct {
	produce, consume *regexp.Regexp
	// silent: the client retries the fetch error internally and tells
	// the user nothing (franz-go by default).
	silent bool
	// errors is how many fetch errors the client is run until it has
	// been told of; 0 means wantConsumeErrors.
	errors int
}

func (x errorExpectations) wantErrors() int {
	if x.errors > 0 {
		return x.errors
	}
	return wantConsumeErrors
}

// parseFailureRE matches what a client says when it cannot parse a
// response, which is what librdkafka said of a null record set.
var parseFailureRE = regexp.MustCompile(`(?i)parse failure|MessageSetSize|insufficient data|malformed`)

// checkReport checks what a client reported and what the gateway logged.
func checkReport(t *testing.T, e *env, ft failedTopics, rep clientReport, want errorExpectations) {
	t.Helper()
	t.Logf("%s: produce errors %q; consume errors %q", rep.Client, rep.ProduceErrors, rep.ConsumeErrors)
	if rep.Produced != 0 {
		t.Errorf("%s: %d records produced to a topic without a KEK", rep.Client, rep.Produced)
	}
	if len(rep.ProduceErrors) == 0 {
		t.Errorf("%s: no produce error reported", rep.Client)
	}
	for _, msg := range rep.ProduceErrors {
		if !want.produce.MatchString(msg) {
			t.Errorf("%s: produce error %q, want one matching %s", rep.Client, msg, want.produce)
		}
	}
	if rep.Consumed != 0 {
		t.Errorf("%s: consumed %d records of a topic that cannot be decrypted", rep.Client, rep.Consumed)
	}
	switch {
	case want.silent && len(rep.ConsumeErrors) > 0:
		t.Errorf("%s: reported %q, expected to retry silently", rep.Client, rep.ConsumeErrors)
	case !want.silent && len(rep.ConsumeErrors) < want.wantErrors():
		t.Errorf("%s: told of %d fetch errors, want %d", rep.Client, len(rep.ConsumeErrors), want.wantErrors())
	}
	for _, msg := range rep.ConsumeErrors {
		if !want.consume.MatchString(msg) || parseFailureRE.MatchString(msg) {
			t.Errorf("%s: consume error %q, want one matching %s", rep.Client, msg, want.consume)
		}
	}
	if m := parseFailureRE.FindString(rep.log); m != "" {
		t.Errorf("%s logged a parse failure (%q):\n%s", rep.Client, m, tail(rep.log, 4000))
	}
	n := failedFetches(e, ft.consume)
	t.Logf("%s: the gateway failed the partition %d times", rep.Client, n)
	if n == 0 {
		t.Errorf("%s: the gateway logged no failed fetch of %s", rep.Client, ft.consume)
	}
	if n > maxFailedFetches {
		t.Errorf("%s: the gateway failed the partition %d times (at most %d expected): the client refetches in a loop",
			rep.Client, n, maxFailedFetches)
	}
}

// TestFailedPartitions has every client produce to a topic the gateway
// refuses (no KEK: POLICY_VIOLATION) and consume one it cannot decrypt (KEK
// deleted: CORRUPT_MESSAGE), and checks what each tells its user and that
// it backs off rather than refetching at once (which librdkafka did when a
// failed partition came with a null record set).
func TestFailedPartitions(t *testing.T) {
	t.Parallel()
	e := startFailingEnv(t)

	t.Run("kcat", func(t *testing.T) {
		needKcat(t)
		t.Parallel()
		ft := prepareFailures(t, e)
		rep := clientReport{Client: "kcat"}
		loop := func() bool { return failedFetches(e, ft.consume) > maxFailedFetches }
		out, errOut := runUntil(t, strings.NewReader("k0:v0\nk1:v1\nk2:v2\n"), nil, loop, "kcat",
			"-P", "-b", e.addr, "-t", ft.produce, "-K", ":", "-X", "acks=all", "-X", "client.id=strait-interop-kcat")
		rep.ProduceErrors = matchingLines(errOut, "Delivery failed")
		rep.log = errOut
		// kcat exits at the first consume error it is told of.
		out, errOut = runUntil(t, nil, func(s string) bool { return len(matchingLines(s, "% ERROR")) > 0 }, loop, "kcat",
			"-C", "-b", e.addr, "-t", ft.consume, "-o", "beginning", "-X", "client.id=strait-interop-kcat")
		rep.ConsumeErrors = matchingLines(errOut, "% ERROR")
		rep.Consumed = len(strings.Fields(out))
		rep.log += errOut
		// librdkafka names error code 2 INVALID_MSG, "Invalid message".
		checkReport(t, e, ft, rep, errorExpectations{
			produce: regexp.MustCompile(`^% Delivery failed for message: Broker: Policy violation$`),
			consume: regexp.MustCompile(`^% ERROR: Topic \S+ \[0\] error: Fetch from broker \d+ failed.*: Broker: Invalid message$`),
			errors:  1,
		})
	})
	t.Run("confluent-kafka-python", func(t *testing.T) {
		needPython(t, "confluent_kafka", "python3-confluent-kafka")
		t.Parallel()
		ft := prepareFailures(t, e)
		want := errorExpectations{
			produce: regexp.MustCompile(`^POLICY_VIOLATION: Broker: Policy violation$`),
			consume: regexp.MustCompile(`^INVALID_MSG: Fetch from broker \d+ failed.*: Broker: Invalid message$`),
		}
		checkReport(t, e, ft, runErrorScript(t, e, ft, want.wantErrors(), pythonBin(), "py/confluent_kafka_errors.py"), want)
	})
	t.Run("kafka-python", func(t *testing.T) {
		needPython(t, "kafka", "python3-kafka")
		t.Parallel()
		ft := prepareFailures(t, e)
		want := errorExpectations{
			produce: regexp.MustCompile(`^PolicyViolationError: \[Error 44\]`),
			consume: regexp.MustCompile(`^CorruptRecordException: \[Error 2\]`),
		}
		checkReport(t, e, ft, runErrorScript(t, e, ft, want.wantErrors(), pythonBin(), "py/kafka_python_errors.py"), want)
	})
	t.Run("kafkajs", func(t *testing.T) {
		needKafkaJS(t)
		t.Parallel()
		ft := prepareFailures(t, e)
		// kafkajs retries a failed fetch five times, backing off,
		// before the consumer crashes and tells the application; one
		// crash is enough (it restarts and goes on retrying).
		want := errorExpectations{
			produce: regexp.MustCompile(`^KafkaJSProtocolError: Request parameters do not satisfy the configured policy \(POLICY_VIOLATION\)$`),
			consume: regexp.MustCompile(`^KafkaJSNumberOfRetriesExceeded: .*\(CORRUPT_MESSAGE\)$`),
			errors:  1,
		}
		checkReport(t, e, ft, runErrorScript(t, e, ft, want.wantErrors(), "node", "node/errors.js"), want)
	})
	for _, v := range []struct {
		name    string
		version sarama.KafkaVersion
	}{{"v1.0", sarama.V1_0_0_0}, {"v4.0", sarama.V4_0_0_0}} {
		t.Run("sarama/"+v.name, func(t *testing.T) {
			t.Parallel()
			ft := prepareFailures(t, e)
			checkReport(t, e, ft, saramaFailures(t, e, ft, v.version), errorExpectations{
				produce: regexp.MustCompile(`^kafka server: Request parameters do not satisfy the configured policy$`),
				consume: regexp.MustCompile(`^kafka: error while consuming .*/0: kafka server: Message contents does not match its CRC$`),
			})
		})
	}
	t.Run("franz-go", func(t *testing.T) {
		t.Parallel()
		ft := prepareFailures(t, e)
		checkReport(t, e, ft, franzFailures(t, e, ft, false), errorExpectations{
			produce: regexp.MustCompile(`^POLICY_VIOLATION: `),
			silent:  true,
		})
	})
	t.Run("franz-go/KeepRetryableFetchErrors", func(t *testing.T) {
		t.Parallel()
		ft := prepareFailures(t, e)
		checkReport(t, e, ft, franzFailures(t, e, ft, true), errorExpectations{
			produce: regexp.MustCompile(`^POLICY_VIOLATION: `),
			consume: regexp.MustCompile(`^CORRUPT_MESSAGE: `),
		})
	})
}

// matchingLines returns the lines of s that contain sub.
func matchingLines(s, sub string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// runUntil runs a client process until it exits, or until stop (if set)
// says yes to what it has written to stderr so far, or loop (if set, asked
// every 100 ms) says the client is refetching in a loop, or until
// errorClientTimeout; then it is interrupted. It returns its stdout and
// stderr; its exit status does not matter.
func runUntil(t *testing.T, stdin io.Reader, stop func(stderr string) bool, loop func() bool, name string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), errorClientTimeout)
	defer cancel()
	if loop != nil {
		// A client in a loop is stopped early, so that the test fails
		// without waiting for the timeout, and the gateway log it prints
		// stays short.
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					if loop() {
						cancel()
						return
					}
				}
			}
		}()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = stdin
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var (
		mu     sync.Mutex
		stderr strings.Builder
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			s := stderr.String()
			mu.Unlock()
			if stop != nil && stop(s) {
				cancel()
			}
		}
	}()
	<-done
	cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	return stdout.String(), stderr.String()
}

// runErrorScript runs a client script (py/*_errors.py, node/errors.js)
// against ft and returns its report.
func runErrorScript(t *testing.T, e *env, ft failedTopics, want int, cmd ...string) clientReport {
	t.Helper()
	spec, err := json.Marshal(map[string]any{
		"bootstrap":     e.addr,
		"produce_topic": ft.produce,
		"consume_topic": ft.consume,
		"group":         ft.consume + "-g",
		"want_errors":   want,
		"timeout_s":     int(errorClientTimeout/time.Second) - 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	loop := func() bool { return failedFetches(e, ft.consume) > maxFailedFetches }
	out, errOut := runUntil(t, nil, nil, loop, cmd[0], append(cmd[1:], specFile)...)
	var rep clientReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		// Stopped, or failed: checkReport says what the gateway saw.
		t.Errorf("%s printed no report (%v):\n%s\nstderr:\n%s", cmd[1], err, tail(out, 2000), tail(errOut, 4000))
		rep = clientReport{Client: filepath.Base(cmd[1])}
	}
	rep.log = errOut
	return rep
}

// saramaFailures produces and consumes with sarama told it talks to
// version: a sync producer, and a partition consumer returning errors.
func saramaFailures(t *testing.T, e *env, ft failedTopics, version sarama.KafkaVersion) clientReport {
	t.Helper()
	rep := clientReport{Client: "sarama " + version.String()}
	pcfg := saramaConfig(version, nil)
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Return.Successes = true
	prod, err := sarama.NewSyncProducer([]string{e.addr}, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: ft.produce, Value: sarama.StringEncoder(fmt.Sprint("v", i))})
		if err != nil {
			rep.ProduceErrors = append(rep.ProduceErrors, err.Error())
		} else {
			rep.Produced++
		}
	}
	prod.Close()

	ccfg := saramaConfig(version, nil)
	ccfg.Consumer.Return.Errors = true
	cons, err := sarama.NewConsumer([]string{e.addr}, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(ft.consume, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	deadline := time.After(errorClientTimeout)
	for len(rep.ConsumeErrors) < wantConsumeErrors {
		select {
		case <-pc.Messages():
			rep.Consumed++
		case err := <-pc.Errors():
			rep.ConsumeErrors = append(rep.ConsumeErrors, err.Error())
		case <-deadline:
			return rep
		}
	}
	return rep
}

// franzFailures produces and consumes with franz-go. Without keep, a
// retriable fetch error is retried inside the client, and the user is
// told nothing: the consumer polls for a few seconds.
func franzFailures(t *testing.T, e *env, ft failedTopics, keep bool) clientReport {
	t.Helper()
	rep := clientReport{Client: "franz-go"}
	ctx, cancel := context.WithTimeout(context.Background(), errorClientTimeout)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.DefaultProduceTopic(ft.produce))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range prod.ProduceSync(ctx, kgo.StringRecord("v0"), kgo.StringRecord("v1"), kgo.StringRecord("v2")) {
		if r.Err != nil {
			rep.ProduceErrors = append(rep.ProduceErrors, r.Err.Error())
		} else {
			rep.Produced++
		}
	}
	prod.Close()

	opts := []kgo.Opt{kgo.SeedBrokers(e.addr), kgo.ConsumeTopics(ft.consume), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	pollFor := errorClientTimeout
	if keep {
		opts = append(opts, kgo.KeepRetryableFetchErrors())
		rep.Client += " (KeepRetryableFetchErrors)"
	} else {
		pollFor = 5 * time.Second
	}
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pctx, pcancel := context.WithTimeout(ctx, pollFor)
	defer pcancel()
	for len(rep.ConsumeErrors) < wantConsumeErrors && pctx.Err() == nil {
		fs := cons.PollFetches(pctx)
		rep.Consumed += len(fs.Records())
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				rep.ConsumeErrors = append(rep.ConsumeErrors, err.Error())
			}
		})
	}
	return rep
}
