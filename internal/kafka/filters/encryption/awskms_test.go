package encryption

// The record-encryption path against AWS KMS: a local KMS server
// (github.com/nsmithuk/local-kms) speaking the AWS KMS API, keys and aliases
// made through the AWS SDK, the gateway's KMS opened from its config block
// as `strait run` opens it, and franz-go clients producing and consuming
// through the gateway in front of a kfake broker.

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/awskms/localkms"
	"github.com/straitgw/strait/internal/kms/kmsconfig"
	"github.com/straitgw/strait/internal/kms/vault"
)

// startLocalKMS starts local-kms and points the standard AWS chain of this
// process at it (credentials and region from the environment, as the
// gateway takes them).
func startLocalKMS(t *testing.T) *localkms.Server {
	t.Helper()
	s := localkms.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", localkms.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", localkms.SecretKey)
	t.Setenv("AWS_REGION", localkms.Region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return s
}

func openKMS(t *testing.T, c kmsconfig.Config) kms.KMS {
	t.Helper()
	k, err := kmsconfig.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func awsCalls(op, outcome string) float64 {
	return testutil.ToFloat64(kms.Calls.WithLabelValues("aws", op, outcome))
}

// Records with keys (encrypted deterministically), headers and tombstones
// go through the gateway under KEKs named by alias/{topic}-kek: the broker
// holds ciphertext, and the records come back as produced, through this
// gateway and through a second one that shares nothing with it but the KMS.
func TestAWSKMSGateway(t *testing.T) {
	s := startLocalKMS(t)
	topics := []string{"secure-orders", "secure-users"}
	for _, tp := range topics {
		s.CreateKEK("alias/" + tp + "-kek")
		s.CreateHMACKey("alias/" + tp + "-kek-hmac")
	}
	broker := startBroker(t, topics...)
	block := kmsconfig.Config{Backend: kmsconfig.Backend{Type: "aws", Endpoint: s.Endpoint}}
	cfg := Config{Topics: []string{"secure-*"}, KEK: "alias/{topic}-kek", EncryptHeaders: true, EncryptKey: true}
	gw, _ := startGateway(t, broker, newTestFilter(t, cfg, openKMS(t, block)))
	for _, tp := range topics {
		want := testRecords(tp, 40)
		produceAll(t, client(t, []string{gw}, kgo.ProducerBatchCompression(kgo.ZstdCompression())), want)
		stored := consumeAll(t, broker, tp, len(want))
		for i, r := range stored {
			if bytes.Contains(r.Key, []byte("key-")) || (want[i].Value != nil && bytes.Contains(r.Value, []byte("4111"))) {
				t.Fatalf("%s: stored record %d holds plaintext", tp, i)
			}
			m, err := parseMarker(r.Headers[0].Value)
			if err != nil || string(m.kek) != "alias/"+tp+"-kek" {
				t.Fatalf("%s: stored record %d: marker names KEK %q (%v)", tp, i, m.kek, err)
			}
		}
		sameRecords(t, consumeAll(t, []string{gw}, tp, len(want)), want)
	}

	decrypts := awsCalls("unwrap", "ok")
	other, _ := startGateway(t, broker, newTestFilter(t, cfg, openKMS(t, block)))
	for _, tp := range topics {
		sameRecords(t, consumeAll(t, []string{other}, tp, 40), testRecords(tp, 40))
	}
	if n := awsCalls("unwrap", "ok") - decrypts; n < 2 {
		t.Errorf("the second gateway made %v successful Decrypt calls, want one per topic's DEK at least", n)
	}
}

// A KMS outage: local-kms is stopped mid-run. The DEK in use keeps
// encrypting and the DEKs already unwrapped keep decrypting; a topic that
// needs a new DEK fails closed, its producer told to retry
// (KAFKA_STORAGE_ERROR), nothing stored; when the KMS is back, it goes on.
func TestAWSKMSOutage(t *testing.T) {
	s := startLocalKMS(t)
	s.CreateKEK("alias/shared-kek")
	broker := startBroker(t, "secure-live", "secure-new")
	block := kmsconfig.Config{Backend: kmsconfig.Backend{Type: "aws", Endpoint: s.Endpoint}, Timeout: 2 * time.Second}
	f := newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "alias/shared-kek", KMSTimeout: block.Timeout}, openKMS(t, block))
	gw, _ := startGateway(t, broker, f)
	cl := client(t, []string{gw})
	before := testRecords("secure-live", 20)
	produceAll(t, cl, before)

	s.Stop()
	wraps := awsCalls("wrap", "ok")
	during := testRecords("secure-live", 20)
	produceAll(t, cl, during) // the DEK in use: no KMS call
	all := append(append([]*kgo.Record(nil), before...), during...)
	sameRecords(t, consumeAll(t, []string{gw}, "secure-live", len(all)), all)
	checkPlaintextAbsent(t, broker, "secure-live", len(all))

	// secure-new shares the KEK but is bound to its own topic: it needs a
	// DEK of its own, which needs the KMS.
	// Each try waits for the KMS call to time out (kms.timeout, 2 s here).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := client(t, []string{gw}, kgo.RecordRetries(2), kgo.DisableIdempotentWrite()).
		ProduceSync(ctx, testRecords("secure-new", 3)...).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Errorf("produce needing a new DEK during the outage: %v, want KAFKA_STORAGE_ERROR (retriable)", err)
	}
	if end := endOffset(t, broker, "secure-new"); end != 0 {
		t.Errorf("the broker stored %d records of secure-new during the outage", end)
	}
	if n := awsCalls("wrap", "unavailable"); n == 0 {
		t.Error("no Encrypt call was counted as unavailable")
	}
	if awsCalls("wrap", "ok") != wraps {
		t.Error("an Encrypt call succeeded with the KMS stopped")
	}

	s.Restart()
	// The producer retries until the KMS answers again.
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := testRecords("secure-new", 3)
	if err := client(t, []string{gw}).ProduceSync(ctx, want...).FirstErr(); err != nil {
		t.Fatalf("produce after the KMS came back: %v", err)
	}
	sameRecords(t, consumeAll(t, []string{gw}, "secure-new", len(want)), want)
}

