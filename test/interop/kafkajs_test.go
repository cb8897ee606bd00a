package interop

import "testing"

var kafkaJS = scriptClient{
	cmd:    []string{"node", "node/roundtrip.js"},
	checks: checkOpts{headers: true, partitions: numPartitions},
}

// kafkajsCodecs are the codecs kafkajs has built in; snappy, lz4 and zstd
// need third-party codec packages.
var kafkajsCodecs = []string{"none", "gzip"}

// TestKafkaJS round-trips records with kafkajs 2.2.4: producer per codec,
// consumer group run until every record is back.
func TestKafkaJS(t *testing.T) {
	needKafkaJS(t)
	t.Parallel()
	e := startEnv(t)
	for _, codec := range kafkajsCodecs {
		t.Run(codec, func(t *testing.T) {
			scriptRoundTrip(t, e, kafkaJS, codec, 200)
		})
	}
}
