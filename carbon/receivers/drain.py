"""Closing receiver connections at shutdown without losing what senders already wrote.

Closing a socket that still has unread bytes in its receive buffer makes the kernel
send a reset and discard them: whatever a sender wrote last is lost. At shutdown each
receiver connection is instead read again (whatever flow control said), its write side
is closed (FIN: a sender that honours it, such as our relay, stops writing, flushes
and closes), and what arrives is handled until the sender closes, the connection has
been quiet for ``quiet`` seconds, or ``limit`` seconds have passed (then it is cut).

A listening port closed with connections the kernel has completed but the daemon has
not accepted yet (its listen backlog) resets them, and whatever their senders wrote is
lost too. ``accept_waiting`` accepts them first (the port's own accept, until the
backlog is empty), so they are drained like the rest; a connection that joins the set
while the drain runs is drained too.
"""

from __future__ import annotations

import select
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


def waiting(fileno: int) -> bool:
    """Whether a descriptor is readable now (for a listening socket: connections wait
    in its backlog)."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN)
    return bool(poller.poll(0))


def accept_waiting(port: Any, rounds: int = 1000) -> None:
    """Accept, through ``port``'s own ``doRead``, every connection waiting in its listen
    backlog (at most ``rounds`` reads: each accepts one or more)."""
    for _ in range(rounds):
        try:
            fileno = port.fileno()
        except (OSError, ValueError):
            return
        if fileno < 0 or not waiting(fileno):
            return
        port.doRead()


def drain_connections(connections: set[Any], reactor: Any, quiet: float = 0.5,
                      limit: float = 5.0) -> defer.Deferred:
    """Drain every receiver connection in ``connections`` (a live set the receivers
    leave when they close); fires once all are closed."""
    done: defer.Deferred = defer.Deferred()
    drains: list[ConnectionDrain] = []

    def begin() -> None:
        for protocol in list(connections):
            if protocol.draining is not None:  # begun in an earlier poll
                continue
            transport = protocol.transport
            protocol.draining = ConnectionDrain(protocol, reactor, quiet)
            drains.append(protocol.draining)
            transport.resumeProducing()
            transport.loseWriteConnection()

    deadline = reactor.seconds() + limit

    def poll() -> None:
        begin()  # (one adopted since, such as a RELAY_WORKERS hand-off, is read too)
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