// checkPlaintextAbsent reads n records of topic from the broker and fails
// if any value holds the test records' card number.
func checkPlaintextAbsent(t *testing.T, broker []string, topic string, n int) {
	t.Helper()
	for i, r := range consumeAll(t, broker, topic, n) {
		if bytes.Contains(r.Value, []byte("4111")) {
			t.Fatalf("%s: stored record %d is plaintext", topic, i)
		}
	}
}

// A topic moves from the filesystem vault to AWS KMS: the gateway's kms
// block becomes AWS KMS with the vault as previous, and the KEK template
// alias/{topic}-kek. Records written before the move (under the vault's
// {topic}-kek) and after it (under the alias) all read back, through the
// same gateway, and through one restarted cold; once the vault is
// dropped from the block, only the old records fail.
func TestAWSKMSMoveFromVault(t *testing.T) {
	s := startLocalKMS(t)
	s.CreateKEK("alias/secure-move-kek")
	broker := startBroker(t, "secure-move")
	dir := filepath.Join(t.TempDir(), "vault")
	if _, err := vault.CreateKey(dir, "secure-move-kek"); err != nil {
		t.Fatal(err)
	}
	vaultBlock := kmsconfig.Config{Backend: kmsconfig.Backend{Type: "vault", Path: dir}}
	oldGW, stop := startGateway(t, broker, newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek"}, openKMS(t, vaultBlock)))
	old := testRecords("secure-move", 10)
	produceAll(t, client(t, []string{oldGW}), old)
	stop()

	moved := kmsconfig.Config{
		Backend:  kmsconfig.Backend{Type: "aws", Endpoint: s.Endpoint},
		Previous: kmsconfig.Backend{Type: "vault", Path: dir},
	}
	cfg := Config{Topics: []string{"secure-*"}, KEK: "alias/{topic}-kek"}
	gw, stop2 := startGateway(t, broker, newTestFilter(t, cfg, openKMS(t, moved)))
	newer := testRecords("secure-move", 10)
	produceAll(t, client(t, []string{gw}), newer)
	all := append(append([]*kgo.Record(nil), old...), newer...)
	sameRecords(t, consumeAll(t, []string{gw}, "secure-move", len(all)), all)
	stored := consumeAll(t, broker, "secure-move", len(all))
	for i, r := range stored {
		if r.Value == nil {
			continue
		}
		m, _ := parseMarker(r.Headers[0].Value)
		want := "secure-move-kek"
		if i >= len(old) {
			want = "alias/secure-move-kek"
		}
		if string(m.kek) != want {
			t.Errorf("stored record %d is under KEK %q, want %q", i, m.kek, want)
		}
	}
	stop2()
	cold, _ := startGateway(t, broker, newTestFilter(t, cfg, openKMS(t, moved)))
	sameRecords(t, consumeAll(t, []string{cold}, "secure-move", len(all)), all)

	// Without the vault, the records written under it no longer read: the
	// partition fails from offset 0, and reads from the first record
	// written under AWS KMS.
	awsOnly, _ := startGateway(t, broker, newTestFilter(t, cfg, openKMS(t, kmsconfig.Config{Backend: moved.Backend})))
	if code, n := fetchAt(t, awsOnly, "secure-move", 0); code != kerr.CorruptMessage.Code || n != 0 {
		t.Errorf("vault records without the vault: code %d, %d records; want CORRUPT_MESSAGE and none", code, n)
	}
	if code, n := fetchAt(t, awsOnly, "secure-move", int64(len(old))); code != 0 || n != len(newer) {
		t.Errorf("AWS KMS records without the vault: code %d, %d records; want all %d", code, n, len(newer))
	}
}

// fetchAt fetches topic's partition 0 from offset through the gateway at
// addr (Fetch v12, which names topics) and returns the partition's error
// code and how many records it decrypted.
func fetchAt(t *testing.T, addr, topic string, offset int64) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(1, 12)
	resp, err := client(t, []string{addr}, kgo.MaxVersions(vs)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	_, recs := decodeBatches(t, p.RecordBatches)
	return p.ErrorCode, len(recs)
}
