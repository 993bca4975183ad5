#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them.
#   tools/test.sh [pytest args]     the suite (or what the arguments select) in $VENV (.venv)
# With CARBON_SYSTEM_TESTS=1 (.ci/run) and no arguments, the whole suite then runs again on
# Debian 13's Python 3.13 in a debootstrap chroot (tools/test-py313.sh); both pytest summary
# lines are printed last, and the exit status is non-zero if either run failed.
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
case "${CARBON_SYSTEM_TESTS:-}" in
    1|true|TRUE|True|yes|YES) both=$(( $# == 0 )) ;;
    *) both=0 ;;
esac
if [ "$both" = 0 ] || [ -n "${CARBON_IN_PY313_CHROOT:-}" ]; then
    exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
fi

summary() {  # pytest's last summary line in a log ("1310 passed, 4 skipped in 512.3s ...")
    local line
    line=$(grep -E ' in [0-9.]+s( \([0-9:]+\))?( =+)?$' "$1" | tail -n 1) || true
    echo "${line:-no pytest summary}"
}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
here=$("$VENV/bin/python" -c 'import platform; print(platform.python_version())')
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider 2>&1 | tee "$logs/here.log"
status_here=${PIPESTATUS[0]}
tools/test-py313.sh 2>&1 | tee "$logs/py313.log"
status_py313=${PIPESTATUS[0]}
set -e
echo
echo "suite on Python $here (this machine): $(summary "$logs/here.log") [exit $status_here]"
echo "suite on Python 3.13 (Debian 13 chroot): $(summary "$logs/py313.log") [exit $status_py313]"
# both runs' counts on one closing line ("total: N passed, N failed, N skipped")
count() { grep -oE "[0-9]+ $2" <<<"$(summary "$1")" | grep -oE '^[0-9]+' || echo 0; }
echo "total: $(( $(count "$logs/here.log" passed) + $(count "$logs/py313.log" passed) )) passed, \
$(( $(count "$logs/here.log" failed) + $(count "$logs/py313.log" failed) \
    + $(count "$logs/here.log" error) + $(count "$logs/py313.log" error) )) failed, \
$(( $(count "$logs/here.log" skipped) + $(count "$logs/py313.log" skipped) )) skipped"
[ "$status_here" = 0 ] && [ "$status_py313" = 0 ]
