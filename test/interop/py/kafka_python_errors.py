#!/usr/bin/python3
"""What kafka-python reports when Strait fails a partition.

Usage: /usr/bin/python3 kafka_python_errors.py SPEC.json

SPEC.json is as for confluent_kafka_errors.py. The script produces three
records to the refused topic and waits for each acknowledgement, then polls
the undecryptable topic in the group until poll has raised want_errors
errors or the time runs out, and prints the same JSON object:

  {"client": ..., "produced": N, "produce_errors": [...],
   "consumed": N, "consume_errors": [...]}

Each error is "ExceptionType: text", as the application sees it. Logs go to
stderr.
"""

import json
import logging
import os
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError


def describe(e):
    return "%s: %s" % (type(e).__name__, e)


def main():
    level = logging.DEBUG if os.environ.get("STRAIT_INTEROP_DEBUG") else logging.WARNING
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    common = {
        "bootstrap_servers": [spec["bootstrap"]],
        "client_id": "strait-interop-kafka-python",
        "request_timeout_ms": 30000,
    }
    result = {"client": "kafka-python " + kafka.__version__, "produced": 0,
              "produce_errors": [], "consumed": 0, "consume_errors": []}

    producer = KafkaProducer(acks="all", linger_ms=5, **common)
    futures = [producer.send(spec["produce_topic"], key=b"k%d" % i, value=b"v%d" % i) for i in range(3)]
    producer.flush(timeout=max(1, deadline - time.monotonic()))
    for fut in futures:
        try:
            fut.get(timeout=max(1, deadline - time.monotonic()))
            result["produced"] += 1
        except KafkaError as e:
            result["produce_errors"].append(describe(e))
    producer.close(timeout=10)

    consumer = KafkaConsumer(spec["consume_topic"], group_id=spec["group"],
                             auto_offset_reset="earliest", enable_auto_commit=False, **common)
    errors = result["consume_errors"]
    while len(errors) < spec["want_errors"] and time.monotonic() < deadline:
        try:
            for msgs in consumer.poll(timeout_ms=500).values():
                result["consumed"] += len(msgs)
        except KafkaError as e:
            errors.append(describe(e))
    consumer.close()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
