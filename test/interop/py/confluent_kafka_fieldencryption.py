#!/usr/bin/python3
"""What confluent-kafka-python's serializers make of a gateway that encrypts
fields of records in place.

Usage: /usr/bin/python3 confluent_kafka_fieldencryption.py SPEC.json

SPEC.json (written by test/interop/fieldencryption_test.go) names the
gateway, the broker behind it, the registry, and cases: a topic, a schema
type (JSON or PROTOBUF; the Avro serializer needs fastavro, which Debian 12
does not package) and schema, values and, for Protobuf, the compiled file
(a FileDescriptorProto) and message to build the message class from.

For each case the script serializes the values with the format's
serializer (JSONSerializer registers its schema itself; the Protobuf one of
this version would register a base64 FileDescriptorProto, which strait
registry does not take, so the .proto text is registered first and the
serializer looks it up as text, as confluent_kafka_validation.py does) and
produces them through the gateway with an idempotent producer compressing
with zstd (key "k<i>", one header app=interop-<i>).
Then it reads the topics from the beginning straight from the broker and
through the gateway, with an assigned consumer each, and runs every value through
the format's deserializer: JSONDeserializer validates it against the
schema, ProtobufDeserializer parses it as the message. It prints one JSON
object on stdout:

  {"client": ..., "errors": [...], "cases": [{"topic", "produced",
   "broker", "gateway"}]}

where each list holds records {"key", "value" (base64), "headers" ([{key,
value (base64)}]), "decoded", "error" (what the deserializer raised)}.
"""

import base64
import json
import sys
import time

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format

from confluent_kafka_validation import message_classes


def b64e(b):
    return base64.b64encode(b).decode("ascii") if b is not None else None


def describe_exc(e):
    return "%s: %s" % (type(e).__name__, e)


def headers_of(msg):
    return [{"key": k, "value": b64e(v)} for k, v in (msg.headers() or [])]


def codec(registry, c):
    """The serializer and deserializer of a case, and how to turn a value
    into what the serializer takes and a decoded value back into JSON."""
    if c["format"] == "JSON":
        ser = JSONSerializer(c["schema"], registry)
        return ser, JSONDeserializer(c["schema"]), (lambda v: v), (lambda obj: obj)
    cls = message_classes(c["descriptor"])[c["message"]]
    registry.register_schema(c["topic"] + "-value", Schema(c["schema"], "PROTOBUF"))
    ser = ProtobufSerializer(cls, registry, {"auto.register.schemas": False})
    ser._schema = Schema(c["schema"], "PROTOBUF")
    return (ser, ProtobufDeserializer(cls),
            lambda v: json_format.ParseDict(v, cls()),
            lambda msg: json_format.MessageToDict(
                msg, preserving_proto_field_name=True, including_default_value_fields=True))


def read(bootstrap, cases, deadline, errors, where):
    """Reads the records of partition 0 of every case's topic from the
    beginning, with one consumer, and decodes each with its case's
    deserializer. Returns the records by topic, in offset order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "strait-interop-unused",  # assigned, never joined
        "enable.auto.commit": False,
        "client.id": "strait-interop-confluent-kafka",
        "fetch.wait.max.ms": 100,
        # The gateway re-frames every batch it decrypts in: its CRC too.
        "check.crcs": True,
    })
    consumer.assign([TopicPartition(c["topic"], 0, OFFSET_BEGINNING) for c, _ in cases])
    want = {c["topic"]: len(c["values"]) for c, _ in cases}
    decoders = {c["topic"]: d for c, d in cases}
    out = {topic: [] for topic in want}
    while any(len(out[topic]) < n for topic, n in want.items()):
        if time.monotonic() > deadline:
            errors.append("%s: read %s of %s records in time" % (
                where, {t: len(r) for t, r in out.items()}, want))
            break
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            errors.append("%s: %s" % (where, msg.error()))
            continue
        deser, to_json = decoders[msg.topic()]
        rec = {"key": b64e(msg.key()), "value": b64e(msg.value()), "headers": headers_of(msg),
               "decoded": None, "error": ""}
        try:
            rec["decoded"] = to_json(deser(msg.value(), SerializationContext(msg.topic(), MessageField.VALUE)))
        except Exception as e:  # what the reader makes of the record
            rec["error"] = describe_exc(e)
        out[msg.topic()].append(rec)
    consumer.close()
    return out


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    result = {
        "client": "confluent-kafka %s (librdkafka %s)" % (
            confluent_kafka.version()[0], confluent_kafka.libversion()[0]),
        "errors": [],
        "cases": [],
    }
    registry = SchemaRegistryClient({"url": spec["registry"]})
    producer = Producer({
        "bootstrap.servers": spec["gateway"],
        "client.id": "strait-interop-confluent-kafka",
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": "zstd",
        "linger.ms": 5,
    })
    codecs = []
    for c in spec["cases"]:
        rc = {"topic": c["topic"], "produced": [], "broker": [], "gateway": []}
        result["cases"].append(rc)
        ser, deser, from_json, to_json = codec(registry, c)
        codecs.append((deser, to_json))
        ctx = SerializationContext(c["topic"], MessageField.VALUE)
        for i, v in enumerate(c["values"]):
            value = ser(from_json(v), ctx)
            key, headers = ("k%d" % i).encode(), [("app", ("interop-%d" % i).encode())]
            rc["produced"].append({"key": b64e(key), "value": b64e(value),
                                   "headers": [{"key": k, "value": b64e(hv)} for k, hv in headers]})

            def report(err, msg, topic=c["topic"]):
                if err is not None:
                    result["errors"].append("produce to %s: %s" % (topic, err))
            producer.produce(c["topic"], key=key, value=value, headers=headers, on_delivery=report)
    if producer.flush(30) != 0:
        result["errors"].append("records still unacknowledged after 30 s")

    cases = list(zip(spec["cases"], codecs))
    broker = read(",".join(spec["broker"]), cases, deadline, result["errors"], "broker")
    gateway = read(spec["gateway"], cases, deadline, result["errors"], "gateway")
    for rc in result["cases"]:
        rc["broker"], rc["gateway"] = broker[rc["topic"]], gateway[rc["topic"]]

    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
