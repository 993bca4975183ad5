"""TCP keepalive on a connection's socket: TCP_KEEPALIVE and its TCP_KEEPIDLE,
TCP_KEEPINTVL and TCP_KEEPCNT, read once from carbon.conf; the receivers' connections and
the relay's destination connections both use it."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

KEEPALIVE_KEYS = ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")


@dataclass(frozen=True)
class KeepAlive:
    """Whether to turn keepalive on, and the TCP_KEEP* options that are set."""

    enabled: bool  # TCP_KEEPALIVE
    options: tuple[tuple[str, int], ...]  # (name, value) of the TCP_KEEP* keys set

    @classmethod
    def from_settings(cls, settings: Any) -> KeepAlive:
        return cls(enabled=bool(settings["TCP_KEEPALIVE"]),
                   options=tuple((name, int(settings[name])) for name in KEEPALIVE_KEYS
                                 if settings.get(name) is not None))

    def enable(self, transport: Any) -> None:
        """Turn keepalive on for a Twisted TCP transport (anything else is left alone:
        only socket transports have a handle, not a test's string transport)."""
        if not self.enabled or not hasattr(transport, "getHandle"):
            return
        sock = transport.getHandle()
        if getattr(sock, "type", None) != socket.SOCK_STREAM:  # a socket-like handle
            return
        transport.setTcpKeepAlive(1)
        for name, value in self.options:
            flag = getattr(socket, name, None)  # TCP_KEEP* are not on every platform
            if flag is not None:
                sock.setsockopt(socket.SOL_TCP, flag, value)
