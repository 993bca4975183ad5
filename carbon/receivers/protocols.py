"""Twisted protocols for plaintext (TCP, UDP) and pickle metric receivers.

Each socket read is parsed in bulk into one batch and handed to the pipeline.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import DatagramProtocol, Factory, Protocol
from twisted.protocols.policies import TimeoutMixin

from carbon.pipeline import Batch
from carbon.receivers.context import ReceiverContext
from carbon.formats.pickled import native_points, points_from_pickle, split_frames
from carbon.formats.plaintext import canonical_lines, parse_lines, printable, split_buffer
from carbon.formats.unpickler import PICKLE_ERRORS, loads


class MetricReceiver(Protocol, TimeoutMixin):
    """Connection bookkeeping shared by the TCP receivers."""

    kind = "MetricReceiver"

    def __init__(self, context: ReceiverContext) -> None:
        self.context = context
        self.peer = "peer"
        self.draining: Any = None  # a ConnectionDrain once shutdown has begun

    def connectionMade(self) -> None:  # noqa: N802
        config = self.context.config
        # a Twisted TCP transport has bufferSize; TLS and test transports do not
        if self.context.read_size and hasattr(self.transport, "bufferSize"):
            self.transport.bufferSize = self.context.read_size
        self.setTimeout(config.idle_timeout)
        config.keepalive.enable(self.transport)
        peer = self.transport.getPeer()
        # Twisted's address: a UNIX socket's has no host or port
        self.peer = "%s:%s" % (getattr(peer, "host", "?"), getattr(peer, "port", "?"))
        if config.log_success:
            self.context.log.listener("%s connection with %s established" % (self.kind, self.peer))
        self.context.connection_opened(self)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.setTimeout(None)
        self.flush_tail()
        config = self.context.config
        if reason is None or reason.check(ConnectionDone):
            if config.log_success:
                self.context.log.listener("%s connection with %s closed cleanly" % (
                    self.kind, self.peer))
        elif config.log_lost:
            self.context.log.listener("%s connection with %s lost: %s" % (
                self.kind, self.peer, reason.value))
        self.context.connection_closed(self)

    def flush_tail(self) -> None:
        """Called when the connection ends; receivers with buffered input override it."""

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.received(data)
        if self.draining is not None:
            self.draining.touch()

    def received(self, data: bytes) -> None:
        """Handle one read; each receiver kind implements it."""
        raise NotImplementedError

    def deliver(self, batch: Batch) -> None:
        if batch:
            self.context.stats.increment("metricsReceived", len(batch))
            self.context.pipeline.process(batch)


class LineReceiver(MetricReceiver):
    """``metric value timestamp\\n`` over TCP."""

    kind = "MetricLineReceiver"

    def __init__(self, context: ReceiverContext) -> None:
        super().__init__(context)
        self.buffer = b""
        self.skipping = False

    def received(self, data: bytes) -> None:
        self.resetTimeout()
        if self.skipping:
            cut = data.find(b"\n")
            if cut < 0:
                return
            data = data[cut + 1:]
            self.skipping = False
        context = self.context
        if self.buffer:
            data = self.buffer + data
        cut = data.rfind(b"\n") + 1
        tail = data[cut:] if cut < len(data) else b""
        overlong = 0
        if len(tail) > context.max_length:
            overlong += 1
            tail = b""
            self.skipping = True
        self.buffer = tail
        if not cut:
            if overlong:
                self._bad([b"<line longer than %d bytes>" % context.max_length])
            return
        chunk = data if cut == len(data) else data[:cut]
        if not context.resolution:
            # Lean paths: a stage consumes the whole read (the aggregator), or a read
            # of canonical lines moves on as bytes (the relay); else parse below.
            pipeline = context.pipeline
            count = pipeline.process_chunk(chunk, context.max_length)
            if count is None and pipeline.accepts_lines:
                batch = canonical_lines(chunk, context.max_length)
                if batch is not None:
                    count = len(batch)
                    pipeline.process_lines(batch)
            if count is not None:
                if overlong:
                    self._bad([b"<line longer than %d bytes>" % context.max_length])
                context.stats.increment("metricsReceived", count)
                return
        lines, _, dropped = split_buffer(chunk, context.max_length)
        overlong += dropped
        if overlong:
            self._bad([b"<line longer than %d bytes>" % context.max_length] * overlong)
        self._parse(lines)

    def _parse(self, lines: list[bytes]) -> None:
        batch, bad = parse_lines(lines, resolution=self.context.resolution)
        if bad:
            self._bad(bad)
        self.deliver(batch)

    def _bad(self, lines: list[bytes]) -> None:
        self.context.stats.increment("invalidLines", len(lines))
        self.context.bad_lines.record("from %s [%s]" % (self.peer, printable(lines[0])),
                                      len(lines))

    def flush_tail(self) -> None:
        # Unlike carbon 1.1.10, a last line without a newline is not lost.
        if self.buffer and not self.skipping:
            tail, self.buffer = self.buffer, b""
            self._parse([tail])


class PickleReceiver(MetricReceiver):
    """4-byte big-endian length, then a pickle of ``[(metric, (timestamp, value)), ...]``."""

    kind = "MetricPickleReceiver"

    def __init__(self, context: ReceiverContext) -> None:
        super().__init__(context)
        self.buffer = b""
        self.max_length = context.config.pickle_max_length
        self.insecure = context.config.insecure_unpickler

    def received(self, data: bytes) -> None:
        self.resetTimeout()
        frames, self.buffer, oversized = split_frames(self.buffer + data, self.max_length)
        batch: Batch = []
        bad = 0
        # The C reader answers for plain lists of (metric, (timestamp, value)) exactly as
        # the safe unpickler and points_from_pickle would; anything else (and the
        # insecure unpickler, whose str decoding differs) goes the general way.
        fast = None if self.insecure else native_points
        for payload in frames:
            read = fast(payload) if fast is not None else None
            if read is None:
                try:
                    items = loads(payload, self.insecure)
                except PICKLE_ERRORS as exc:
                    self._close_bad("%s: %s" % (type(exc).__name__, exc), batch)
                    return
                read = points_from_pickle(items)
            batch.extend(read[0])
            bad += read[1]
        if oversized is not None:
            self._close_bad("message of %d bytes exceeds PICKLE_RECEIVER_MAX_LENGTH %d"
                            % (oversized, self.max_length), batch)
            return
        if bad:
            self.context.stats.increment("invalidLines", bad)
            self.context.bad_lines.record("%d invalid datapoints in pickle from %s" % (
                bad, self.peer), bad)
        self.deliver(batch)

    def _close_bad(self, reason: str, batch: Batch) -> None:
        """Count and log a bad message, keep the good ones before it, close."""
        self.context.stats.increment("invalidPickles")
        self.context.bad_pickles.record("from %s: %s; closing connection" % (self.peer, reason))
        self.buffer = b""
        self.deliver(batch)
        self.transport.loseConnection()


class UDPReceiver(DatagramProtocol):
    """Plaintext lines in UDP datagrams; each datagram is one batch."""

    def __init__(self, context: ReceiverContext) -> None:
        self.context = context

    def datagramReceived(self, data: bytes, addr: Any) -> None:  # noqa: N802
        context = self.context
        batch, bad = parse_lines(data.split(b"\n"), resolution=context.resolution)
        if bad:
            context.stats.increment("invalidLines", len(bad))
            context.bad_lines.record("from %s [%s]" % (addr[0], printable(bad[0])), len(bad))
        if batch:
            context.stats.increment("metricsReceived", len(batch))
            context.pipeline.process(batch)


class ReceiverFactory(Factory):
    """Builds one protocol per connection; past the connection limit (MAX_RECEIVER_CONNECTIONS
    or the open-file limit less a reserve) the connection is closed at once."""

    def __init__(self, protocol_class: type, context: ReceiverContext) -> None:
        self.protocol_class = protocol_class
        self.context = context

    def buildProtocol(self, addr: Any) -> Any:  # noqa: N802
        if not self.context.admit():
            return None
        protocol = self.protocol_class(self.context)
        protocol.factory = self
        return protocol
