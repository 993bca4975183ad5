#!/usr/bin/env bash
# The whole test suite again on Debian 13 (trixie)'s own Python 3.13, in a debootstrap chroot.
#
#   tools/test-py313.sh [pytest args]      (tools/test.sh calls it under CARBON_SYSTEM_TESTS=1)
#   tools/test-py313.sh --prepare          only build (or find) the cached tree
#   tools/test-py313.sh --key | --mirror   print the tree's cache key / the Debian mirror used
#
# Needs root, debootstrap (installed when missing), unshare and chroot. The tree is made from
# Debian's packages (the mirror is the one this machine's apt uses, read at run time) and cached
# under CARBON_PY313_CACHE (default ~/.cache/carbon-fast/trixie-py313) as rootfs-<key>, where
# <key> hashes the package list, tools/system-deps.sh and RECIPE: changing either builds a new
# tree. A tree is built in a temporary sibling folder and renamed into place only when complete.
#
# Everything is mounted in a private mount namespace (unshare -m), so the mounts vanish with
# it even if this script is killed; a trap unmounts them on every exit anyway. Inside, the
# checkout is bind-mounted at its own path and the suite runs in VENV=.venv-py313 (the C
# modules it builds in place are tagged cpython-313 and sit beside the cpython-311 ones).
# The reference peers (carbon 1.1.10 needs Python < 3.12, graphite-web 1.1.10 Python 3.9)
# come from the host's pyenv, bind-mounted read-only at its own path; their venvs are kept
# in $CACHE/bench (CARBON_BENCH_CACHE inside). Without a pyenv the reference tests say what
# to install (they fail under CI=true, as on the host).
# Prints the suite's pytest summary line last; exits with pytest's status.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT=$PWD
SELF="$CHECKOUT/tools/test-py313.sh"
CACHE="${CARBON_PY313_CACHE:-$HOME/.cache/carbon-fast/trixie-py313}"
SUITE=trixie
RECIPE=1   # bump when the build steps below change
# What the suite needs beyond tools/system-deps.sh (which runs inside too): the interpreter,
# its venv module and headers, a C compiler for the accelerators; ps/kill for the daemons' tests;
# git for the tests that read the checkout's history and ignore rules.
PACKAGES=(ca-certificates python3 python3-venv python3-dev gcc libc6-dev procps git)

log() { echo "test-py313: $*" >&2; }
die() { log "$*"; exit 1; }

mirror() {
    # The Debian mirror this machine's apt uses (deb822 or one-line format), never written down.
    local uri=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/ {u=$2} /^Suites:/ && u && $0 !~ /security/ {print u; exit}' \
              /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++)
                   if ($i ~ /^(https?|ftp):/) {print $i; exit}}' /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || die "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
    echo "$uri"
}

tree_key() {
    { echo "recipe $RECIPE suite $SUITE"; printf '%s\n' "${PACKAGES[@]}"; cat tools/system-deps.sh; } \
        | sha256sum | cut -c1-16
}

mounts_under() {
    # Mount points at or below $1 in this mount namespace, deepest first.
    awk -v root="$1" '$5 == root || index($5, root "/") == 1 {print $5}' /proc/self/mountinfo | sort -r
}

unmount_all() {
    local target=$1 point
    for point in $(mounts_under "$target"); do
        umount "$point" 2>/dev/null || umount -l "$point" 2>/dev/null || true
    done
    if [ -n "$(mounts_under "$target")" ]; then
        log "still mounted under $target: $(mounts_under "$target" | tr '\n' ' ')"
        return 1
    fi
}

mount_system() {
    # /proc, /sys, /dev (with /dev/pts, /dev/shm) and a fresh /run into the tree $1.
    local tree=$1
    # the tree's root a mount point of its own, as / is: `ip -n` (the cluster tests'
    # network namespaces) remounts / as a slave, which fails on a plain directory
    mount --bind "$tree" "$tree"
    mount -t proc proc "$tree/proc"
    mount --rbind /sys "$tree/sys"
    mount --rbind /dev "$tree/dev"
    mount -t tmpfs -o mode=755 tmpfs "$tree/run"
    cp /etc/resolv.conf "$tree/etc/resolv.conf"   # pip and npm reach their registries
    cp /etc/hosts "$tree/etc/hosts"
    # this machine's own CAs (a TLS-inspecting egress proxy's, say) are trusted inside too
    local local_cas=/usr/local/share/ca-certificates
    if [ -n "$(ls -A "$local_cas" 2>/dev/null)" ] && [ -x "$tree/usr/sbin/update-ca-certificates" ] \
            && ! diff -rq "$local_cas" "$tree$local_cas" >/dev/null 2>&1; then
        rm -rf "${tree:?}$local_cas" && cp -r "$local_cas" "$tree$local_cas"
        in_tree "$tree" update-ca-certificates >/dev/null 2>&1
    fi
}

in_tree() {
    # A command in the tree with a clean environment: pip, npm and Python's ssl read the
    # tree's CA bundle; a proxy set here is passed on.
    local tree=$1 bundle=/etc/ssl/certs/ca-certificates.crt name pass=()
    shift
    for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
        [ -z "${!name:-}" ] || pass+=("$name=${!name}")
    done
    chroot "$tree" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        PIP_CERT=$bundle SSL_CERT_FILE=$bundle REQUESTS_CA_BUNDLE=$bundle NODE_EXTRA_CA_CERTS=$bundle \
        PIP_DISABLE_PIP_VERSION_CHECK=1 "${pass[@]}" "$@"
}

