package encryption

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/kafka/topicsel"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kafka/wire"
)

func TestInterestCoversEveryVersion(t *testing.T) {
	_, k := testVault(t, "x")
	ch, err := filter.NewChain(newTestFilter(t, Config{Topics: []string{"*"}, KEK: "x"}, k))
	if err != nil {
		t.Fatal(err)
	}
	for v := int16(0); v <= wire.MaxVersion(wire.KeyProduce)+1; v++ {
		if ch.RequestMask(wire.KeyProduce, v) == 0 || ch.ResponseMask(wire.KeyProduce, v) == 0 {
			t.Errorf("Produce v%d passes unseen", v)
		}
	}
	for v := int16(0); v <= wire.MaxVersion(wire.KeyFetch)+1; v++ {
		if ch.ResponseMask(wire.KeyFetch, v) == 0 {
			t.Errorf("Fetch v%d responses pass unseen", v)
		}
		wantReq := v < minFetchVersion || v > maxFetchVersion
		if got := ch.RequestMask(wire.KeyFetch, v) != 0; got != wantReq {
			t.Errorf("Fetch v%d request subscribed = %v, want %v", v, got, wantReq)
		}
	}
	for v := int16(0); v <= wire.MaxVersion(wire.KeyShareFetch); v++ {
		if ch.ResponseMask(wire.KeyShareFetch, v) == 0 {
			t.Errorf("ShareFetch v%d responses pass unseen", v)
		}
	}
	if maxProduceVersion < wire.MaxVersion(wire.KeyProduce) || maxFetchVersion < wire.MaxVersion(wire.KeyFetch) ||
		maxShareFetchVersion < wire.MaxVersion(wire.KeyShareFetch) {
		t.Errorf("Strait reads Produce v%d, Fetch v%d, ShareFetch v%d, newer than this filter was written for: review the filter for them, then raise its limits",
			wire.MaxVersion(wire.KeyProduce), wire.MaxVersion(wire.KeyFetch), wire.MaxVersion(wire.KeyShareFetch))
	}
}

func TestProduceEncryptsOnlySelectedTopics(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	for _, version := range []int16{3, 9, 12, 13} {
		orders := makeBatch(t, defaultBatchOpts(), rec{key: []byte("k"), value: []byte("secret")})
		logs := makeBatch(t, defaultBatchOpts(), rec{value: []byte("plain log line")})
		req := produce(version, -1, map[string]map[int32][]byte{"orders": {0: orders}, "logs": {0: logs}})
		up, answer := runProduce(t, f, testCtx(t), req)
		if answer != nil {
			t.Fatalf("v%d: answered %+v", version, answer)
		}
		got, _ := requestRecords(up, "logs", 0)
		if !bytes.Equal(got, logs) {
			t.Errorf("v%d: an unselected topic's records changed", version)
		}
		got, _ = requestRecords(up, "orders", 0)
		if bytes.Contains(got, []byte("secret")) || len(markers(t, got)) != 1 {
			t.Errorf("v%d: the selected topic went upstream unencrypted", version)
		}
	}
}

