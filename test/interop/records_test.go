package interop

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// header is one record header. Value is raw bytes (base64 in JSON).
type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// record is a record to produce or one that was consumed. Keys and values
// travel as base64 in the JSON exchanged with client scripts.
type record struct {
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []header `json:"headers,omitempty"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
}

// recordSpec says what records to make.
type recordSpec struct {
	prefix string // key prefix, unique per topic
	n      int
	// text makes values and header values printable ASCII without
	// separators, for line-oriented clients such as kcat.
	text bool
	// headers adds headers derived from the key.
	headers bool
}

// makeRecords returns spec.n records. Key i is "<prefix>-<i>"; the value is
// a function of the key alone (see valueFor); headers, if asked for, are
// too. Sizes vary from a few bytes to 48 KiB, so batches span several
// frames and compression has work to do.
func makeRecords(spec recordSpec) []record {
	out := make([]record, spec.n)
	for i := range out {
		key := fmt.Sprintf("%s-%05d", spec.prefix, i)
		r := record{Key: []byte(key), Value: valueFor(key, i, spec.text)}
		if spec.headers {
			r.Headers = headersFor(key, i, spec.text)
		}
		out[i] = r
	}
	return out
}

func valueSize(i int) int {
	if i%50 == 49 {
		return 48<<10 + i
	}
	return 1 + (i*131)%1500
}

// valueFor is the value record i with the given key carries: half a
// compressible run of the key, half a SHA-256 stream seeded by the key
// (hex-encoded for text values).
func valueFor(key string, i int, text bool) []byte {
	size := valueSize(i)
	v := make([]byte, 0, size+64)
	for len(v) < size/2 {
		v = append(v, key...)
		v = append(v, '.')
	}
	seed := sha256.Sum256([]byte(key))
	for ctr := 0; len(v) < size; ctr++ {
		block := sha256.Sum256(append(seed[:], byte(ctr), byte(ctr>>8), byte(ctr>>16)))
		if text {
			v = hex.AppendEncode(v, block[:])
		} else {
			v = append(v, block[:]...)
		}
	}
	return v[:size]
}

func headersFor(key string, i int, text bool) []header {
	sum := sha256.Sum256([]byte(key))
	hs := []header{
		{Key: "idx", Value: []byte(strconv.Itoa(i))},
		{Key: "key-sum", Value: []byte(hex.EncodeToString(sum[:8]))},
	}
	if !text {
		hs = append(hs, header{Key: "bin", Value: []byte{0, 1, 0xfe, 0xff, byte(i)}})
	}
	return hs
}

// checkOpts tune verify.
type checkOpts struct {
	// headers compares headers; otherwise they are ignored.
	headers bool
	// partitions, if positive, is how many partitions the records must
	// have come from (keys hash over all of them, so all brokers served).
	partitions int
}

// verify checks that got holds exactly the records in want, once each, with
// identical keys, values and (if asked) headers.
func verify(t *testing.T, want, got []record, o checkOpts) {
	t.Helper()
	byKey := make(map[string]record, len(want))
	for _, r := range want {
		byKey[string(r.Key)] = r
	}
	seen := make(map[string]int, len(got))
	parts := map[int32]bool{}
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		} else if len(problems) == 20 {
			problems = append(problems, "...")
		}
	}
	for _, r := range got {
		k := string(r.Key)
		parts[r.Partition] = true
		w, ok := byKey[k]
		if !ok {
			report("unexpected record key %q (partition %d offset %d)", short(r.Key), r.Partition, r.Offset)
			continue
		}
		seen[k]++
		if seen[k] == 2 {
			report("record %q consumed more than once (partition %d offset %d)", k, r.Partition, r.Offset)
		}
		if !bytes.Equal(w.Value, r.Value) {
			report("record %q: value differs: want %d bytes %q, got %d bytes %q",
				k, len(w.Value), short(w.Value), len(r.Value), short(r.Value))
		}
		if o.headers && !sameHeaders(w.Headers, r.Headers) {
			report("record %q: headers differ: want %s, got %s", k, fmtHeaders(w.Headers), fmtHeaders(r.Headers))
		}
	}
	var missing []string
	for _, r := range want {
		if seen[string(r.Key)] == 0 {
			missing = append(missing, string(r.Key))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if len(missing) > 10 {
			missing = append(missing[:10], "...")
		}
		report("%d of %d records never consumed: %s", len(want)-len(seen), len(want), strings.Join(missing, ", "))
	}
	if len(got) != len(want) {
		report("consumed %d records, produced %d", len(got), len(want))
	}
	if o.partitions > 0 && len(parts) != o.partitions {
		report("records came from %d partitions, want %d", len(parts), o.partitions)
	}
	if len(problems) > 0 {
		t.Errorf("round trip of %d records failed:\n  %s", len(want), strings.Join(problems, "\n  "))
	}
}

func sameHeaders(a, b []header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func fmtHeaders(hs []header) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, fmt.Sprintf("%s=%q", h.Key, h.Value))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func short(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
