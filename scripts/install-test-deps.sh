#!/usr/bin/env bash
# Installs what the test suite needs besides Rust: Debian's Chromium (web UI tests), Java 17,
# Debian's Prometheus 2.42 (scrapes qprof's /metrics in tests), Debian's Go 1.19 (its `go tool
# pprof` reads the pprof files qprof writes)
# and a Python virtualenv with spark-history-cli 1.5.0 and pyspark 4.3.0 (client and Spark
# history server compatibility tests), moto's S3 server 5.1.22 (tables on s3://) and
# prometheus_client 0.21.1 (its parser checks /metrics), opentelemetry-proto 1.45.2 with
# grpcio 1.85.3 (an OTLP receiver over gRPC and HTTP), DuckDB 2.0.1 (reference answers
# to TPC-H from an engine independent of DataFusion), and mdBook 0.5.4 from crates.io into
# target/test-tools (the user guide in docs/ is built and opened in the tests).
# Idempotent: does nothing when all are present.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${QPROF_TEST_VENV:-target/test-venv}"

PACKAGES=()
command -v chromium >/dev/null 2>&1 || PACKAGES+=(chromium)
command -v java >/dev/null 2>&1 || PACKAGES+=(openjdk-17-jre-headless)
command -v prometheus >/dev/null 2>&1 || PACKAGES+=(prometheus)
command -v go >/dev/null 2>&1 || PACKAGES+=(golang-go)
if [ "${#PACKAGES[@]}" -gt 0 ]; then
    echo "== installing ${PACKAGES[*]} (Debian packages)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${PACKAGES[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/spark-history-cli" ]; then
    echo "== creating $VENV with spark-history-cli 1.5.0"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check spark-history-cli==1.5.0
fi

if ! ls "$VENV"/lib/python3*/site-packages/pyspark/bin/spark-class >/dev/null 2>&1; then
    echo "== installing pyspark 4.3.0 into $VENV (Spark's own history server)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check pyspark==4.3.0
fi

if ! "$VENV/bin/python" -c "import prometheus_client" >/dev/null 2>&1; then
    echo "== installing prometheus_client 0.21.1 into $VENV (parses /metrics in tests)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check prometheus_client==0.21.1
fi

if ! "$VENV/bin/python" -c "import duckdb" >/dev/null 2>&1; then
    echo "== installing duckdb 2.0.1 into $VENV (TPC-H reference answers in tests)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check duckdb==2.0.1
fi

if ! "$VENV/bin/python" -c "import grpc, opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc" >/dev/null 2>&1; then
    echo "== installing opentelemetry-proto 1.45.2 and grpcio 1.85.3 into $VENV (an OTLP receiver for tests)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check opentelemetry-proto==1.45.2 grpcio==1.85.3
fi

if [ ! -x "$VENV/bin/moto_server" ]; then
    echo "== installing moto[server] 5.1.22 into $VENV (an S3-compatible server for tests)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "moto[server]==5.1.22"
fi

TOOLS="${QPROF_TEST_TOOLS:-target/test-tools}"
if [ ! -x "$TOOLS/bin/mdbook" ]; then
    echo "== installing mdbook 0.5.4 into $TOOLS (builds the user guide)"
    cargo install --quiet --locked mdbook --version 0.5.4 --root "$TOOLS"
fi
