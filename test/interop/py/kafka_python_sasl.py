#!/usr/bin/python3
"""SASL through Strait with kafka-python (Debian's python3-kafka).

Usage: /usr/bin/python3 kafka_python_sasl.py SPEC.json

SPEC.json (written by test/interop/sasl_test.go) names the bootstrap
address, the SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
OAUTHBEARER) with a user name and password or a bearer token, a topic, a
consumer group, a time budget, what to do ("roundtrip" or "refused") and,
for a round trip, the records to produce (base64 keys and values).

kafka-python 2.0.2 authenticates with SaslHandshake v0 and raw SASL tokens,
never SaslAuthenticate.

A round trip produces every record, waits for each acknowledgement, then
consumes the topic from the beginning in the group until it has as many
records as it produced or the time runs out. "refused" expects the gateway
to refuse the credentials: it creates a producer, sends one record and
reports what kafka-python raised. Either way the script prints one JSON
object on stdout:

  {"client": ..., "produced": N, "errors": [...], "consumed": [records]}

Each error is "ExceptionType: text", as the application sees it. Logs go to
stderr.
"""

import base64
import json
import logging
import os
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer
from kafka.oauth.abstract import AbstractTokenProvider


class StaticToken(AbstractTokenProvider):
    """Hands out the one token the test signed."""

    def __init__(self, token):
        super().__init__()
        self._token = token

    def token(self):
        return self._token


def b64d(s):
    return base64.b64decode(s) if s is not None else None


def b64e(b):
    return base64.b64encode(b).decode("ascii") if b is not None else None


def describe(e):
    return "%s: %s" % (type(e).__name__, e)


def client_config(spec):
    config = {
        "bootstrap_servers": [spec["bootstrap"]],
        "client_id": "strait-interop-kafka-python",
        "request_timeout_ms": 30000,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": spec["mechanism"],
    }
    if spec["mechanism"] == "OAUTHBEARER":
        config["sasl_oauth_token_provider"] = StaticToken(spec["token"])
    else:
        config.update(sasl_plain_username=spec["username"], sasl_plain_password=spec["password"])
    return config


def round_trip(spec, deadline, result):
    common = client_config(spec)
    topic = spec["topic"]
    records = spec["records"]
    producer = KafkaProducer(acks="all", linger_ms=5, retries=3, **common)
    futures = [producer.send(topic, key=b64d(r["key"]), value=b64d(r["value"])) for r in records]
    producer.flush(timeout=max(1, deadline - time.monotonic()))
    for fut in futures:
        try:
            fut.get(timeout=max(1, deadline - time.monotonic()))
            result["produced"] += 1
        except Exception as e:  # noqa: BLE001 - report every failure
            if len(result["errors"]) < 10:
                result["errors"].append("produce: " + describe(e))
    producer.close(timeout=10)

    consumer = KafkaConsumer(topic, group_id=spec["group"], auto_offset_reset="earliest",
                             enable_auto_commit=False, **common)
    consumed = result["consumed"]
    while len(consumed) < len(records) and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=500).values():
            for m in msgs:
                consumed.append({"key": b64e(m.key), "value": b64e(m.value),
                                 "partition": m.partition, "offset": m.offset})
    consumer.close()


def refused(spec, deadline, result):
    # Without an api_version, the producer connects while it is created to
    # find the broker's version: that is where a refusal surfaces.
    try:
        producer = KafkaProducer(api_version_auto_timeout_ms=int(min(10, deadline - time.monotonic()) * 1000),
                                 max_block_ms=5000, **client_config(spec))
        producer.send(spec["topic"], key=b"k", value=b"v").get(timeout=5)
        result["produced"] += 1
        producer.close(timeout=5)
    except Exception as e:  # noqa: BLE001 - what the application sees
        result["errors"].append(describe(e))


def main():
    level = logging.DEBUG if os.environ.get("STRAIT_INTEROP_DEBUG") else logging.WARNING
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["timeout_s"]
    result = {"client": "kafka-python " + kafka.__version__, "produced": 0,
              "errors": [], "consumed": []}
    if spec["mode"] == "roundtrip":
        round_trip(spec, deadline, result)
    else:
        refused(spec, deadline, result)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
