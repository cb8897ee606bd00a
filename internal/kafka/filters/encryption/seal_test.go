package encryption

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/recordbatch"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/datakey"
	"github.com/straitgw/strait/internal/kms/vault"
)

var codecsUnderTest = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// sampleRecords covers the shapes a record can take: null and empty keys
// and values, headers with null values, a tombstone with headers, a large
// value, and timestamps that differ.
func sampleRecords() []rec {
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB, several xerial blocks when compressed
	return []rec{
		{key: []byte("user-1"), value: []byte(`{"card":"4111-1111-1111-1111"}`), headers: []kmsg.Header{{Key: "trace", Value: []byte("abc")}, {Key: "nullh", Value: nil}}},
		{key: nil, value: []byte("no key, secret-two"), tsDelta: 5},
		{key: []byte{}, value: []byte{}, tsDelta: 7},
		{key: []byte("user-2"), value: nil, tsDelta: 9},                                                        // tombstone
		{key: []byte("user-3"), value: nil, headers: []kmsg.Header{{Key: "why", Value: []byte("gdpr-erase")}}}, // tombstone with headers
		{key: []byte("user-4"), value: big, tsDelta: 1000},
		{key: []byte("user-1"), value: []byte("secret-three"), headers: []kmsg.Header{{Key: "", Value: []byte{}}}},
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	for _, c := range codecsUnderTest {
		for _, mode := range []struct {
			name           string
			headers, key   bool
			bind           bool
			transactional  bool
			idempotentOpts bool
		}{
			{name: "value", bind: true},
			{name: "headers", headers: true, bind: true, transactional: true, idempotentOpts: true},
			{name: "key", key: true, bind: true, idempotentOpts: true},
			{name: "all-unbound", headers: true, key: true},
		} {
			t.Run(c.name+"/"+mode.name, func(t *testing.T) {
				f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", EncryptHeaders: mode.headers,
					EncryptKey: mode.key, BindTopic: ptrBool(mode.bind)}, k)
				o := defaultBatchOpts()
				o.codec = c.codec
				if mode.idempotentOpts {
					o.producerID, o.producerEpoch, o.baseSequence = 4242, 3, 17
				}
				o.transactional = mode.transactional
				recs := sampleRecords()
				plain := makeBatch(t, o, recs...)
				sealed := sealOne(t, f, "orders", plain)

				plainHdr, plainRecs := decodeBatches(t, plain)
				sealedHdr, sealedRecs := decodeBatches(t, sealed)
				checkHeadersKept(t, plainHdr, sealedHdr)
				for i, r := range sealedRecs {
					in := recs[i]
					if len(r.Headers) == 0 || r.Headers[0].Key != markerKey {
						t.Fatalf("record %d: first header %v, want the marker", i, r.Headers)
					}
					if (in.value == nil) != (r.Value == nil) {
						t.Errorf("record %d: value null %v, stored null %v: tombstones must stay null", i, in.value == nil, r.Value == nil)
					}
					if len(in.value) > 4 && bytes.Contains(r.Value, in.value[:len(in.value)/2]) {
						t.Errorf("record %d: the stored value holds plaintext", i)
					}
					switch {
					case mode.key && in.key != nil:
						if bytes.Equal(r.Key, in.key) {
							t.Errorf("record %d: key stored in clear with encrypt_key", i)
						}
					default:
						if !bytes.Equal(r.Key, in.key) || (r.Key == nil) != (in.key == nil) {
							t.Errorf("record %d: key %q stored as %q; keys stay plaintext by default", i, in.key, r.Key)
						}
					}
					if mode.headers && len(in.headers) > 0 {
						if len(r.Headers) != 1 {
							t.Errorf("record %d: %d headers stored with encrypt_headers, want the marker alone", i, len(r.Headers))
						}
					} else if !reflect.DeepEqual(nilIfEmpty(r.Headers[1:]), nilIfEmpty(in.headers)) {
						t.Errorf("record %d: headers stored as %v, want the marker then %v", i, r.Headers, in.headers)
					}
				}
				for _, r := range sealedRecs {
					if bytes.Contains(r.Value, []byte("secret")) || bytes.Contains(r.Value, []byte("4111")) {
						t.Fatalf("plaintext in a stored value")
					}
					for _, h := range r.Headers {
						if bytes.Contains(h.Value, []byte("gdpr")) && mode.headers {
							t.Fatalf("plaintext header value stored with encrypt_headers")
						}
					}
				}

				opened := openOne(t, f, "orders", sealed)
				openedHdr, openedRecs := decodeBatches(t, opened)
				checkHeadersKept(t, plainHdr, openedHdr)
				if !reflect.DeepEqual(openedRecs, plainRecs) {
					t.Errorf("records after the round trip differ:\n got %s\nwant %s", summarize(openedRecs), summarize(plainRecs))
				}
				if c.name == "none" && !bytes.Equal(opened, plain) {
					t.Errorf("an uncompressed batch did not come back byte for byte")
				}
				if c.name == "snappy" && recordbatch.IsXerial(plain[recordbatch.HeaderLen:]) != recordbatch.IsXerial(sealed[recordbatch.HeaderLen:]) {
					t.Errorf("snappy framing changed")
				}
			})
		}
	}
}

