package fieldencryption

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// anyEnvelope is a JSON string as long as an envelope.
var anyEnvelope = regexp.MustCompile(`"([A-Za-z0-9_-]{20,})"`)

// TestNoncesNeverRepeat seals, from several goroutines at once, partitions
// of records whose random-mode fields all hold one value, with DEKs that
// run out every few values: under a repeated nonce equal values would
// give equal ciphertexts (GCM's tag aside), so every ciphertext must
// differ; and every record must still open.
func TestNoncesNeverRepeat(t *testing.T) {
	k := testKMS(t, "kek")
	cfg := jsonConfig("ssn", "alt", "cards[*]")
	// A record holds 4 values: a DEK serves at least one record.
	for _, maxRecords := range []uint64{4, 7, 1000} {
		t.Run(fmt.Sprint(maxRecords), func(t *testing.T) {
			cfg.DEK.MaxRecords = maxRecords
			f := newFilter(t, cfg, k)
			pol := f.policy("pii-people")
			var recs []rec
			for range 40 {
				recs = append(recs, rec{value: []byte(`{"ssn":"123-45-6789","alt":"123-45-6789","cards":["123-45-6789","123-45-6789"]}`)})
			}
			in := makeBatch(t, kgo.NoCompression(), recs...)
			in = append(in, in...)
			const workers, partitions = 4, 5
			sealed := make([][]byte, workers*partitions)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for p := range partitions {
						out, _, err := f.sealPartition(context.Background(), "pii-people", pol, in)
						if err != nil {
							t.Error(err)
							return
						}
						sealed[w*partitions+p] = out
					}
				})
			}
			wg.Wait()
			seen := map[string]bool{}
			c, _ := testCtx(t, "")
			for _, s := range sealed {
				for _, r := range decodeRecords(t, s) {
					for _, m := range anyEnvelope.FindAllSubmatch(r.Value, -1) {
						raw, err := b64.DecodeString(string(m[1]))
						if err != nil {
							t.Fatal(err)
						}
						body := string(raw[:len(raw)-16])
						if seen[body] {
							t.Fatalf("two values encrypted to the same ciphertext: a nonce was used twice")
						}
						seen[body] = true
					}
				}
				if p, _ := fetchOne(t, f, c, "pii-people", s); p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, in) {
					t.Fatalf("fetch: error %d", p.ErrorCode)
				}
			}
			if want := workers * partitions * 2 * len(recs) * 4; len(seen) != want {
				t.Errorf("%d ciphertexts, want %d", len(seen), want)
			}
		})
	}
}
