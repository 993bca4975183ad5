#!/usr/bin/env bash
# Set up a venv, start carbon-cache on loopback with the shipped default config,
# send sample metrics, and show them stored in whisper and answered over carbonlink.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip setuptools wheel
"$VENV/bin/pip" install -q -e .
exec "$VENV/bin/python" tools/demo.py "$@"
