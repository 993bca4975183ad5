"""Closing receiver connections at shutdown without losing what senders already wrote.

Closing a socket that still has unread bytes in its receive buffer makes the kernel
send a reset and discard them: whatever a sender wrote last is lost. At shutdown each
receiver connection is instead read again (whatever flow control said), its write side
is closed (FIN: a sender that honours it, such as our relay, stops writing, flushes
and closes), and what arrives is handled until the sender closes, the connection has
been quiet for ``quiet`` seconds, or ``limit`` seconds have passed (then it is cut).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer


class ConnectionDrain:
    """One connection being drained: a quiet timer, reset by every read."""

    def __init__(self, protocol: Any, reactor: Any, quiet: float) -> None:
        self.protocol = protocol
        self.reactor = reactor
        self.quiet = quiet
        self.call = reactor.callLater(quiet, self.close)

    def touch(self) -> None:
        if self.call.active():
            self.call.reset(self.quiet)

    def close(self) -> None:
        self.protocol.transport.loseConnection()

    def cancel(self) -> None:
        if self.call.active():
            self.call.cancel()


def drain_connections(connections: set[Any], reactor: Any, quiet: float = 0.5,
                      limit: float = 5.0) -> defer.Deferred:
    """Drain every receiver connection in ``connections`` (a live set the receivers
    leave when they close); fires once all are closed."""
    done: defer.Deferred = defer.Deferred()
    drains = []
    for protocol in list(connections):
        transport = protocol.transport
        protocol.draining = ConnectionDrain(protocol, reactor, quiet)
        drains.append(protocol.draining)
        transport.resumeProducing()
        transport.loseWriteConnection()
    deadline = reactor.seconds() + limit

    def poll() -> None:
        if not connections:
            for drain in drains:
                drain.cancel()
            done.callback(len(drains))
            return
        if reactor.seconds() >= deadline:
            for protocol in list(connections):
                protocol.transport.abortConnection()
        reactor.callLater(0.02, poll)

    poll()
    return done