# ---- stage 2 (in a private mount namespace): build a tree, or run the suite in one ----------
if [ "${1:-}" = "--build-in-namespace" ]; then
    build=$2
    trap 'unmount_all "$build"' EXIT
    debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$build" "$(mirror)" \
        > "$build.debootstrap.log" 2>&1 || { tail -20 "$build.debootstrap.log" >&2; exit 1; }
    mount_system "$build"
    # Package scripts must never start services in the tree.
    printf '#!/bin/sh\nexit 101\n' > "$build/usr/sbin/policy-rc.d"
    chmod +x "$build/usr/sbin/policy-rc.d"
    in_tree "$build" apt-get -qq update
    in_tree "$build" apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
    cp tools/system-deps.sh "$build/tmp/system-deps.sh"
    in_tree "$build" bash /tmp/system-deps.sh
    rm -f "$build/tmp/system-deps.sh"
    in_tree "$build" apt-get clean
    in_tree "$build" python3 --version
    exit 0
fi

if [ "${1:-}" = "--run-in-namespace" ]; then
    tree=$2; shift 2
    trap 'unmount_all "$tree"' EXIT
    # a clean /tmp every run (a killed run may have left files there): before anything is
    # mounted (a checkout under /tmp is bind-mounted below it), and never across a mount
    if [ -z "$(mounts_under "$tree/tmp")" ]; then
        find "$tree/tmp" -mindepth 1 -xdev -delete 2>/dev/null || true
    fi
    mount_system "$tree"
    mkdir -p "$tree$CHECKOUT" "$CACHE/bench" "$tree/var/cache/carbon-bench"
    mount --bind "$CHECKOUT" "$tree$CHECKOUT"
    mount --bind "$CACHE/bench" "$tree/var/cache/carbon-bench"
    pyenv_env=()
    pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    if [ -d "$pyenv_root/versions" ]; then
        mkdir -p "$tree$pyenv_root"
        mount --bind "$pyenv_root" "$tree$pyenv_root"
        mount -o remount,bind,ro "$tree$pyenv_root"
        pyenv_env=(PYENV_ROOT="$pyenv_root")
    else
        log "no pyenv at $pyenv_root: the reference peers (Python 3.9-3.11) cannot be made inside"
    fi
    in_tree "$tree" python3 --version
    status=0
    in_tree "$tree" "${pyenv_env[@]}" VENV=.venv-py313 CARBON_BENCH_CACHE=/var/cache/carbon-bench \
        CARBON_SYSTEM_TESTS=0 CARBON_IN_PY313_CHROOT=1 CI="${CI:-}" SKIP_REFERENCE="${SKIP_REFERENCE:-}" \
        bash -c 'cd "$1" && shift && exec tools/test.sh "$@"' test "$CHECKOUT" "$@" || status=$?
    exit "$status"
fi

# ---- what a tree would be: for tests and for looking -----------------------------------------
case "${1:-}" in
    --key) tree_key; exit 0 ;;
    --mirror) mirror; exit 0 ;;
esac

# ---- stage 1 (host) -------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
[ -z "${CARBON_IN_PY313_CHROOT:-}" ] || die "already inside the Python 3.13 chroot"
command -v unshare >/dev/null && command -v chroot >/dev/null || die "needs unshare and chroot (util-linux, coreutils)"
if ! command -v debootstrap >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=900 -qq update
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
        --no-install-recommends debootstrap >/dev/null
fi
[ -e "/usr/share/debootstrap/scripts/$SUITE" ] \
    || die "this debootstrap has no $SUITE script: install debootstrap >= 1.0.128"
mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"
flock 9   # one run at a time uses (or builds) the tree
key=$(tree_key)
tree="$CACHE/rootfs-$key"
# what a killed build left (none is running: we hold the lock)
rm -rf --one-file-system "$CACHE"/.build-*
if [ ! -e "$tree/.complete" ]; then
    rm -rf --one-file-system "$tree"   # never trusted without its completion mark
    build="$CACHE/.build-$key-$$"
    cleanup_build() { rm -rf --one-file-system "$build" "$build.debootstrap.log"; }
    trap cleanup_build EXIT
    mkdir -p "$build"
    started=$(date +%s)
    log "building the $SUITE tree (key $key) in $build"
    unshare --mount --propagation private "$SELF" --build-in-namespace "$build" 9>&-
    printf 'suite %s\nrecipe %s\npackages %s\n' "$SUITE" "$RECIPE" "${PACKAGES[*]}" > "$build/.complete"
    rm -f "$build.debootstrap.log"
    mv -T "$build" "$tree"
    trap - EXIT
    log "tree ready in $(( $(date +%s) - started )) s: $tree"
    # trees of other keys are stale now (nothing can be using them: we hold the lock)
    for old in "$CACHE"/rootfs-*; do
        [ "$old" = "$tree" ] || rm -rf --one-file-system "$old"
    done
fi
if [ "${1:-}" = "--prepare" ]; then
    log "tree: $tree"
    exit 0
fi
status=0
unshare --mount --propagation private "$SELF" --run-in-namespace "$tree" "$@" 9>&- || status=$?
exit "$status"
