"""A counting destination for relay tests: a real TCP server on 127.0.0.1.

Decodes pickle or line data and keeps every point. Used in-process (on the test's
reactor) or as a separate process::

    python countsink.py --protocol pickle --port 0 --out points.json

The process prints ``PORT <n>`` once listening. On SIGTERM it drains like a carbon
daemon shutting down: stops listening, half-closes each connection, reads until the
sender closes (at most 5 s), writes the points as JSON to ``--out`` and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from zope.interface import implementer

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from carbon.relay.wire import DECODERS  # noqa: E402


@implementer(IHalfCloseableProtocol)
class _SinkProtocol(Protocol):
    def __init__(self, sink: CountingSink) -> None:
        self.sink = sink
        self.buffer = b""
        self.closed: defer.Deferred = defer.Deferred()

    def connectionMade(self) -> None:  # noqa: N802
        self.sink.connections.add(self)
        self.sink.accepted += 1

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.sink.bytes += len(data)
        if self.sink.raw is not None:
            self.sink.raw.append(data)
        if self.sink.stall:
            self.transport.pauseProducing()
        points, self.buffer, bad = self.sink.decode(self.buffer + data)
        self.sink.points.extend(points)
        self.sink.bad += bad

    def readConnectionLost(self) -> None:  # noqa: N802
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:  # noqa: N802
        pass

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.sink.connections.discard(self)
        if not self.closed.called:
            self.closed.callback(None)


class CountingSink:
    """Listens on 127.0.0.1 and records every datapoint it receives."""

    def __init__(self, reactor: Any, protocol: str = "pickle", port: int = 0,
                 capture_raw: bool = False, rcvbuf: int | None = None) -> None:
        self.reactor = reactor
        self.decode = DECODERS[protocol]
        self.requested_port = port
        self.points: list[tuple[str, float, float]] = []
        self.connections: set[_SinkProtocol] = set()
        self.accepted = 0
        self.bytes = 0
        self.bad = 0
        self.stall = False
        self.raw: list[bytes] | None = [] if capture_raw else None
        self.rcvbuf = rcvbuf
        self.listener: Any = None

    def listen(self) -> int:
        factory = Factory.forProtocol(lambda: _SinkProtocol(self))
        self.listener = self.reactor.listenTCP(self.requested_port, factory,
                                               interface="127.0.0.1")
        self.requested_port = self.listener.getHost().port
        if self.rcvbuf:  # accepted sockets inherit a small receive buffer
            self.listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
        return self.requested_port

    @property
    def port(self) -> int:
        return self.requested_port

    def set_stall(self, stall: bool) -> None:
        """Stop (or resume) reading, as an overloaded destination would."""
        self.stall = stall
        for conn in self.connections:
            if stall:
                conn.transport.pauseProducing()
            else:
                conn.transport.resumeProducing()

    @defer.inlineCallbacks
    def stop(self, graceful: bool = True, timeout: float = 5.0) -> Any:
        """Stop listening and close connections: draining (half-close) or abruptly."""
        if self.listener is not None:
            yield self.listener.stopListening()
            self.listener = None
        waits = []
        for conn in list(self.connections):
            waits.append(conn.closed)
            if graceful:
                conn.transport.resumeProducing()
                conn.transport.loseWriteConnection()
            else:
                conn.transport.abortConnection()
        if waits:
            timer = self.reactor.callLater(timeout, lambda: [
                c.transport.abortConnection() for c in list(self.connections)])
            yield defer.DeferredList(waits)
            if timer.active():
                timer.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", default="pickle")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from twisted.internet import reactor

    sink = CountingSink(reactor, args.protocol, args.port)
    print("PORT %d" % sink.listen(), flush=True)

    def shutdown() -> None:
        def write(_: Any) -> None:
            with open(args.out + ".tmp", "w") as handle:
                json.dump(sink.points, handle)
            os.replace(args.out + ".tmp", args.out)
            reactor.stop()
        sink.stop(graceful=True).addBoth(write)

    signal.signal(signal.SIGTERM, lambda *_: reactor.callFromThread(shutdown))
    reactor.run(installSignalHandlers=False)


if __name__ == "__main__":
    main()