func TestProduceFailsClosed(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders", "nokey"}, KEK: "{topic}-kek"}, k)
	secret := makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")})
	logs := makeBatch(t, defaultBatchOpts(), rec{value: []byte("log")})

	t.Run("kms down, mixed request", func(t *testing.T) {
		k.down.Store(true)
		defer k.down.Store(false)
		c := testCtx(t)
		req := produce(9, -1, map[string]map[int32][]byte{"orders": {0: secret, 1: secret}, "logs": {0: logs}})
		up, answer := runProduce(t, f, c, req)
		if answer != nil || up == nil {
			t.Fatal("a request with a topic that can go upstream was answered locally")
		}
		if _, ok := requestRecords(up, "orders", 0); ok {
			t.Fatal("the partition that could not be encrypted went upstream")
		}
		if bytes.Contains(up.AppendTo(nil), []byte("secret")) {
			t.Fatal("plaintext in what goes upstream")
		}
		if !f.WantsResponse(wire.KeyProduce, 9, nil) {
			t.Error("the skimmer declines the response the errors must be added to")
		}
		// The broker answers for logs; the filter adds orders.
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "logs"
		rt.Partitions = []kmsg.ProduceResponseTopicPartition{kmsg.NewProduceResponseTopicPartition()}
		resp.Topics = append(resp.Topics, rt)
		if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: 0, Version: 9, CorrelationID: 7}, Body: resp}); err != nil {
			t.Fatal(err)
		}
		codes := map[string]int16{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				codes[t.Topic+"/"+string(rune('0'+p.Partition))] = p.ErrorCode
			}
		}
		want := map[string]int16{"logs/0": 0, "orders/0": kerr.KafkaStorageError.Code, "orders/1": kerr.KafkaStorageError.Code}
		if len(codes) != len(want) {
			t.Fatalf("response partitions %v, want %v", codes, want)
		}
		for k, v := range want {
			if codes[k] != v {
				t.Errorf("%s: code %d, want %d", k, codes[k], v)
			}
		}
		if f.WantsResponse(wire.KeyProduce, 9, nil) {
			t.Error("Produce responses stay off the fast path after the errors were added")
		}
	})

	t.Run("kms down, nothing left", func(t *testing.T) {
		k.down.Store(true)
		defer k.down.Store(false)
		up, answer := runProduce(t, f, testCtx(t), produce(9, -1, map[string]map[int32][]byte{"orders": {0: secret}}))
		if up != nil || answer == nil {
			t.Fatal("want a local answer and nothing upstream")
		}
		if p := answer.Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code || p.BaseOffset != -1 ||
			p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "kms unavailable") {
			t.Errorf("answer %+v", p)
		}
	})

	t.Run("missing kek, reject", func(t *testing.T) {
		up, answer := runProduce(t, f, testCtx(t), produce(9, -1, map[string]map[int32][]byte{"nokey": {0: secret}}))
		if up != nil || answer == nil || answer.Topics[0].Partitions[0].ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("missing KEK: upstream %v, answer %+v", up != nil, answer)
		}
	})

	t.Run("missing kek, plaintext", func(t *testing.T) {
		p := newTestFilter(t, Config{Topics: []string{"nokey"}, KEK: "{topic}-kek", OnMissingKEK: "plaintext"}, k)
		up, answer := runProduce(t, p, testCtx(t), produce(9, -1, map[string]map[int32][]byte{"nokey": {0: secret}}))
		if answer != nil {
			t.Fatal("answered")
		}
		if got, _ := requestRecords(up, "nokey", 0); !bytes.Equal(got, secret) {
			t.Error("on_missing_kek: plaintext did not forward the records as they were")
		}
	})

	t.Run("acks=0", func(t *testing.T) {
		k.down.Store(true)
		defer k.down.Store(false)
		before := f.pending.Len()
		up, _ := runProduce(t, f, testCtx(t), produce(9, 0, map[string]map[int32][]byte{"orders": {0: secret}}))
		if up != nil {
			t.Fatal("acks=0: the request went upstream")
		}
		up, _ = runProduce(t, f, testCtx(t), produce(9, 0, map[string]map[int32][]byte{"orders": {0: secret}, "logs": {0: logs}}))
		if up == nil || bytes.Contains(up.AppendTo(nil), []byte("secret")) {
			t.Fatal("acks=0: plaintext upstream, or nothing at all")
		}
		if f.pending.Len() != before {
			t.Error("acks=0: errors kept for a response that never comes")
		}
	})

	t.Run("unknown topic id", func(t *testing.T) {
		req := produce(13, -1, map[string]map[int32][]byte{"orders": {0: secret}})
		id := [16]byte{0xde, 0xad}
		req.Topics[0].TopicID = id
		up, answer := runProduce(t, f, testCtx(t), req)
		if up != nil || answer == nil || answer.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code ||
			answer.Topics[0].TopicID != id {
			t.Fatalf("upstream %v, answer %+v", up != nil, answer)
		}
	})

	t.Run("legacy format", func(t *testing.T) {
		msg := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 22, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
		up, answer := runProduce(t, f, testCtx(t), produce(2, -1, map[string]map[int32][]byte{"orders": {0: msg}}))
		if up != nil || answer == nil || answer.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedForMessageFormat.Code {
			t.Fatalf("upstream %v, answer %+v", up != nil, answer)
		}
		up, _ = runProduce(t, f, testCtx(t), produce(2, -1, map[string]map[int32][]byte{"logs": {0: msg}}))
		if got, _ := requestRecords(up, "logs", 0); !bytes.Equal(got, msg) {
			t.Error("legacy format on an unencrypted topic was touched")
		}
	})

	t.Run("corrupt batch", func(t *testing.T) {
		bad := append([]byte(nil), secret...)
		bad[len(bad)-1] ^= 1
		up, answer := runProduce(t, f, testCtx(t), produce(9, -1, map[string]map[int32][]byte{"orders": {0: bad}}))
		if up != nil || answer == nil || answer.Topics[0].Partitions[0].ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("bad CRC: upstream %v, answer %+v", up != nil, answer)
		}
		recordbatch.Finish(bad, 0)
		bad[len(bad)-3] = 0x7f // a header count or length that runs past the record
		recordbatch.Finish(bad, 0)
		up, answer = runProduce(t, f, testCtx(t), produce(9, -1, map[string]map[int32][]byte{"orders": {0: bad[:len(bad)-1]}}))
		if up != nil || answer == nil || answer.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("cut batch: upstream %v, answer %+v", up != nil, answer)
		}
	})
}

