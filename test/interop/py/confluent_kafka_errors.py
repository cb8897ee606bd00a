#!/usr/bin/python3
"""What confluent-kafka-python (librdkafka) reports when Strait fails a partition.

Usage: /usr/bin/python3 confluent_kafka_errors.py SPEC.json

SPEC.json (written by test/interop/errors_test.go) names the bootstrap
address, a topic to produce to that the gateway refuses (its KEK does not
exist), a topic to consume that the gateway cannot decrypt (its KEK was
deleted), a consumer group, how many consume errors to wait for, and a time
budget. The script produces three records and waits for their delivery
reports, then consumes in the group until it has been told of want_errors
errors or the time runs out, and prints one JSON object on stdout:

  {"client": ..., "produced": N, "produce_errors": [...],
   "consumed": N, "consume_errors": [...]}

Each error is "NAME: text", as the application sees it. librdkafka's own log
goes to stderr.
"""

import json
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer


def describe(err):
    return "%s: %s" % (err.name(), err.str())


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    common = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "strait-interop-confluent-kafka",
    }
    result = {
        "client": "confluent-kafka %s (librdkafka %s)" % (
            confluent_kafka.version()[0], confluent_kafka.libversion()[0]),
        "produced": 0, "produce_errors": [], "consumed": 0, "consume_errors": [],
    }

    def report(err, msg):
        if err is not None:
            result["produce_errors"].append(describe(err))
        else:
            result["produced"] += 1

    producer = Producer(dict(common, **{"acks": "all", "linger.ms": 5}))
    for i in range(3):
        producer.produce(spec["produce_topic"], key=b"k%d" % i, value=b"v%d" % i, on_delivery=report)
    producer.flush(max(1, deadline - time.monotonic()))

    consumer = Consumer(dict(common, **{
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }))
    consumer.subscribe([spec["consume_topic"]])
    errors = result["consume_errors"]
    while len(errors) < spec["want_errors"] and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=100, timeout=0.5):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(describe(m.error()))
                continue
            result["consumed"] += 1
    consumer.close()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
