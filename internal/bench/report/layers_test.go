package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/bench/result"
)

// payloadLayers are setups of a run that sends several payloads: the
// random one, and Avro and JSON reference records. The publish p50 of each
// is its index plus one, so that each share names its baseline.
func payloadLayers() []Layer {
	setup := func(label, payload string, over int, p50 float64) Layer {
		k := &result.Kafka{Label: label, Valid: true, TargetRate: 1000, PublishRate: 1000, ConsumeRate: 1000,
			PublishLatency: lat(p50, 2*p50, 3*p50, 4*p50), E2ELatency: lat(p50, 2*p50, 3*p50, 4*p50)}
		return Layer{Run: KafkaRun(k), Payload: payload, Over: over}
	}
	return []Layer{
		setup("direct", "random", -1, 1),
		setup("passthrough", "random", 0, 2),
		setup("direct-avro", "avro, schema id 1", 0, 3),
		setup("passthrough-avro", "avro, schema id 1", 2, 4),
		setup("sfe-avro", "avro, schema id 1", 3, 5),
		setup("sfe-json", "json", 1, 6),
	}
}

func TestLayerTableShowsPayloadsAndBaselines(t *testing.T) {
	var b bytes.Buffer
	if err := LayerTable(&b, payloadLayers()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| setup | payload | p50 | p95 | p99 | p99.9 |\n|---|---|---:|---:|---:|---:|\n",
		"| direct | random | 1.00 | 2.00 | 3.00 | 4.00 |",
		"| sfe-avro | avro, schema id 1 | 5.00 | 10.00 | 15.00 | 20.00 |",
		// The share tables keep their columns.
		"| layer | p50 | p95 | p99 | p99.9 |\n|---|---:|---:|---:|---:|\n",
		"| passthrough over direct | +1.00 | +2.00 | +3.00 | +4.00 |",
		"| direct-avro over direct (payload differs) | +2.00 | +4.00 | +6.00 | +8.00 |",
		"| passthrough-avro over direct-avro | +1.00 | +2.00 | +3.00 | +4.00 |",
		"| sfe-avro over passthrough-avro | +1.00 | +2.00 | +3.00 | +4.00 |",
		"| sfe-json over passthrough (payload differs) | +4.00 | +8.00 | +12.00 | +16.00 |",
		"| payload | random | random | avro, schema id 1 | avro, schema id 1 | avro, schema id 1 | json |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("layer table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "| sfe-avro over passthrough-avro |"); n != 2 {
		t.Errorf("%d shares of sfe-avro, want one per series:\n%s", n, out)
	}
}

// Setups that all sent the same payload get the table as before: no
// payload column or row, each share over the setup it names.
func TestLayerTableOfOnePayloadHasNoPayloadColumn(t *testing.T) {
	layers := payloadLayers()[:2]
	for i := range layers {
		layers[i].Payload = "avro, schema id 1"
	}
	var b bytes.Buffer
	if err := LayerTable(&b, layers); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "payload") || !strings.Contains(out, "| setup | p50 | p95 | p99 | p99.9 |\n|---|---:|") {
		t.Errorf("a table of one payload shows it:\n%s", out)
	}
}

func TestLayerTableRefusesABaselineThatIsNotEarlier(t *testing.T) {
	for _, over := range []int{-1, 2, 5} {
		layers := payloadLayers()[:3]
		layers[2].Over = over
		var b bytes.Buffer
		err := LayerTable(&b, layers)
		if err == nil || !strings.Contains(err.Error(), "direct-avro") || !strings.Contains(err.Error(), "not an earlier setup") {
			t.Errorf("baseline %d of the third setup: %v, want an error naming direct-avro", over, err)
		}
		if b.Len() > 0 {
			t.Errorf("baseline %d: wrote a table anyway", over)
		}
	}
}
