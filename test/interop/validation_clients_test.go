package interop

import (
	"regexp"
	"testing"
)

// standardWants are the expectations every client shares: per format its
// serializer's records land and the three bad records are refused; a
// record without a prefix and a broken event are refused; a valid event
// lands.
func standardWants(p valPlan, client *regexp.Regexp) map[string]valWant {
	want := map[string]valWant{}
	for f, vf := range p.spec.Formats {
		want[f+"/"+caseValid] = valWant{land: true}
		for _, c := range []string{caseOtherSubject, caseUnknownID, caseMismatch} {
			want[f+"/"+c] = refused(client, f+"/"+c, vf.Topic)
		}
	}
	plain := p.spec.Formats[fmtJSON].Topic
	want["no-prefix"] = refused(client, "no-prefix", plain)
	want["events/valid"] = valWant{land: true}
	want["events/broken"] = refused(client, "events/broken", p.spec.EventsTopic)
	return want
}

// kafkajsInvalidRecord is how kafkajs 2.2.4 reports INVALID_RECORD. It
// speaks Produce v7 at most, whose answer has no error_message or
// record_errors, so the gateway's reason cannot reach it.
var kafkajsInvalidRecord = regexp.MustCompile(`^KafkaJSProtocolError: This record has failed the validation on broker and hence be rejected \(INVALID_RECORD\)$`)

// TestValidationKafkaJS produces through a validating gateway with kafkajs
// and @kafkajs/confluent-schema-registry: Avro, JSON Schema and Protobuf
// schemas registered with the package's registry client, records encoded
// by it.
func TestValidationKafkaJS(t *testing.T) {
	needKafkaJS(t)
	err := checkDep("confluent-schema-registry", probeCmd("node", "-e",
		"try { require.resolve('./node/node_modules/@kafkajs/confluent-schema-registry') } catch { console.error('no @kafkajs/confluent-schema-registry in test/interop/node/node_modules'); process.exit(1) }"))
	needDep(t, "the @kafkajs/confluent-schema-registry package", err, "npm ci --prefix test/interop/node")
	t.Parallel()
	e, regURL := startValidationEnv(t)
	p := planValidation(t, e, regURL, "kafkajs", fmtAvro, fmtJSON, fmtProtobuf)
	rep := runValidationScript(t, p, "node", "node/validation.js")
	want := standardWants(p, kafkajsInvalidRecord)
	// The package writes Protobuf records without the message-index list
	// Confluent's wire format puts after the schema id; the schema layer
	// reads such a record as the schema's first message, so they land as
	// written, and so do the same records with [0] (one 0 byte) added.
	want[fmtProtobuf+"/valid-indexed"] = valWant{land: true}
	checkValidation(t, e, p, rep, want)
}

// confluentInvalidRecord is how confluent-kafka-python 1.7 (with Debian
// 12's librdkafka 2.0.2) reports INVALID_RECORD in a delivery report: the
// code's own text, not the broker's error_message.
var confluentInvalidRecord = regexp.MustCompile(`^INVALID_RECORD: Broker: Broker failed to validate record \(code 87\)$`)

// TestValidationConfluentKafkaPython produces through a validating gateway
// with confluent-kafka-python's JSON Schema and Protobuf serializers (its
// Avro serializer needs fastavro, which Debian 12 does not package).
func TestValidationConfluentKafkaPython(t *testing.T) {
	needPython(t, "confluent_kafka", "python3-confluent-kafka")
	needPython(t, "requests", "python3-requests")
	needPython(t, "jsonschema", "python3-jsonschema")
	needPython(t, "google.protobuf", "python3-protobuf")
	t.Parallel()
	e, regURL := startValidationEnv(t)
	p := planValidation(t, e, regURL, "confluent-kafka", fmtJSON, fmtProtobuf)
	rep := runValidationScript(t, p, pythonBin(), "py/confluent_kafka_validation.py")
	want := standardWants(p, confluentInvalidRecord)
	// The Protobuf serializer registers its schema as a base64
	// FileDescriptorProto; strait registry takes .proto text only.
	want[fmtProtobuf+"/register"] = valWant{client: regexp.MustCompile(
		`^ValueSerializationError: KafkaError\{code=_VALUE_SERIALIZATION,val=-161,str="invalid schema: protobuf schema has "[A-Za-z0-9+/]+\.\.\." where a top-level statement .* \(HTTP status code 422, SR code 42201\)"\}$`)}
	// This version writes message indexes as unsigned varints, not
	// zigzag (fixed in 1.8.2, where use.deprecated.format keeps the old
	// way): [0] is the same single 0 byte either way, but the second
	// message's [1] comes out as 01 01, a count of -1 to a reader of
	// Confluent's format, and is refused as malformed.
	want[fmtProtobuf+"/second-message"] = refused(confluentInvalidRecord, fmtProtobuf+"/second-message", p.spec.Formats[fmtProtobuf].Topic)
	checkValidation(t, e, p, rep, want)
}
