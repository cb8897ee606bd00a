// Package interop holds Strait's client interoperability tests. Each test
// starts an in-process kfake cluster (three brokers, topics created on first
// use) and a Strait virtual cluster in front of it, then drives the gateway
// with real third-party Kafka clients — franz-go and sarama in-process;
// kcat, kafka-python, confluent-kafka-python and kafkajs as child
// processes — and checks that every record comes back intact.
//
// A test whose external client is not installed is skipped with an install
// hint, unless STRAIT_REQUIRE_INTEROP=1 is set (as CI does), in which case
// it fails. install-deps.sh installs every external client.
package interop
