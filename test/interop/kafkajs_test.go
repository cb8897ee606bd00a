package interop

import "testing"

var kafkaJS = scriptClient{
	cmd:    []string{"node", "node/roundtrip.js"},
	checks: checkOpts{headers: true, partitions: numPartitions},
}

// kafkajsCodecs are the codecs kafkajs has built in; snappy, lz4 and zstd
// need third-party codec packages.
var kafkajsCodecs = []string{"none", "gzip"}

// needKafkaJS skips the test (fails it with STRAIT_REQUIRE_INTEROP=1) unless
// node is on the PATH and kafkajs is installed under node/, and says which
// of the two is missing: they are installed in different ways.
func needKafkaJS(t *testing.T) {
	t.Helper()
	if err := checkDep("node", probeCmd("node", "--version")); err != nil {
		needDep(t, "Node.js (the node command)", err, "apt-get install nodejs npm && npm ci --prefix test/interop/node")
		return
	}
	err := checkDep("kafkajs", probeCmd("node", "-e",
		"try { require.resolve('./node/node_modules/kafkajs') } catch { console.error('no kafkajs in test/interop/node/node_modules'); process.exit(1) }"))
	needDep(t, "the kafkajs package (Node.js itself is installed)", err, "npm ci --prefix test/interop/node")
}

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