func nilIfEmpty(h []kmsg.Header) []kmsg.Header {
	if len(h) == 0 {
		return nil
	}
	return h
}

func summarize(rs []decodedRecord) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "{off %d ts %d key %q value %d bytes headers %d} ", r.Offset, r.Timestamp, r.Key, len(r.Value), len(r.Headers))
	}
	return b.String()
}

// checkHeadersKept compares batch headers, but for length and CRC.
func checkHeadersKept(t testing.TB, want, got []kmsg.RecordBatch) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		w.Length, g.Length, w.CRC, g.CRC = 0, 0, 0, 0
		if !reflect.DeepEqual(w, g) {
			t.Errorf("batch %d header changed:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestSnappyXerialFramingKept(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	recs := sampleRecords()
	raw := makeBatch(t, defaultBatchOpts(), recs...)
	// Re-frame the records as the Java client does.
	xerial, err := f.codecs.Compress(nil, recordbatch.Snappy, raw[recordbatch.HeaderLen:], true)
	if err != nil {
		t.Fatal(err)
	}
	if !recordbatch.IsXerial(xerial) {
		t.Fatal("test setup: not xerial")
	}
	batch := append(append([]byte(nil), raw[:recordbatch.HeaderLen]...), xerial...)
	batch[22] |= byte(recordbatch.Snappy) // the low byte of the attributes
	recordbatch.Finish(batch, 0)
	_, want := decodeBatches(t, batch) // franz-go reads the framing too

	sealed := sealOne(t, f, "orders", batch)
	if !recordbatch.IsXerial(sealed[recordbatch.HeaderLen:]) {
		t.Error("a xerial-framed batch was re-encoded as raw snappy")
	}
	decodeBatches(t, sealed)
	_, got := decodeBatches(t, openOne(t, f, "orders", sealed))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records differ after the round trip")
	}
}

func TestControlBatchUntouched(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	o := defaultBatchOpts()
	o.producerID, o.producerEpoch, o.transactional = 9, 1, true
	ctrl := makeBatch(t, o, rec{key: []byte{0, 0, 0, 1}, value: []byte{0, 0, 0, 0, 0, 0}}) // a commit marker
	// The control bit, in the low byte of the attributes.
	ctrl[22] |= 0x20
	recordbatch.Finish(ctrl, 0)
	data := makeBatch(t, o, rec{value: []byte("secret")})
	in := append(append([]byte(nil), ctrl...), data...)

	sealed := sealOne(t, f, "orders", in)
	if !bytes.Equal(sealed[:len(ctrl)], ctrl) {
		t.Error("a control batch changed on the produce path")
	}
	opened := openOne(t, f, "orders", sealed)
	if !bytes.Equal(opened, in) {
		t.Error("control and data batches did not come back as they were")
	}
}

