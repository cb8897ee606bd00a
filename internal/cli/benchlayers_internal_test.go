package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/auth/credstore"

	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/kms/vault"
)

func TestMedianRoundPrefersValidRoundsAndTakesTheMiddleP99(t *testing.T) {
	run := func(label string, p99 float64, valid bool) *result.Kafka {
		return &result.Kafka{Label: label, Valid: valid, PublishLatency: result.Latency{P99: p99}}
	}
	for _, tc := range []struct {
		rounds []*result.Kafka
		want   string
	}{
		{[]*result.Kafka{run("a", 9, true), run("b", 1, true), run("c", 5, true)}, "c"},
		{[]*result.Kafka{run("a", 9, true), run("b", 1, true)}, "b"},                     // the lower middle
		{[]*result.Kafka{run("a", 9, true), run("b", 1, false), run("c", 5, true)}, "c"}, // b does not count
		{[]*result.Kafka{run("a", 9, false), run("b", 1, false)}, "b"},                   // none counts: still one
		{[]*result.Kafka{run("a", 3, true)}, "a"},
	} {
		if got := medianRound(tc.rounds).Label; got != tc.want {
			t.Errorf("median of %v: %s, want %s", labels(tc.rounds), got, tc.want)
		}
	}
}

func labels(rs []*result.Kafka) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Label)
	}
	return out
}

// Every layer config in bench/layers loads with the environment `strait
// bench layers` gives it (the schemas it writes included), so a layer run
// does not fail minutes in on a config error.
func TestBenchLayerConfigsLoad(t *testing.T) {
	dir := t.TempDir()
	if err := writeBenchSchemas(filepath.Join(dir, "schemas")); err != nil {
		t.Fatal(err)
	}
	if _, err := vault.CreateKey(filepath.Join(dir, "vault"), "bench-kek"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRAIT_BENCH_BROKER", "127.0.0.1:9")
	t.Setenv("STRAIT_BENCH_LISTEN", "127.0.0.1:10")
	t.Setenv("STRAIT_BENCH_ADMIN", "127.0.0.1:8")
	t.Setenv("STRAIT_BENCH_VAULT", filepath.Join(dir, "vault"))
	t.Setenv("STRAIT_BENCH_SCHEMAS", filepath.Join(dir, "schemas"))
	// What a --security sasl_ssl run adds: certificates, a credential
	// store, the user and password.
	cert, key, err := writeSelfSigned(dir)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users.store")
	if _, err := credstore.AddUser(users, "bench", "bench-secret", credstore.MinIterations); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"STRAIT_BENCH_CA": cert, "STRAIT_BENCH_TLS_CERT": cert, "STRAIT_BENCH_TLS_KEY": key,
		"STRAIT_BENCH_USERS": users, "STRAIT_BENCH_USER": "bench", "STRAIT_BENCH_PASSWORD": "bench-secret"} {
		t.Setenv(k, v)
	}
	// What the AWS KMS layer takes from the standard AWS chain.
	t.Setenv("AWS_REGION", "eu-west-2")
	paths, err := filepath.Glob("../../bench/layers/*.yaml")
	if err != nil || len(paths) < 5 {
		t.Fatalf("bench/layers: %v %v", paths, err)
	}
	for _, p := range paths {
		if _, _, err := loadConfig(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestParseLayerReadsTheConfigAndTheWorkloadOptions(t *testing.T) {
	w := kafkaload.DefaultWorkload()
	for _, tc := range []struct {
		arg      string
		want     layerSetup
		inConfig string
	}{
		{"enc=../../bench/layers/encryption.yaml", layerSetup{name: "enc", payload: "random"}, "record-encryption"},
		{"v=../../bench/layers/validation-avro.yaml,payload=avro,schema-id=1", layerSetup{name: "v", payload: "avro", schemaID: 1}, "record-validation"},
		{"direct-json=direct,payload=json", layerSetup{name: "direct-json", direct: true, payload: "json"}, ""},
		{"pass-proto=passthrough,schema-id=7,payload=protobuf", layerSetup{name: "pass-proto", payload: "protobuf", schemaID: 7}, ""},
	} {
		got, err := parseLayer(tc.arg, w)
		if err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		if !strings.Contains(got.config, tc.inConfig) || (tc.inConfig == "") != (got.config == "") {
			t.Errorf("%s: config %.60q, want one holding %q", tc.arg, got.config, tc.inConfig)
		}
		got.config = ""
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.arg, got, tc.want)
		}
	}
}

// A setup's options start from the run's workload and change only what
// they name.
func TestParseLayerKeepsTheRunsPayloadAndSchemaID(t *testing.T) {
	w := kafkaload.DefaultWorkload()
	w.Payload, w.SchemaID = "avro", 3
	got, err := parseLayer("p=passthrough,payload=json", w)
	if err != nil || got.payload != "json" || got.schemaID != 3 {
		t.Errorf("payload=json over --payload avro --schema-id 3: %+v, %v; want json with schema id 3", got, err)
	}
	got, err = parseLayer("p=passthrough,payload=random,schema-id=0", w)
	if err != nil || got.payload != "random" || got.schemaID != 0 {
		t.Errorf("payload=random,schema-id=0 over --schema-id 3: %+v, %v; want random without a schema id", got, err)
	}
}

func TestParseLayerErrorsSayWhatIsWrong(t *testing.T) {
	w := kafkaload.DefaultWorkload()
	for _, tc := range []struct{ arg, want string }{
		{"enc", `--layer "enc": want NAME=CONFIG.yaml[,payload=KIND][,schema-id=N]`},
		{"=x.yaml", `--layer "=x.yaml": want NAME=`},
		{"enc=", `--layer "enc=": want NAME=`},
		{"enc=,payload=json", `--layer "enc=,payload=json": want NAME=`},
		{"a/b=passthrough", `--layer "a/b=passthrough": the name is not a file name`},
		{"..=passthrough", `the name is not a file name`},
		{"p=passthrough,size=10", `--layer p: unknown option "size" (want NAME=CONFIG.yaml[,payload=KIND][,schema-id=N])`},
		{"p=passthrough,", `--layer p: unknown option ""`},
		{"p=passthrough,payload=xml", `--layer p (payload xml, schema id 0): --payload: "xml": use one of random, json, avro, protobuf`},
		{"p=passthrough,payload=avro,payload=json", `--layer p: payload is given twice`},
		{"p=passthrough,payload=avro,schema-id=one", `--layer p: schema-id="one" is not a schema id`},
		{"p=passthrough,payload=avro,schema-id=-1", `--layer p: schema-id="-1" is not a schema id`},
		{"p=passthrough,schema-id=1", `--layer p (payload random, schema id 1): --schema-id: must be a positive schema id, and needs --payload json, avro or protobuf`},
		{"enc=/nonexistent/enc.yaml,payload=json", `--layer enc: open /nonexistent/enc.yaml: no such file`},
	} {
		_, err := parseLayer(tc.arg, w)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.arg, err, tc.want)
		}
	}
}

