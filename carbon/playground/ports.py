"""Free loopback ports for daemons that bind them later (the playground and the tests)."""

from __future__ import annotations

import random
import socket

_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A free loopback port for a daemon that binds it later.

    Chosen below the kernel's ephemeral range: a port from bind(0) can be taken as the
    local end of some outgoing connection before the daemon binds it; these cannot.
    Never the same port twice in one process.
    """
    low = _ephemeral_low()
    chooser = random.SystemRandom()
    for _attempt in range(500):
        port = chooser.randrange(min(20000, low - 1000), low)
        if port in _HANDED_OUT:
            continue
        try:
            for family_kind in {kind, socket.SOCK_STREAM}:
                with socket.socket(socket.AF_INET, family_kind) as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
