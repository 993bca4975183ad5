#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# Build the C accelerators or fail (their tests then check the C paths are the ones used).
export CARBON_REQUIRE_NATIVE=1
"$VENV/bin/pip" install -q --upgrade pip setuptools wheel
"$VENV/bin/pip" install -q -e '.[test]'
if [ -x tools/system-deps.sh ]; then
    tools/system-deps.sh
fi
"$VENV/bin/ruff" check carbon webapp tests tools bench
"$VENV/bin/mypy"  # pyproject.toml [tool.mypy]: strict on the typed modules, the rest as listed
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
