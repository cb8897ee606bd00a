package encryption

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kms"
)

// fixedKMS derives keys from nothing but its arguments, so that what the
// filter seals with them is the same on every run. It wraps no DEK: the
// records of these tests are tombstones without headers, which need none.
type fixedKMS struct{ newest int }

func (fixedKMS) Wrap(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("fixedKMS wraps nothing")
}

func (fixedKMS) Unwrap(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("fixedKMS unwraps nothing")
}

func (k fixedKMS) DeriveKey(_ context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	if version == 0 {
		version = k.newest
	}
	if version > k.newest {
		return nil, 0, kms.ErrKeyNotFound
	}
	h := sha256.New()
	h.Write([]byte(kek))
	h.Write(binary.AppendUvarint(nil, uint64(version)))
	h.Write(label)
	return h.Sum(nil), version, nil
}

func (fixedKMS) Name() string { return "fixed" }

// Record keys as this gateway stores them: the deterministic encryption of
// "alice" under fixedKMS's KEK users-kek. They pin the label and HKDF infos
// the keys are derived with: keys already in a topic must keep opening, and
// equal keys must keep sealing to the same bytes, or compaction would keep
// an old and a new copy of each.
const (
	aliceBoundV1   = "014ac2a820ab3347159f7b3a624a0a241002ffa448c5f3678e3a6dc69e3de8443277" // topic users bound, KEK version 1
	aliceUnboundV2 = "02ef5d4254d78c2a8d3b758299b100cda77010513dc15d6ed7b964c976cdcb9a9a69" // unbound, KEK version 2
)

func TestDeterministicKeysPinned(t *testing.T) {
	for _, c := range []struct {
		name   string
		newest int
		bind   bool
		stored string
	}{
		{"bound-v1", 1, true, aliceBoundV1},
		{"unbound-v2", 2, false, aliceUnboundV2},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Topics: []string{"users"}, KEK: "users-kek", EncryptKey: true, BindTopic: ptrBool(c.bind)}
			f := newTestFilter(t, cfg, fixedKMS{newest: c.newest})
			_, recs := decodeBatches(t, sealOne(t, f, "users", makeBatch(t, defaultBatchOpts(), rec{key: []byte("alice")})))
			if got := hex.EncodeToString(recs[0].Key); got != c.stored {
				t.Errorf("alice sealed to\n%s, want\n%s", got, c.stored)
			}

			// A stored record opens under a KMS whose newest version is
			// past the one it was sealed with.
			stored, err := hex.DecodeString(c.stored)
			if err != nil {
				t.Fatal(err)
			}
			flags := flagKey
			if c.bind {
				flags |= flagTopic
			}
			marker := append([]byte{envelopeVersion, flags, byte(len("users-kek"))}, "users-kek"...)
			batch := makeBatch(t, defaultBatchOpts(), rec{key: stored, headers: []kmsg.Header{{Key: markerKey, Value: marker}}})
			g := newTestFilter(t, cfg, fixedKMS{newest: 3})
			_, recs = decodeBatches(t, openOne(t, g, "users", batch))
			if string(recs[0].Key) != "alice" || recs[0].Value != nil || len(recs[0].Headers) != 0 {
				t.Errorf("the stored record opened to key %q, value %q, %d headers; want alice, a null value, no headers",
					recs[0].Key, recs[0].Value, len(recs[0].Headers))
			}
		})
	}
}

func TestMalformedEncryptedKey(t *testing.T) {
	f := newTestFilter(t, Config{Topics: []string{"users"}, KEK: "users-kek", EncryptKey: true}, fixedKMS{newest: 1})
	marker := append([]byte{envelopeVersion, flagKey | flagTopic, byte(len("users-kek"))}, "users-kek"...)
	for _, c := range []struct {
		name string
		key  []byte
		says string
	}{
		{"version 0", append([]byte{0}, make([]byte, 40)...), "record at offset 0: malformed encryption marker: encrypted key has no valid KEK version"},
		{"too short", []byte{1, 2, 3}, "record at offset 0: malformed encryption marker: encrypted key too short"},
	} {
		t.Run(c.name, func(t *testing.T) {
			batch := makeBatch(t, defaultBatchOpts(), rec{key: c.key, headers: []kmsg.Header{{Key: markerKey, Value: marker}}})
			_, err := f.openPartition(context.Background(), "users", batch)
			if !errors.Is(err, errBadEnvelope) || err.Error() != c.says || fetchCode(err).Message != "CORRUPT_MESSAGE" {
				t.Errorf("err %v (%s), want %q, CORRUPT_MESSAGE", err, fetchCode(err).Message, c.says)
			}
		})
	}
}
