#!/usr/bin/python3
"""What confluent-kafka-python's serializers make of a validating gateway.

Usage: /usr/bin/python3 confluent_kafka_validation.py SPEC.json

SPEC.json (written by test/interop/validation_test.go) names the bootstrap
address, the registry, and per format (JSON, PROTOBUF; the Avro serializer
needs fastavro) an orders topic, its schema, another schema with the subject
to register it under, values, a payload that does not fit the schema and,
for Protobuf, the compiled files (FileDescriptorProto) to build message
classes from; and an events topic with a JSON value and a broken one.

For each format the script produces the values with the format's serializer
through a SerializingProducer (case F/valid, registering the schema under
the topic-name subject), a record the serializer makes with the other schema
registered under the other subject (F/other-subject), for Protobuf a record
of the file's second message (PROTOBUF/second-message), one of its records
with a schema id the registry never gave out (F/unknown-id) and the bad
payload behind a valid prefix (F/mismatch). Then a JSON order with no prefix
(no-prefix) and the two events.

The Protobuf serializer of this version registers a schema as a base64
FileDescriptorProto, which Confluent's registry accepts and turns into
.proto text but strait registry does not: the script reports what the
serializer's own registration gives (PROTOBUF/register), then registers
the .proto text with the registry client and has the serializer look it up
as .proto text, so what it writes on the wire is still its own.

Each record is produced and flushed on its own. The script prints one JSON
object on stdout:

  {"client": ..., "results": [{"case", "topic", "value" (base64), "error"}]}

where error is "" for a record the broker acknowledged, else "NAME: text"
of the delivery report's KafkaError (with its code), or "Type: message" of
an exception raised before anything was sent.
"""

import base64
import json
import struct
import sys

import confluent_kafka
from confluent_kafka import Producer, SerializingProducer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import StringSerializer
from google.protobuf import descriptor_pb2, json_format, message_factory


def b64e(b):
    return base64.b64encode(b).decode("ascii") if b is not None else None


def describe_kafka(err):
    return "%s: %s (code %d)" % (err.name(), err.str(), err.code())


def describe_exc(e):
    return "%s: %s" % (type(e).__name__, e)


def message_classes(descriptor):
    """The message classes of a compiled .proto file, by full name."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(descriptor))
    return message_factory.GetMessages([fdp])


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    common = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "strait-interop-confluent-kafka",
        "acks": "all",
        "linger.ms": 0,
    }
    result = {
        "client": "confluent-kafka %s (librdkafka %s)" % (
            confluent_kafka.version()[0], confluent_kafka.libversion()[0]),
        "results": [],
    }
    registry = SchemaRegistryClient({"url": spec["registry"]})
    raw = Producer(common)

    def record(case, topic):
        rec = {"case": case, "topic": topic, "value": None, "error": ""}
        result["results"].append(rec)
        return rec

    def on_delivery(rec):
        def report(err, msg):
            rec["value"] = b64e(msg.value())
            if err is not None:
                rec["error"] = describe_kafka(err)
        return report

    known = set()

    def prime(p, topic):
        # librdkafka holds a record for a topic it has no metadata for
        # until its next one-second scan; asking for the topic first
        # saves that second per producer and topic.
        if (id(p), topic) not in known:
            p.list_topics(topic, timeout=10)
            known.add((id(p), topic))

    def send_raw(case, topic, value):
        rec = record(case, topic)
        prime(raw, topic)
        raw.produce(topic, key=case.encode(), value=value, on_delivery=on_delivery(rec))
        raw.flush(30)

    producers = {}

    def send_serialized(case, topic, serializer, obj):
        """Produces obj through a SerializingProducer with serializer."""
        rec = record(case, topic)
        p = producers.get(id(serializer))
        if p is None:
            p = SerializingProducer(dict(common, **{
                "key.serializer": StringSerializer("utf_8"),
                "value.serializer": serializer,
            }))
            producers[id(serializer)] = p
        prime(p, topic)
        try:
            p.produce(topic, key=case, value=obj, on_delivery=on_delivery(rec))
        except Exception as e:  # the serializer failed: nothing was sent
            rec["error"] = describe_exc(e)
            return None
        p.flush(30)
        return base64.b64decode(rec["value"]) if rec["value"] else None

    def other_subject(f):
        return lambda ctx, record_name: f["other_subject"]

    def proto_text_serializer(cls, schema_text, conf=None):
        """A ProtobufSerializer that registers and looks up its schema as
        .proto text instead of a base64 FileDescriptorProto."""
        ser = ProtobufSerializer(cls, registry, conf)
        ser._schema = Schema(schema_text, "PROTOBUF")
        return ser

    valid = {}
    ids = {}
    f = spec["formats"].get("JSON")
    if f:
        topic = f["topic"]
        ser = JSONSerializer(f["schema"], registry)
        for v in f["values"]:
            b = send_serialized("JSON/valid", topic, ser, v)
            valid.setdefault("JSON", b)
        ids["JSON"] = registry.lookup_schema(topic + "-value", Schema(f["schema"], "JSON")).schema_id
        other = JSONSerializer(f["other_schema"], registry, conf={"subject.name.strategy": other_subject(f)})
        send_serialized("JSON/other-subject", topic, other, f["other_value"])

    f = spec["formats"].get("PROTOBUF")
    if f:
        topic = f["topic"]
        classes = message_classes(f["descriptor"])
        cls, second_cls = classes[f["message"]], classes[f["second_message"]]
        other_cls = message_classes(f["other_descriptor"])[f["other_message"]]
        # The serializer's own registration, as a user would run it.
        send_serialized("PROTOBUF/register", topic, ProtobufSerializer(cls, registry),
                        json_format.ParseDict(f["values"][0], cls()))
        ids["PROTOBUF"] = registry.register_schema(topic + "-value", Schema(f["schema"], "PROTOBUF"))
        ser = proto_text_serializer(cls, f["schema"], {"auto.register.schemas": False})
        for v in f["values"]:
            b = send_serialized("PROTOBUF/valid", topic, ser, json_format.ParseDict(v, cls()))
            valid.setdefault("PROTOBUF", b)
        registry.register_schema(f["other_subject"], Schema(f["other_schema"], "PROTOBUF"))
        other = proto_text_serializer(other_cls, f["other_schema"], {
            "auto.register.schemas": False, "subject.name.strategy": other_subject(f)})
        send_serialized("PROTOBUF/other-subject", topic, other, json_format.ParseDict(f["other_value"], other_cls()))
        second = proto_text_serializer(second_cls, f["schema"], {"auto.register.schemas": False})
        send_serialized("PROTOBUF/second-message", topic, second, json_format.ParseDict(f["second_value"], second_cls()))

    for fmt in ("JSON", "PROTOBUF"):
        f = spec["formats"].get(fmt)
        if not f:
            continue
        if valid.get(fmt):
            b = valid[fmt]
            send_raw(fmt + "/unknown-id", f["topic"], b[:1] + struct.pack(">I", spec["unknown_id"]) + b[5:])
        index = b"\x00" if fmt == "PROTOBUF" else b""
        send_raw(fmt + "/mismatch", f["topic"],
                 struct.pack(">bI", 0, ids[fmt]) + index + base64.b64decode(f["bad_body"]))

    plain = (spec["formats"].get("JSON") or list(spec["formats"].values())[0])["topic"]
    send_raw("no-prefix", plain, spec["no_prefix"].encode())
    send_raw("events/valid", spec["events_topic"], spec["event_valid"].encode())
    send_raw("events/broken", spec["events_topic"], spec["event_broken"].encode())

    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
