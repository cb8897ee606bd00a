#!/usr/bin/python3
"""Round trip through Strait with kafka-python (Debian's python3-kafka).

Usage: /usr/bin/python3 kafka_python_roundtrip.py SPEC.json

SPEC.json (written by the Go interop tests) names the bootstrap address,
topic, consumer group, compression codec ("none", "gzip", "snappy", "lz4" or
"zstd"), an optional CA file for TLS, a time budget, and the records to
produce; keys, values and header values are base64. The script produces
every record, waits for each acknowledgement, then consumes the topic from
the beginning as a member of the group until it has as many records as it
produced or the time runs out. It prints one JSON object on stdout:

  {"client": ..., "produced": N, "errors": [...], "consumed": [records]}

Logs go to stderr.
"""

import base64
import json
import logging
import os
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer


def b64d(s):
    return base64.b64decode(s) if s is not None else None


def b64e(b):
    return base64.b64encode(b).decode("ascii") if b is not None else None


def main():
    level = logging.DEBUG if os.environ.get("STRAIT_INTEROP_DEBUG") else logging.WARNING
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    topic = spec["topic"]
    records = spec["records"]
    common = {
        "bootstrap_servers": [spec["bootstrap"]],
        "client_id": "strait-interop-kafka-python",
        "request_timeout_ms": 30000,
    }
    if spec.get("ca_file"):
        common.update(security_protocol="SSL", ssl_cafile=spec["ca_file"],
                      ssl_check_hostname=True)
    codec = spec["compression"]
    result = {"client": "kafka-python " + kafka.__version__, "produced": 0,
              "errors": [], "consumed": []}

    producer = KafkaProducer(
        compression_type=None if codec == "none" else codec,
        acks="all", linger_ms=5, retries=3, max_request_size=4 << 20,
        **common)
    futures = []
    for r in records:
        headers = [(h["key"], b64d(h["value"])) for h in r.get("headers") or []]
        futures.append(producer.send(topic, key=b64d(r["key"]),
                                     value=b64d(r["value"]), headers=headers))
    producer.flush(timeout=max(1, deadline - time.monotonic()))
    for fut in futures:
        try:
            fut.get(timeout=max(1, deadline - time.monotonic()))
            result["produced"] += 1
        except Exception as e:  # noqa: BLE001 - report every failure
            if len(result["errors"]) < 10:
                result["errors"].append("produce: %r" % (e,))
    producer.close(timeout=10)

    consumer = KafkaConsumer(
        topic, group_id=spec["group"], auto_offset_reset="earliest",
        enable_auto_commit=False, **common)
    consumed = result["consumed"]
    while len(consumed) < len(records) and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=500)
        for tp, msgs in batches.items():
            for m in msgs:
                consumed.append({
                    "key": b64e(m.key),
                    "value": b64e(m.value),
                    "headers": [{"key": k, "value": b64e(v)} for k, v in (m.headers or [])],
                    "partition": m.partition,
                    "offset": m.offset,
                })
    try:
        consumer.commit()
    except Exception as e:  # noqa: BLE001
        result["errors"].append("commit: %r" % (e,))
    consumer.close()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