func TestLayerSetupsRefuseATakenName(t *testing.T) {
	for _, layers := range [][]string{{"passthrough=passthrough,payload=json"}, {"a=direct", "a=passthrough"}} {
		_, err := layerSetups(layers, kafkaload.DefaultWorkload())
		if err == nil || !strings.Contains(err.Error(), "already a setup of that name") {
			t.Errorf("%q: %v, want the name refused", layers, err)
		}
	}
}

// Each share is measured over the nearest earlier setup of the same
// payload (a direct one for a direct setup), else over the run's own
// direct or passthrough setup.
func TestLayerSetupsMeasureEachShareOverTheSamePayload(t *testing.T) {
	setups, err := layerSetups([]string{
		"encryption=../../bench/layers/encryption.yaml",                                    // 2
		"sfe-json=passthrough,payload=json",                                                // 3: no JSON before it
		"direct-avro=direct,payload=avro,schema-id=1",                                      // 4
		"passthrough-avro=passthrough,payload=avro,schema-id=1",                            // 5
		"validation-avro=../../bench/layers/validation-avro.yaml,payload=avro,schema-id=1", // 6
		"direct-json=direct,payload=json",                                                  // 7: a direct one only over a direct one
		"direct-again=direct",                                                              // 8
	}, kafkaload.DefaultWorkload())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"direct": -1, "passthrough": 0, "encryption": 1, "sfe-json": 1, "direct-avro": 0,
		"passthrough-avro": 4, "validation-avro": 5, "direct-json": 0, "direct-again": 0}
	for _, s := range setups {
		if s.over != want[s.name] {
			t.Errorf("%s is measured over setup %d, want %d", s.name, s.over, want[s.name])
		}
	}
	runs := make([]*result.Kafka, len(setups))
	for i := range runs {
		runs[i] = &result.Kafka{Label: setups[i].name}
	}
	table := layerTable(setups, runs)
	if table[6].Payload != "avro, schema id 1" || table[3].Payload != "json" || table[0].Payload != "random" || table[6].Over != 5 {
		t.Errorf("the report's view: %+v", table)
	}
}
