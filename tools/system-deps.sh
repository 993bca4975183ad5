#!/usr/bin/env bash
# System packages the tests use (Debian): installed only when missing. Package scripts
# are not allowed to start services (no system-wide broker listening on every interface;
# the tests start their own, on 127.0.0.1).
set -euo pipefail
need=()
command -v rabbitmq-server >/dev/null 2>&1 || need+=(rabbitmq-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# graphite-web 1.1.10 (the interop tests' reference render app) draws through cairocffi
ldconfig -p 2>/dev/null | grep -q 'libcairo\.so\.2' || need+=(libcairo2)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v curl >/dev/null 2>&1 || need+=(curl)
# carbon-cluster's partition test (tests/cluster: hosts in network namespaces)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# statsd 0.9.0, the end-to-end interop test's sender (tests/interop/reference.py
# statsd_install: `npm install statsd@0.9.0`, then run with node; npm brings nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v node >/dev/null 2>&1 || need+=(nodejs)
# carbon-fast install-layout (tests/deploy): systemd-sysusers and systemd-tmpfiles
command -v systemd-tmpfiles >/dev/null 2>&1 || need+=(systemd)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        policy=/usr/sbin/policy-rc.d
        created=0
        if [ ! -e "$policy" ]; then
            printf '#!/bin/sh\nexit 101\n' > "$policy"
            chmod +x "$policy"
            created=1
            trap 'rm -f "$policy"' EXIT
        fi
        apt-get -o DPkg::Lock::Timeout=900 update -qq
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends \
            "${need[@]}" >/dev/null
        if [ "$created" = 1 ]; then
            rm -f "$policy"
        fi
    else
        echo "system-deps: cannot install ${need[*]} (not root or no apt-get); tests needing them will fail" >&2
    fi
fi
