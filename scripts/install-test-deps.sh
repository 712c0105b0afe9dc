#!/usr/bin/env bash
# Installs what the test suite needs besides Rust: Debian's Chromium (web UI tests) and a
# Python virtualenv with spark-history-cli 1.5.0 (client compatibility tests).
# Idempotent: does nothing when both are present.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${QPROF_TEST_VENV:-target/test-venv}"

if ! command -v chromium >/dev/null 2>&1; then
    echo "== installing chromium (Debian package)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

if [ ! -x "$VENV/bin/spark-history-cli" ]; then
    echo "== creating $VENV with spark-history-cli 1.5.0"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check spark-history-cli==1.5.0
fi