func TestOverheadOf1KiBRecord(t *testing.T) {
	const kek = "secure-orders-kek" // {topic}-kek for topic secure-orders: 17 bytes
	_, k := testVault(t, kek)
	f := newTestFilter(t, Config{Topics: []string{"secure-*"}, KEK: "{topic}-kek"}, k)
	value := bytes.Repeat([]byte{'x'}, 1024)
	// Enough records that the IV counter takes its largest size under
	// the default dek.max_records (3 bytes from 16384 on).
	recs := make([]rec, 20000)
	for i := range recs {
		recs[i] = rec{key: []byte("order-0001"), value: value}
	}
	plain := makeBatch(t, defaultBatchOpts(), recs...)
	sealed := sealOne(t, f, "secure-orders", plain)
	perRecord := float64(len(sealed)-len(plain)) / float64(len(recs))
	// The last record has the largest counter: measure it alone too.
	last := makeBatch(t, defaultBatchOpts(), recs[0])
	// Take the counters up to the largest (3 bytes) without sealing.
	skip := DefaultMaxRecords - 1 - len(recs)
	if _, first, got, err := f.ring.ReserveBound(context.Background(), kek, kms.Binding{Topic: "secure-orders"}, skip); err != nil || first != uint64(len(recs)) || got != skip {
		t.Fatalf("reserving %d counters after %d records: first %d, got %d (%v)", skip, len(recs), first, got, err)
	}
	sealedLast := sealOne(t, f, "secure-orders", last)
	worst := len(sealedLast) - len(last)
	t.Logf("overhead for a 1 KiB value, KEK name of %d bytes: %.1f bytes per record on average, %d at most", len(kek), perRecord, worst)
	if worst > 100 {
		t.Errorf("a 1 KiB record grows by %d bytes, want at most 100", worst)
	}
	// The formula docs/encryption.md gives: 77 + KEK name length, with a
	// 41-byte wrapped DEK and a 3-byte IV counter.
	if want := 77 + len(kek); worst != want {
		t.Errorf("overhead %d bytes, the documented formula gives %d", worst, want)
	}
}

func TestTamperedRecordFails(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	for _, mode := range []struct {
		name         string
		headers, key bool
	}{{"value", false, false}, {"headers-and-key", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", UnencryptedOnFetch: "reject",
				EncryptHeaders: mode.headers, EncryptKey: mode.key}, k)
			sealed := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(),
				rec{key: []byte("k1"), value: []byte("secret-value"), headers: []kmsg.Header{{Key: "h", Value: []byte("hv")}}}))
			r, _, err := recordbatch.ParseRecord(sealed[recordbatch.HeaderLen:])
			if err != nil {
				t.Fatal(err)
			}
			// The record's length varint and its prefix (attributes,
			// timestamp delta, offset delta) are not authenticated: the
			// broker may rewrite timestamps. Nor are headers left in
			// clear. Everything else is.
			from := recordbatch.HeaderLen + varintLen(int64(len(sealed)-recordbatch.HeaderLen-1)) + len(r.Prefix)
			to := len(sealed)
			if !mode.headers {
				_, others, _ := recordbatch.NextHeader(r.Headers)
				to -= len(others)
			}
			tried := 0
			for i := from; i < to; i++ {
				for _, bit := range []byte{0x01, 0x80} {
					bad := append([]byte(nil), sealed...)
					bad[i] ^= bit
					recordbatch.Finish(bad, 0)
					out, err := f.openPartition(context.Background(), "orders", bad)
					tried++
					if err == nil {
						t.Fatalf("flipping bit %#x of byte %d went unnoticed; got %d bytes", bit, i, len(out))
					}
					if len(out) != 0 {
						t.Fatalf("flipping byte %d: %d bytes handed on with the error", i, len(out))
					}
					if code := fetchCode(err); code.Code != 2 { // CORRUPT_MESSAGE
						t.Fatalf("flipping byte %d: error code %s, want CORRUPT_MESSAGE (err %v)", i, code.Message, err)
					}
				}
			}
			t.Logf("%d tampered copies, all refused", tried)
			// A bad CRC alone is caught too.
			bad := append([]byte(nil), sealed...)
			bad[17] ^= 1 // the CRC
			if _, err := f.openPartition(context.Background(), "orders", bad); !errors.Is(err, recordbatch.ErrBadCRC) {
				t.Errorf("bad CRC: err %v", err)
			}
		})
	}
}

