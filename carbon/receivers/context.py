"""State shared by every receiver connection of one daemon."""

from __future__ import annotations

from typing import Any

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog
from carbon.pipeline import Pipeline
from carbon.flow import FlowControl
from carbon.receivers.limits import ConnectionLimit


class ReceiverContext:
    """Settings, pipeline, stats, flow control, logs and live connections.

    Built once per daemon and handed to every receiver factory; no globals.
    """

    def __init__(self, settings: Settings, pipeline: Pipeline, stats: Stats,
                 flow: FlowControl, log: CarbonLog) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.stats = stats
        self.flow = flow
        self.log = log
        self.connections: set[Any] = set()
        self.ports: list[Any] = []
        self.limit = ConnectionLimit(settings, log.listener)
        # hand_off(conn, kind, factory): set by a daemon that spreads inbound TCP
        # connections over worker processes ("line" or "pickle"; see listeners).
        self.hand_off: Any = None
        self.bad_lines = IntervalLog(log.listener, "invalid lines received")
        self.bad_pickles = IntervalLog(log.listener, "invalid pickles received")
        self.failed_batches = IntervalLog(log.listener, "batches failed in the pipeline")
        self.max_length = int(settings["LINE_RECEIVER_MAX_LENGTH"])
        self.resolution = int(settings.MIN_TIMESTAMP_RESOLUTION or 0)
        # Bytes a TCP receiver asks for in one read (0 keeps Twisted's 64 KiB); a daemon
        # whose stages take whole reads may ask for more: fewer calls a line.
        self.read_size = 0

    def admit(self) -> bool:
        """May one more receiver connection open? (counted and logged when not)."""
        return self.limit.admit(len(self.connections))

    def connection_opened(self, protocol: Any) -> None:
        self.connections.add(protocol)
        self.flow.register(protocol.transport)

    def connection_closed(self, protocol: Any) -> None:
        self.connections.discard(protocol)
        self.flow.unregister(protocol.transport)

    def flush_logs(self) -> None:
        self.bad_lines.flush()
        self.bad_pickles.flush()
        self.failed_batches.flush()
        self.limit.flush(len(self.connections))
