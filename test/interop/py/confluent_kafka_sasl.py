#!/usr/bin/python3
"""SASL through Strait with confluent-kafka-python (librdkafka).

Usage: /usr/bin/python3 confluent_kafka_sasl.py SPEC.json

SPEC.json is as for kafka_python_sasl.py. For OAUTHBEARER the bearer token
comes from an oauth_cb that returns the token the test signed, with the
expiry the spec names (token_expiry, Unix seconds): librdkafka's own
unsecured-JWT handler cannot carry the issuer's signature, and librdkafka
refuses a token whose expiry it is told has passed before sending it.

A round trip produces every record, waits for every delivery report, then
consumes the topic from the beginning in the group until it has as many
records as it produced or the time runs out. "refused" sends one record and
waits until librdkafka reports an error through error_cb or poll raises
one (or the delivery fails, or the time runs out), and reports the first. The script prints one JSON object on stdout:

  {"client": ..., "produced": N, "errors": [...], "consumed": [records]}

Each error is "NAME: text" as librdkafka's KafkaError gives it.
"""

import base64
import json
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer


def b64d(s):
    return base64.b64decode(s) if s is not None else None


def b64e(b):
    return base64.b64encode(b).decode("ascii") if b is not None else None


def describe(err):
    return "%s: %s" % (err.name(), err.str())


def client_config(spec, errors):
    def on_error(err):
        if len(errors) < 10:
            errors.append(describe(err))

    config = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "strait-interop-confluent-kafka",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": spec["mechanism"],
        "error_cb": on_error,
    }
    if spec["mechanism"] == "OAUTHBEARER":
        token, expiry = spec["token"], spec["token_expiry"]
        config["oauth_cb"] = lambda _config: (token, expiry)
    else:
        config.update({"sasl.username": spec["username"], "sasl.password": spec["password"]})
    return config


def round_trip(spec, deadline, result):
    errors = result["errors"]
    topic = spec["topic"]
    records = spec["records"]

    def report(err, msg):
        if err is not None:
            if len(errors) < 10:
                errors.append("delivery: " + describe(err))
        else:
            result["produced"] += 1

    producer = Producer(dict(client_config(spec, errors), **{"acks": "all", "linger.ms": 5}))
    # oauth_cb, like every callback, runs from poll: the first poll fetches
    # the token.
    producer.poll(0)
    for r in records:
        producer.produce(topic, key=b64d(r["key"]), value=b64d(r["value"]), on_delivery=report)
        producer.poll(0)
    left = producer.flush(max(1, deadline - time.monotonic()))
    if left:
        errors.append("%d records still undelivered at the deadline" % left)

    consumer = Consumer(dict(client_config(spec, errors), **{
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }))
    consumer.subscribe([topic])
    consumed = result["consumed"]
    while len(consumed) < len(records) and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=100, timeout=0.5):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF and len(errors) < 10:
                    errors.append("consume: " + describe(m.error()))
                continue
            consumed.append({"key": b64e(m.key()), "value": b64e(m.value()),
                             "partition": m.partition(), "offset": m.offset()})
    consumer.close()


def refused(spec, deadline, result):
    errors = result["errors"]

    def report(err, msg):
        if err is not None:
            errors.append("delivery: " + describe(err))
        else:
            result["produced"] += 1

    producer = Producer(dict(client_config(spec, errors), **{"message.timeout.ms": 10000}))
    producer.produce(spec["topic"], key=b"k", value=b"v", on_delivery=report)
    while not errors and not result["produced"] and time.monotonic() < deadline:
        try:
            producer.poll(0.1)
        except Exception as e:  # noqa: BLE001 - what the application sees
            # A token oauth_cb says has expired is refused by poll itself.
            errors.append("%s: %s" % (type(e).__name__, e))
    # Only the first report is the refusal: librdkafka follows it with
    # _ALL_BROKERS_DOWN, and the purge below with the record's _PURGE_QUEUE.
    result["errors"] = errors[:1]
    producer.purge()
    producer.flush(1)


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    result = {
        "client": "confluent-kafka %s (librdkafka %s)" % (
            confluent_kafka.version()[0], confluent_kafka.libversion()[0]),
        "produced": 0, "errors": [], "consumed": [],
    }
    if spec["mode"] == "roundtrip":
        round_trip(spec, deadline, result)
    else:
        refused(spec, deadline, result)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