func TestTopicBinding(t *testing.T) {
	_, k := testVault(t, "shared-kek")
	bound := newTestFilter(t, Config{Topics: []string{"*"}, KEK: "shared-kek"}, k)
	sealed := sealOne(t, bound, "payments", makeBatch(t, defaultBatchOpts(), rec{key: []byte("k"), value: []byte("secret")}))
	if _, err := bound.openPartition(context.Background(), "payments-copy", sealed); !errors.Is(err, errAuth) {
		t.Errorf("a bound record copied to another topic: err %v, want the tag to fail", err)
	}
	openOne(t, bound, "payments", sealed)

	unbound := newTestFilter(t, Config{Topics: []string{"*"}, KEK: "shared-kek", BindTopic: ptrBool(false)}, k)
	sealed = sealOne(t, unbound, "payments", makeBatch(t, defaultBatchOpts(), rec{key: []byte("k"), value: []byte("secret")}))
	_, got := decodeBatches(t, openOne(t, bound, "payments-mirror", sealed)) // the marker, not the config, says how it was sealed
	if string(got[0].Value) != "secret" {
		t.Errorf("an unbound record did not open in another topic: %q", got[0].Value)
	}
	// A value moved to another record key fails too.
	plain := makeBatch(t, defaultBatchOpts(), rec{key: []byte("alice"), value: []byte("balance=10")})
	sealed = sealOne(t, bound, "payments", plain)
	r, _, _ := recordbatch.ParseRecord(sealed[recordbatch.HeaderLen:])
	swapped := makeBatch(t, defaultBatchOpts(), rec{key: []byte("mallo"), value: r.Value, headers: []kmsg.Header{{Key: markerKey, Value: markerOf(t, sealed)}}})
	if _, err := bound.openPartition(context.Background(), "payments", swapped); !errors.Is(err, errAuth) {
		t.Errorf("a value moved to another key: err %v, want the tag to fail", err)
	}
}

