"""A listening TCP port that hands each accepted connection to a dispatcher.

Used when a daemon spreads its inbound connections over worker processes: the
dispatcher either adopts the socket into this process's reactor (``adopt``) or passes
it to another process (SCM_RIGHTS); either way the accepted socket object is then
closed here, which releases only this process's descriptor (no shutdown, no FIN).
"""

from __future__ import annotations

import errno
import socket
from typing import Any, Callable

from twisted.internet import defer
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IReadDescriptor
from zope.interface import implementer

from carbon.receivers.limits import BACKOFF_SECONDS, EXHAUSTED, ConnectionLimit

Dispatch = Callable[[socket.socket], None]


@implementer(IReadDescriptor)
class HandOffPort:
    """Listen on ``interface:port``; every accepted socket goes to ``dispatch``.

    Offers what the receivers need of a port: ``stopListening``, ``pauseProducing`` /
    ``resumeProducing`` and ``getHost``; backs off for a second when accept() runs out of
    descriptors.
    """

    def __init__(self, reactor: Any, port: int, dispatch: Dispatch, backlog: int = 1024,
                 interface: str = "0.0.0.0", limit: ConnectionLimit | None = None) -> None:
        self.reactor = reactor
        self.dispatch = dispatch
        self.limit = limit
        self.paused = False
        self._backoff: Any = None
        self.family = socket.AF_INET6 if ":" in interface else socket.AF_INET
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((interface, port))
            sock.listen(backlog)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self.socket = sock
        self.reading = False
        self.startReading()

    def __str__(self) -> str:
        return "<HandOffPort on %s>" % (self.socket.getsockname()[1],)

    def fileno(self) -> int:
        return self.socket.fileno()

    def logPrefix(self) -> str:  # noqa: N802
        return "HandOffPort"

    def startReading(self) -> None:  # noqa: N802
        if not self.reading:
            self.reading = True
            self.reactor.addReader(self)

    def doRead(self) -> None:  # noqa: N802
        for _ in range(100):
            try:
                conn, _ = self.socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in EXHAUSTED:  # back off instead of a busy loop
                    if self.limit is not None:
                        self.limit.descriptors_exhausted(self, exc)
                    self._stop_reading()
                    if self._backoff is not None and self._backoff.active():
                        self._backoff.cancel()  # (accept_waiting at shutdown retries)
                    self._backoff = self.reactor.callLater(BACKOFF_SECONDS, self._retry)
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPERM, errno.EPROTO):
                    continue
                raise
            try:
                self.dispatch(conn)
            finally:
                conn.close()

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.socket.close()

    def _stop_reading(self) -> None:
        if self.reading:
            self.reading = False
            self.reactor.removeReader(self)

    def _retry(self) -> None:
        self._backoff = None
        if not self.paused and self.socket.fileno() >= 0:
            self.startReading()

    def pauseProducing(self) -> None:  # noqa: N802
        self.paused = True
        self._stop_reading()

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False
        if self._backoff is None:
            self.startReading()

    def stopListening(self) -> defer.Deferred[None]:  # noqa: N802
        if self._backoff is not None and self._backoff.active():
            self._backoff.cancel()
        self._backoff = None
        self.pauseProducing()
        self.socket.close()
        return defer.succeed(None)

    def getHost(self) -> Any:  # noqa: N802
        host, port = self.socket.getsockname()[:2]
        address = IPv6Address if self.family == socket.AF_INET6 else IPv4Address
        return address("TCP", host, port)


def adopt(reactor: Any, conn: socket.socket, factory: Any) -> None:
    """Give an accepted socket to this reactor with ``factory`` (its descriptor is
    duplicated; the caller closes ``conn``)."""
    reactor.adoptStreamConnection(conn.fileno(), conn.family, factory)
