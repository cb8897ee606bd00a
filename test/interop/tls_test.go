package interop

import (
	"crypto/tls"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTLS has the gateway terminate TLS with a self-signed ECDSA P-256
// certificate for 127.0.0.1 (session tickets off) and runs every client
// through it with gzip, each trusting only that certificate.
func TestTLS(t *testing.T) {
	t.Parallel()
	e := startEnv(t, withTLS())
	clientTLS := &tls.Config{RootCAs: e.caPool, MinVersion: tls.VersionTLS12}

	t.Run("franz-go", func(t *testing.T) {
		franzRoundTrip(t, e, "gzip", kgo.GzipCompression(), 300, []kgo.Opt{kgo.DialTLSConfig(clientTLS.Clone())})
	})
	t.Run("sarama", func(t *testing.T) {
		saramaRoundTrip(t, e, sarama.V3_6_0_0, sarama.CompressionGZIP, 200, clientTLS.Clone())
	})
	t.Run("kcat", func(t *testing.T) {
		needKcat(t)
		kcatRoundTrip(t, e, "gzip", 200)
	})
	t.Run("kafka-python", func(t *testing.T) {
		needPython(t, "kafka", "python3-kafka")
		scriptRoundTrip(t, e, kafkaPython, "gzip", pythonRecords)
	})
	t.Run("confluent-kafka-python", func(t *testing.T) {
		needPython(t, "confluent_kafka", "python3-confluent-kafka")
		scriptRoundTrip(t, e, confluentPython, "gzip", pythonRecords)
	})
	t.Run("kafkajs", func(t *testing.T) {
		needKafkaJS(t)
		scriptRoundTrip(t, e, kafkaJS, "gzip", 200)
	})
}