// markerOf returns the marker value of the first record of a sealed batch.
func markerOf(t testing.TB, sealed []byte) []byte {
	t.Helper()
	r, _, err := recordbatch.ParseRecord(sealed[recordbatch.HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := recordbatch.NextHeader(r.Headers)
	if err != nil || string(h.Key) != markerKey {
		t.Fatalf("no marker: %v", err)
	}
	return h.Value
}

// markers returns the parsed markers of every record of sealed batches.
func markers(t testing.TB, b []byte) []marker {
	t.Helper()
	var out []marker
	_, recs := decodeBatches(t, b)
	for _, r := range recs {
		m, err := parseMarker(r.Headers[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestDEKRotationByCount(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", DEK: DEKConfig{MaxRecords: 5}}, k)
	recs := make([]rec, 12)
	for i := range recs {
		recs[i] = rec{value: []byte(fmt.Sprint("v", i))}
	}
	sealed := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(), recs...))
	ms := markers(t, sealed)
	deks := map[string][]uint64{}
	var order []string
	for _, m := range ms {
		if _, ok := deks[string(m.wrapped)]; !ok {
			order = append(order, string(m.wrapped))
		}
		deks[string(m.wrapped)] = append(deks[string(m.wrapped)], m.iv)
	}
	if len(deks) != 3 || k.wraps.Load() != 3 {
		t.Fatalf("12 records at 5 per DEK used %d DEKs (%d wraps), want 3", len(deks), k.wraps.Load())
	}
	for i, w := range order {
		want := []uint64{0, 1, 2, 3, 4}[:min(5, 12-5*i)]
		if !reflect.DeepEqual(deks[w], want) {
			t.Errorf("DEK %d IVs %v, want %v", i, deks[w], want)
		}
	}
	_, got := decodeBatches(t, openOne(t, f, "orders", sealed))
	for i, r := range got {
		if string(r.Value) != fmt.Sprint("v", i) {
			t.Errorf("record %d: %q", i, r.Value)
		}
	}
}

func TestDEKRotationByAge(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", DEK: DEKConfig{MaxAge: time.Hour}}, k)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	batch := makeBatch(t, defaultBatchOpts(), rec{value: []byte("v")})
	first := markers(t, sealOne(t, f, "orders", batch))[0]
	now = now.Add(59 * time.Minute)
	second := markers(t, sealOne(t, f, "orders", batch))[0]
	if !bytes.Equal(first.wrapped, second.wrapped) || second.iv != 1 {
		t.Errorf("within max_age the DEK changed (or its IV did not advance: %d)", second.iv)
	}
	now = now.Add(2 * time.Minute)
	third := markers(t, sealOne(t, f, "orders", batch))[0]
	if bytes.Equal(first.wrapped, third.wrapped) || third.iv != 0 {
		t.Errorf("past max_age the DEK stayed")
	}
	if k.wraps.Load() != 2 {
		t.Errorf("%d wraps, want 2", k.wraps.Load())
	}
}

func TestIVsNeverRepeat(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", DEK: DEKConfig{MaxRecords: 97}}, k)
	const workers, batches, perBatch = 8, 25, 13
	batch := make([]rec, perBatch)
	for i := range batch {
		batch[i] = rec{value: []byte("v")}
	}
	plain := makeBatch(t, defaultBatchOpts(), batch...)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range batches {
				sealed, err := f.sealPartition(context.Background(), "orders", f.pol.get("orders"), plain)
				if err != nil {
					t.Error(err)
					return
				}
				ms := markers(t, sealed)
				mu.Lock()
				for _, m := range ms {
					id := fmt.Sprintf("%x/%d", m.wrapped, m.iv)
					if seen[id] {
						t.Errorf("IV %d used twice under one DEK", m.iv)
					}
					seen[id] = true
					if m.iv >= 97 {
						t.Errorf("IV %d past max_records", m.iv)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != workers*batches*perBatch {
		t.Errorf("%d distinct (DEK, IV) pairs, want %d", len(seen), workers*batches*perBatch)
	}
}

func TestDeterministicKeys(t *testing.T) {
	dir, k := testVault(t, "users-kek")
	f := newTestFilter(t, Config{Topics: []string{"users", "users-eu"}, KEK: "users-kek", EncryptKey: true}, k)
	storedKey := func(f *Filter, topic, key string) []byte {
		_, recs := decodeBatches(t, sealOne(t, f, topic, makeBatch(t, defaultBatchOpts(), rec{key: []byte(key), value: []byte("v")})))
		return recs[0].Key
	}
	a1, a2 := storedKey(f, "users", "alice"), storedKey(f, "users", "alice")
	if !bytes.Equal(a1, a2) {
		t.Error("equal keys gave different ciphertexts: compaction would break")
	}
	if bytes.Contains(a1, []byte("alice")) {
		t.Error("key stored in clear")
	}
	if bytes.Equal(a1, storedKey(f, "users", "bob")) {
		t.Error("different keys gave equal ciphertexts")
	}
	if bytes.Equal(a1, storedKey(f, "users-eu", "alice")) {
		t.Error("the same key in two bound topics gave equal ciphertexts")
	}
	// Another instance (a restart) gives the same bytes.
	g := newTestFilter(t, Config{Topics: []string{"users"}, KEK: "users-kek", EncryptKey: true}, k)
	if !bytes.Equal(a1, storedKey(g, "users", "alice")) {
		t.Error("a second instance encrypted the same key differently")
	}
	if v, _, err := datakey.ReadVersion(a1); err != nil || v != 1 {
		t.Errorf("key records KEK version %d (%v), want 1", v, err)
	}

	// After a KEK rotation new keys use the new version; old ones still open.
	old := sealOne(t, f, "users", makeBatch(t, defaultBatchOpts(), rec{key: []byte("alice"), value: []byte("v")}))
	if _, err := vault.RotateKey(dir, "users-kek"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.now = func() time.Time { return now }
	deadline := time.Now().Add(5 * time.Second)
	var rotated []byte
	for time.Now().Before(deadline) { // the vault notices the new version within its reload interval
		// Past the 30 s for which the newest KEK version is cached.
		now = now.Add(time.Minute)
		if rotated = storedKey(f, "users", "alice"); !bytes.Equal(rotated, a1) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v, _, _ := datakey.ReadVersion(rotated); v != 2 {
		t.Fatalf("after rotation the key uses KEK version %d, want 2", v)
	}
	_, got := decodeBatches(t, openOne(t, f, "users", old))
	if string(got[0].Key) != "alice" {
		t.Errorf("an old-version key opened to %q", got[0].Key)
	}
}

func TestRestartedInstanceDecrypts(t *testing.T) {
	dir, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", EncryptHeaders: true, EncryptKey: true}, k)
	plain := makeBatch(t, defaultBatchOpts(), sampleRecords()...)
	sealed := sealOne(t, f, "orders", plain)
	// A new instance with its own view of the vault: it knows no DEK.
	v, err := vault.Open(dir, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sk := &switchKMS{KMS: v}
	g := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, sk)
	if !bytes.Equal(openOne(t, g, "orders", sealed), plain) {
		t.Error("a restarted instance did not decrypt to the original batch")
	}
	if sk.unwraps.Load() != 1 {
		t.Errorf("%d unwraps for one DEK, want 1 (cached)", sk.unwraps.Load())
	}
	openOne(t, g, "orders", sealed)
	if sk.unwraps.Load() != 1 {
		t.Errorf("the DEK was unwrapped again")
	}
}

func TestMissingKEKAndUnavailableKMS(t *testing.T) {
	_, k := testVault(t, "present-kek")
	f := newTestFilter(t, Config{Topics: []string{"*"}, KEK: "{topic}-kek"}, k)
	batch := makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")})
	_, err := f.sealPartition(context.Background(), "absent", f.pol.get("absent"), batch)
	if !errors.Is(err, kms.ErrKeyNotFound) || produceCode(err).Message != "POLICY_VIOLATION" {
		t.Errorf("missing KEK: err %v (%s)", err, produceCode(err).Message)
	}
	calls := k.wraps.Load()
	f.sealPartition(context.Background(), "absent", f.pol.get("absent"), batch)
	if k.wraps.Load() != calls {
		t.Error("a KEK just found missing was asked for again at once")
	}
	k.down.Store(true)
	_, err = f.sealPartition(context.Background(), "present", f.pol.get("present"), batch)
	if !errors.Is(err, kms.ErrUnavailable) || produceCode(err).Message != "KAFKA_STORAGE_ERROR" {
		t.Errorf("KMS down: err %v (%s)", err, produceCode(err).Message)
	}
	k.down.Store(false)
	sealed := sealOne(t, f, "present", batch)
	k.down.Store(true)
	g := newTestFilter(t, Config{Topics: []string{"*"}, KEK: "{topic}-kek"}, k)
	_, err = g.openPartition(context.Background(), "present", sealed)
	if !errors.Is(err, kms.ErrUnavailable) || fetchCode(err).Message != "KAFKA_STORAGE_ERROR" {
		t.Errorf("KMS down on fetch: err %v (%s)", err, fetchCode(err).Message)
	}
}

func TestOldFormatRejected(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	// A magic 1 message: offset, size, crc, magic 1, attributes, timestamp, key, value.
	msg := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 22, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	_, err := f.sealPartition(context.Background(), "orders", f.pol.get("orders"), msg)
	if !errors.Is(err, recordbatch.ErrOldFormat) || produceCode(err).Message != "UNSUPPORTED_FOR_MESSAGE_FORMAT" {
		t.Errorf("magic 1 on an encrypted topic: err %v", err)
	}
	if out := openOne(t, f, "orders", msg); !bytes.Equal(out, msg) {
		t.Error("a legacy message did not pass on fetch under unencrypted_on_fetch: pass")
	}
	r := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", UnencryptedOnFetch: "reject"}, k)
	if _, err := r.openPartition(context.Background(), "orders", msg); !errors.Is(err, errUnencrypted) {
		t.Errorf("a legacy message under reject: err %v", err)
	}
}

func TestUnencryptedRecordsOnFetch(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	pass := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	reject := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", UnencryptedOnFetch: "reject"}, k)
	legacy := makeBatch(t, defaultBatchOpts(), rec{value: []byte("written before encryption")},
		rec{value: []byte("spoof"), headers: []kmsg.Header{{Key: "x", Value: nil}, {Key: markerKey, Value: []byte{1, 0}}}})
	if out := openOne(t, pass, "orders", legacy); !bytes.Equal(out, legacy) {
		t.Error("pass: unencrypted records changed")
	}
	if _, err := reject.openPartition(context.Background(), "orders", legacy); !errors.Is(err, errUnencrypted) {
		t.Errorf("reject: err %v", err)
	}
	// Mixed: the encrypted batch first is handed on, the fetch stops at the unencrypted one.
	sealed := sealOne(t, reject, "orders", makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")}))
	o := defaultBatchOpts()
	o.baseOffset = 1
	mixed := append(append([]byte(nil), sealed...), makeBatch(t, o, rec{value: []byte("plain")})...)
	out, err := reject.openPartition(context.Background(), "orders", mixed)
	var re *recordError
	if !errors.As(err, &re) || re.offset != 1 {
		t.Fatalf("err %v, want the unencrypted record at offset 1", err)
	}
	if _, recs := decodeBatches(t, out); len(recs) != 1 || string(recs[0].Value) != "secret" {
		t.Errorf("the decryptable batch before the bad one was not handed on")
	}
}

func TestPartialTrailingBatchDropped(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek"}, k)
	sealed := sealOne(t, f, "orders", makeBatch(t, defaultBatchOpts(), rec{value: []byte("secret")}))
	o := defaultBatchOpts()
	o.baseOffset = 1
	next := sealOne(t, f, "orders", makeBatch(t, o, rec{value: []byte("secret-2")}))
	cut := append(append([]byte(nil), sealed...), next[:len(next)-10]...)
	_, recs := decodeBatches(t, openOne(t, f, "orders", cut))
	if len(recs) != 1 || string(recs[0].Value) != "secret" {
		t.Errorf("got %d records", len(recs))
	}
}

func TestDecompressionBomb(t *testing.T) {
	_, k := testVault(t, "orders-kek")
	f := newTestFilter(t, Config{Topics: []string{"orders"}, KEK: "orders-kek", MaxBatchBytes: 1 << 20}, k)
	for _, c := range codecsUnderTest[1:] {
		o := defaultBatchOpts()
		o.codec = c.codec
		big := makeBatch(t, o, rec{value: make([]byte, 2<<20)}) // compresses to almost nothing
		_, err := f.sealPartition(context.Background(), "orders", f.pol.get("orders"), big)
		if !errors.Is(err, recordbatch.ErrTooLarge) || produceCode(err).Message != "MESSAGE_TOO_LARGE" {
			t.Errorf("%s: 2 MiB under a 1 MiB limit: err %v", c.name, err)
		}
	}
}
