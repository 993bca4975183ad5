#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip setuptools wheel
CARBON_REQUIRE_NATIVE=1 "$VENV/bin/pip" install -q -e '.[test]'
if [ -x tools/system-deps.sh ]; then
    tools/system-deps.sh
fi
"$VENV/bin/ruff" check carbon webapp tests tools bench
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
