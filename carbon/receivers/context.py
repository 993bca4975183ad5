"""State shared by every receiver connection of one daemon."""

from __future__ import annotations

from typing import Any

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog
from carbon.pipeline import Pipeline
from carbon.receivers.flow import FlowControl


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
        self.accepting = True
        # hand_off(conn, kind, factory): set by a daemon that spreads inbound TCP
        # connections over worker processes ("line" or "pickle"; see listeners).
        self.hand_off: Any = None
        self.bad_lines = IntervalLog(log.listener, "invalid lines received")
        self.bad_pickles = IntervalLog(log.listener, "invalid pickles received")
        self.failed_batches = IntervalLog(log.listener, "batches failed in the pipeline")
        self.max_length = int(settings.get("LINE_RECEIVER_MAX_LENGTH", 16384))
        self.resolution = int(settings.MIN_TIMESTAMP_RESOLUTION or 0)

    def connection_opened(self, protocol: Any) -> None:
        self.connections.add(protocol)
        self.flow.register(protocol.transport)
        self._check_accepting()

    def connection_closed(self, protocol: Any) -> None:
        self.connections.discard(protocol)
        self.flow.unregister(protocol.transport)
        self._check_accepting()

    def _check_accepting(self) -> None:
        limit = self.settings.MAX_RECEIVER_CONNECTIONS
        full = len(self.connections) >= limit
        if full and self.accepting:
            self.accepting = False
            for port in self.ports:
                self.log.listener("Pausing %s (%d/%s connections)" % (
                    port, len(self.connections), limit))
                port.pauseProducing()
        elif not full and not self.accepting:
            self.accepting = True
            for port in self.ports:
                self.log.listener("Resuming %s (%d/%s connections)" % (
                    port, len(self.connections), limit))
                port.resumeProducing()

    def flush_logs(self) -> None:
        self.bad_lines.flush()
        self.bad_pickles.flush()
        self.failed_batches.flush()
