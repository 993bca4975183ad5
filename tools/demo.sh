#!/usr/bin/env bash
# The whole stack from conf/ on 127.0.0.1: carbon-relay -> carbon-cache a and b -> render app.
# Sets up .venv on first use (quietly), then runs tools/demo.py (--stop, --seconds N, --no-wait).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_WARN_SCRIPT_LOCATION=1
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# Install once (editable: later code changes need no reinstall; tools/test.sh rebuilds C).
if [ ! -x "$VENV/bin/graphite-render" ] || [ ! -x "$VENV/bin/carbon-relay.py" ] \
        || ! "$VENV/bin/python" -c "import matplotlib, twisted, whisper" 2>/dev/null; then
    echo "installing carbon-fast into $VENV (once) ..."
    "$VENV/bin/pip" install -q -q --upgrade pip setuptools wheel
    "$VENV/bin/pip" install -q -q -e '.[render]'
fi
exec "$VENV/bin/python" tools/demo.py "$@"
