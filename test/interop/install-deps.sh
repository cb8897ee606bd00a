#!/bin/sh
# Installs the external Kafka clients that Strait's interop tests drive:
# kcat, kafka-python (with its snappy, lz4 and zstd codecs) and
# confluent-kafka-python from Debian, with what its schema-registry client
# and its JSON Schema and Protobuf serializers import (requests, jsonschema,
# protobuf); kafkajs and @kafkajs/confluent-schema-registry from npm (pinned
# by node/package-lock.json). franz-go and sarama come with the Go module.
# local-kms, a local server of the AWS KMS API that the AWS KMS backend is
# tested against, is built with go install (into $(go env GOPATH)/bin).
# redis-server, which the LLM gateway's shared limits are tested against.
# curl, whose HTTP/2 (nghttp2) is a client of the gateway's own HTTP/2 server.
# helm, which renders and lints the chart under deploy/helm (go install).
#
# Run as root (or with sudo) on Debian 12; then
#   STRAIT_REQUIRE_INTEROP=1 go test ./test/interop/
set -eu
cd "$(dirname "$0")"

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
fi

pkgs="kcat python3-kafka python3-confluent-kafka python3-snappy python3-lz4 python3-zstandard"
pkgs="$pkgs python3-requests python3-jsonschema python3-protobuf"
pkgs="$pkgs redis-server"
pkgs="$pkgs curl" # its HTTP/2 is nghttp2: a client for the gateway's own HTTP/2 server
if ! command -v node >/dev/null 2>&1; then
	pkgs="$pkgs nodejs npm"
fi
missing=
for p in $pkgs; do
	if ! dpkg -s "$p" >/dev/null 2>&1; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086 # word splitting wanted
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

npm ci --prefix node --no-audit --no-fund --loglevel=error

# Keep in step with localkms.Module (internal/kms/awskms/localkms).
go install github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6

# Keep in step with HelmModule (deploy/helm_test.go).
go install helm.sh/helm/v3/cmd/helm@v3.22.0

# The SNI routing tests connect by host name, as clients behind a load
# balancer do: these names resolve to the gateway on this machine.
if ! grep -q 'kafka.strait.test' /etc/hosts 2>/dev/null; then
	echo '127.0.0.1 kafka.strait.test broker-0.kafka.strait.test broker-1.kafka.strait.test broker-2.kafka.strait.test' | $SUDO tee -a /etc/hosts >/dev/null
fi
