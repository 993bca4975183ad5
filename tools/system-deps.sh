#!/usr/bin/env bash
# System packages the tests use (Debian): installed only when missing.
set -euo pipefail
need=()
command -v rabbitmq-server >/dev/null 2>&1 || need+=(rabbitmq-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        echo "system-deps: cannot install ${need[*]} (not root or no apt-get); tests needing them will fail" >&2
    fi
fi
