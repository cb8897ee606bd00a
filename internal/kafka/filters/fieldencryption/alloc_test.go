//go:build !race

// Under the race detector sync.Pool drops objects at random, so the pooled
// scratch is made anew and allocation bounds do not hold: this test is
// built without it only (go test without -race runs it).

package fieldencryption

import (
	"context"
	"testing"

	"github.com/straitgw/strait/internal/bench/kafkaload"
)

// TestPartitionAllocations seals and opens a partition of benchRecords
// reference records, after warm-up: the only allocation is the output
// slice, whatever the encoding and outcome, and deterministic mode adds
// none.
func TestPartitionAllocations(t *testing.T) {
	k := testKMS(t, "kek")
	ctx := context.Background()
	for _, kind := range []string{kafkaload.PayloadJSON, kafkaload.PayloadAvro, kafkaload.PayloadProtobuf} {
		for _, mode := range []string{modeRandom, modeDeterministic} {
			t.Run(kind+"/"+mode, func(t *testing.T) {
				cfg := referenceConfig(kind)
				cfg.Rules[0].Value.Fields[0].Mode = mode
				f := newFilter(t, cfg, k)
				pol := f.policy("bench")
				in := referenceBatch(t, kind)
				sealed, changed, err := f.sealPartition(ctx, "bench", pol, in)
				if err != nil || !changed {
					t.Fatalf("seal: changed %v, %v", changed, err)
				}
				seal := func() {
					if _, _, err := f.sealPartition(ctx, "bench", pol, in); err != nil {
						t.Fatal(err)
					}
				}
				open := func(redact bool) func() {
					return func() {
						if _, _, err := f.openPartition(ctx, "bench", pol.rule, redact, sealed); err != nil {
							t.Fatal(err)
						}
					}
				}
				for name, fn := range map[string]func(){"seal": seal, "open": open(false), "redact": open(true)} {
					for range 3 {
						fn()
					}
					if n := testing.AllocsPerRun(20, fn); n > 1 {
						t.Errorf("%s of %d records: %.1f allocations, want the output slice alone", name, benchRecords, n)
					}
				}
			})
		}
	}
}
