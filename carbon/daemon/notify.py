"""systemd's readiness protocol (sd_notify), for units of ``Type=notify``.

A daemon started by systemd finds NOTIFY_SOCKET in its environment and sends
``READY=1`` once it listens (``systemctl start`` returns then, and a daemon that cannot
start fails the start) and ``STOPPING=1`` when it begins to shut down. Without
NOTIFY_SOCKET (any other way of running) nothing is sent.
"""

from __future__ import annotations

import os
import socket


def notify(state: str, environ: dict | None = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to systemd; False when not run by systemd."""
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address or address[0] not in "/@":
        return False
    if address[0] == "@":  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(state.encode("utf-8"), address)
    except OSError:
        return False
    return True
