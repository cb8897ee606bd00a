package interop

import (
	"testing"
)

// pyCodecModules names, per codec, the Python module kafka-python needs for
// it and the Debian package that provides the module.
var pyCodecModules = map[string][2]string{
	"snappy": {"snappy", "python3-snappy"},
	"lz4":    {"lz4.frame", "python3-lz4"},
	"zstd":   {"zstandard", "python3-zstandard"},
}

// kafkaPython is kafka-python 2.0.2. It asks for metadata with Metadata v1,
// from which a real broker auto-creates topics but kfake does not (it
// honours only v4's AllowAutoTopicCreation), so its topics are created
// first.
var kafkaPython = scriptClient{
	cmd:       []string{pythonBin(), "py/kafka_python_roundtrip.py"},
	precreate: true,
	checks:    checkOpts{headers: true, partitions: numPartitions},
}

var confluentPython = scriptClient{
	cmd:    []string{pythonBin(), "py/confluent_kafka_roundtrip.py"},
	checks: checkOpts{headers: true, partitions: numPartitions},
}

// pythonRecords is how many records each Python round trip sends.
const pythonRecords = 200

// TestKafkaPython round-trips records with kafka-python: KafkaProducer per
// codec, KafkaConsumer in a group.
func TestKafkaPython(t *testing.T) {
	needPython(t, "kafka", "python3-kafka")
	t.Parallel()
	e := startEnv(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			if m, ok := pyCodecModules[codec]; ok {
				needPython(t, m[0], m[1])
			}
			scriptRoundTrip(t, e, kafkaPython, codec, pythonRecords)
		})
	}
}

// TestConfluentKafkaPython round-trips records with confluent-kafka-python
// (librdkafka): Producer per codec, Consumer in a group.
func TestConfluentKafkaPython(t *testing.T) {
	needPython(t, "confluent_kafka", "python3-confluent-kafka")
	t.Parallel()
	e := startEnv(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			scriptRoundTrip(t, e, confluentPython, codec, pythonRecords)
		})
	}
}

// TestKafkaPythonEncryption round-trips records with kafka-python through a
// gateway that encrypts every topic; the broker holds only ciphertext.
func TestKafkaPythonEncryption(t *testing.T) {
	needPython(t, "kafka", "python3-kafka")
	t.Parallel()
	e := startEnv(t, withEncryption())
	for _, codec := range []string{"none", "gzip", "lz4"} {
		t.Run(codec, func(t *testing.T) {
			if m, ok := pyCodecModules[codec]; ok {
				needPython(t, m[0], m[1])
			}
			scriptRoundTrip(t, e, kafkaPython, codec, pythonRecords)
		})
	}
}