func TestFetchDecrypts(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	plain := makeBatch(t, defaultBatchOpts(), rec{key: []byte("k"), value: []byte("secret")})
	sealed := sealOne(t, f, "orders", plain)
	logs := makeBatch(t, defaultBatchOpts(), rec{value: []byte("log")})
	for _, version := range []int16{4, 12, 13, 18} {
		resp := fetchResponse(version, map[string][]byte{"orders": sealed, "logs": logs})
		runFetch(t, f, testCtx(t), resp)
		if p := fetched(t, resp, "orders"); p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, plain) {
			t.Errorf("v%d: code %d, records decrypted %v", version, p.ErrorCode, bytes.Equal(p.RecordBatches, plain))
		}
		if p := fetched(t, resp, "logs"); !bytes.Equal(p.RecordBatches, logs) {
			t.Errorf("v%d: an unselected topic changed", version)
		}
	}
}

func TestFetchFailsClosed(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	sealed := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")}))

	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1 // the IV counter, last byte of the marker
	recordbatch.Finish(tampered, 0)
	resp := fetchResponse(12, map[string][]byte{"orders": tampered})
	runFetch(t, f, testCtx(t), resp)
	if p := fetched(t, resp, "orders"); p.ErrorCode != kerr.CorruptMessage.Code || len(p.RecordBatches) != 0 {
		t.Errorf("tampered: code %d, %d bytes handed on", p.ErrorCode, len(p.RecordBatches))
	}

	resp = fetchResponse(13, map[string][]byte{"orders": sealed})
	resp.Topics[0].TopicID = [16]byte{0xbe, 0xef}
	runFetch(t, f, testCtx(t), resp)
	if p := &resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code || len(p.RecordBatches) != 0 {
		t.Errorf("unknown topic id: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}

	g := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k) // knows no DEK
	k.down.Store(true)
	resp = fetchResponse(12, map[string][]byte{"orders": sealed})
	runFetch(t, g, testCtx(t), resp)
	k.down.Store(false)
	if p := fetched(t, resp, "orders"); p.ErrorCode != kerr.KafkaStorageError.Code || len(p.RecordBatches) != 0 {
		t.Errorf("kms down: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

func TestOldFetchVersionsRefused(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	fetchReq := func(topics ...string) *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.Version = 3
		for _, name := range topics {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = name
			p := kmsg.NewFetchRequestTopicPartition()
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
		}
		return r
	}
	c := testCtx(t)
	fr := filter.Request{Header: filter.Header{Key: 1, Version: 3, CorrelationID: 3}, Body: fetchReq("orders")}
	if _, err := ch.OnRequest(c, ch.RequestMask(1, 3), &fr); err != nil {
		t.Fatal(err)
	}
	ans, ok := fr.Response().(*kmsg.FetchResponse)
	if !ok || ans.Topics[0].Topic != "orders" || ans.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("Fetch v3 of an encrypted topic: answer %+v", fr.Response())
	}

	fr = filter.Request{Header: filter.Header{Key: 1, Version: 3, CorrelationID: 4}, Body: fetchReq("orders", "logs")}
	if _, err := ch.OnRequest(c, ch.RequestMask(1, 3), &fr); err != nil {
		t.Fatal(err)
	}
	up := fr.Body.(*kmsg.FetchRequest)
	if fr.Response() != nil || len(up.Topics) != 1 || up.Topics[0].Topic != "logs" {
		t.Fatalf("mixed Fetch v3: %d topics upstream, answered %v", len(up.Topics), fr.Response() != nil)
	}
	resp := fetchResponse(3, map[string][]byte{"logs": nil})
	if err := f.OnResponse(c, &filter.Response{Header: filter.Header{Key: 1, Version: 3, CorrelationID: 4}, Body: resp}); err != nil {
		t.Fatal(err)
	}
	if p := fetched(t, resp, "orders"); p.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("the refused topic is missing from the response, or has code %d", p.ErrorCode)
	}
}

func TestShareFetchDecrypts(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	plain := makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")})
	sealed := sealOne(t, f, "orders", plain)
	mk := func(b []byte) *kmsg.ShareFetchResponse {
		r := kmsg.NewPtrShareFetchResponse()
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = topicID("orders")
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Records = b
		p.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 0, LastOffset: 0, DeliveryCount: 1}}
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}
	resp := mk(sealed)
	if err := f.OnResponse(testCtx(t), &filter.Response{Header: filter.Header{Key: wire.KeyShareFetch, Version: 1}, Body: resp}); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; !bytes.Equal(p.Records, plain) {
		t.Error("share fetch not decrypted")
	}
	bad := append([]byte(nil), sealed...)
	bad[len(bad)-1] ^= 1
	recordbatch.Finish(bad, 0)
	resp = mk(bad)
	if err := f.OnResponse(testCtx(t), &filter.Response{Header: filter.Header{Key: wire.KeyShareFetch, Version: 1}, Body: resp}); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.CorruptMessage.Code || len(p.Records) != 0 || p.AcquiredRecords != nil {
		t.Errorf("tampered share fetch: code %d, %d bytes", p.ErrorCode, len(p.Records))
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want []string // substrings of the error, each naming a field
	}{
		{Config{}, []string{"topics: is empty", "kek: is empty"}},
		{Config{Topics: []string{"a", "", "b[", "ok-*"}, KEK: "k"}, []string{"topics[1]: is empty", `topics[2]: "b[" is not a valid glob`}},
		{Config{Topics: []string{"a"}, KEK: "${TOPIC}-{name}"}, []string{"kek:", "{topic} is the only one"}},
		{Config{Topics: []string{"a"}, KEK: strings.Repeat("k", 256)}, []string{"kek:", "at most 255 bytes"}},
		{Config{Topics: []string{"a"}, KEK: "k", OnMissingKEK: "drop", UnencryptedOnFetch: "allow"},
			[]string{`on_missing_kek: "drop"`, "reject", "plaintext", `unencrypted_on_fetch: "allow"`}},
		{Config{Topics: []string{"a"}, KEK: "k", DEK: DEKConfig{MaxRecords: 1 << 33, MaxAge: 1}}, []string{"dek.max_records:", "dek.max_age:"}},
		{Config{Topics: []string{"a"}, KEK: "k", MaxBatchBytes: 100}, []string{"max_batch_bytes:"}},
	} {
		err := tt.cfg.Validate()
		if err == nil {
			t.Errorf("%+v: no error", tt.cfg)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
	}
	if err := (Config{Topics: []string{"orders", "secure-*", "*-pii", `literal\*`}, KEK: "{topic}-kek"}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
	if _, err := New(Config{Topics: []string{"a"}, KEK: "k"}, nil); err == nil {
		t.Error("New accepted no KMS")
	}
}

func TestPolicies(t *testing.T) {
	s := topicsel.New([]string{"orders", "secure-*"})
	p := newPolicies(s, "{topic}-kek")
	if tp := p.get("secure-x"); !tp.encrypt || tp.kek != "secure-x-kek" {
		t.Errorf("policy %+v", tp)
	}
	if tp := p.get("other"); tp.encrypt {
		t.Error("unselected topic encrypted")
	}
	long := "secure-" + strings.Repeat("x", 249)
	if tp := p.get(long); !errors.Is(tp.kekErr, errKEKName) {
		t.Error("a KEK name over 255 bytes was accepted")
	}
	_, k := testVault(t, "x")
	f := newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek"}, k)
	_, err := f.sealPartition(context.Background(), long, f.pol.get(long), makeBatch(t, defaultBatchOpts(), rec{value: []byte("v")}))
	if produceCode(err) != kerr.PolicyViolation {
		t.Errorf("too long a KEK name: %v", err)
	}
}

// A batch that fits Kafka's default max.message.bytes in plaintext but not
// once encrypted still goes upstream (the topic may allow more), with a
// warning that tells the operator what to change.
func TestProduceWarnsWhenEncryptionOutgrowsTheDefaultBatchLimit(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	var logs bytes.Buffer
	c := testCtx(t)
	c.Log = slog.New(slog.NewTextHandler(&logs, nil))
	var recs []rec
	for range 1000 { // ~1,000 × 1 KiB: under 1,048,588 bytes in plaintext
		recs = append(recs, rec{value: bytes.Repeat([]byte("x"), 1000)})
	}
	batch := makeBatch(t, defaultBatchOpts(), recs...)
	if len(batch) > defaultMaxMessageBytes {
		t.Fatalf("test batch of %d bytes is already over the limit", len(batch))
	}
	for range 2 {
		up, answer := runProduce(t, f, c, produce(9, -1, map[string]map[int32][]byte{"orders": {0: batch}}))
		if answer != nil {
			t.Fatalf("answered %+v", answer)
		}
		if got, _ := requestRecords(up, "orders", 0); len(got) <= defaultMaxMessageBytes {
			t.Fatalf("encrypted batch of %d bytes: the test expects it over the limit", len(got))
		}
	}
	if n := strings.Count(logs.String(), "lower the producer's batch.size"); n != 1 {
		t.Errorf("%d warnings for two oversized batches within a minute, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "topic=orders") {
		t.Errorf("the warning does not name the topic:\n%s", logs.String())
	}
}

// A fetch that carries no records of an encrypted topic is left as the
// broker sent it, and the filter says so, so that the proxy forwards the
// broker's bytes instead of re-encoding them.
func TestFetchOfUnselectedTopicsIsMarkedUnchanged(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	chain, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	plain := makeBatch(t, defaultBatchOpts(), rec{value: []byte("a log line")})
	secret := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")}))
	for _, tc := range []struct {
		name      string
		parts     map[string][]byte
		untouched bool
	}{
		{"only unselected topics", map[string][]byte{"logs": plain}, true},
		{"an encrypted topic", map[string][]byte{"logs": plain, "orders": secret}, false},
	} {
		resp := fetchResponse(12, tc.parts)
		fr := &filter.Response{Header: filter.Header{Key: 1, Version: 12, CorrelationID: 9}, Body: resp}
		if err := chain.OnResponse(testCtx(t), chain.ResponseMask(1, 12), 1, fr); err != nil {
			t.Fatal(err)
		}
		if fr.Untouched() != tc.untouched {
			t.Errorf("%s: Untouched %v, want %v", tc.name, fr.Untouched(), tc.untouched)
		}
		if !tc.untouched && !bytes.Equal(fetched(t, resp, "orders").RecordBatches, makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")})) {
			t.Errorf("%s: the encrypted topic was not decrypted", tc.name)
		}
	}
}
