#!/usr/bin/python3
"""Round trip through Strait with confluent-kafka-python (librdkafka).

Usage: /usr/bin/python3 confluent_kafka_roundtrip.py SPEC.json

SPEC.json is the same as for kafka_python_roundtrip.py: bootstrap address,
topic, group, compression codec, optional CA file, time budget and the
records (base64 keys, values and header values). The script produces every
record and waits for every delivery report, then consumes the topic from the
beginning in the group until it has as many records as it produced or the
time runs out, and prints one JSON object on stdout:

  {"client": ..., "produced": N, "errors": [...], "consumed": [records]}
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


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    topic = spec["topic"]
    records = spec["records"]
    common = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "strait-interop-confluent-kafka",
    }
    if spec.get("ca_file"):
        common.update({"security.protocol": "ssl", "ssl.ca.location": spec["ca_file"]})
    result = {
        "client": "confluent-kafka %s (librdkafka %s)" % (
            confluent_kafka.version()[0], confluent_kafka.libversion()[0]),
        "produced": 0, "errors": [], "consumed": [],
    }

    def report(err, msg):
        if err is not None:
            if len(result["errors"]) < 10:
                result["errors"].append("delivery: %s" % (err,))
        else:
            result["produced"] += 1

    producer = Producer(dict(common, **{
        "compression.type": spec["compression"],
        "acks": "all",
        "linger.ms": 5,
    }))
    for r in records:
        headers = [(h["key"], b64d(h["value"])) for h in r.get("headers") or []]
        while True:
            try:
                producer.produce(topic, key=b64d(r["key"]), value=b64d(r["value"]),
                                 headers=headers, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(max(1, deadline - time.monotonic()))
    if left:
        result["errors"].append("%d records still undelivered at the deadline" % left)

    consumer = Consumer(dict(common, **{
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }))
    consumer.subscribe([topic])
    consumed = result["consumed"]
    while len(consumed) < len(records) and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=500, timeout=0.5):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF and len(result["errors"]) < 10:
                    result["errors"].append("consume: %s" % (m.error(),))
                continue
            consumed.append({
                "key": b64e(m.key()),
                "value": b64e(m.value()),
                "headers": [{"key": k, "value": b64e(v)} for k, v in (m.headers() or [])],
                "partition": m.partition(),
                "offset": m.offset(),
            })
    try:
        consumer.commit(asynchronous=False)
    except Exception as e:  # noqa: BLE001
        result["errors"].append("commit: %r" % (e,))
    consumer.close()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
